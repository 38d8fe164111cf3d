"""Settings: options resolve once into frozen groups, and settings.py is the one reader of the environment."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from pytest_plsqlbench import registry
from pytest_plsqlbench import settings as settings_mod
from pytest_plsqlbench.manifests import discover, run_dialect
from pytest_plsqlbench.settings import (
    FIELDS,
    OPTIONS,
    DatabaseSettings,
    Settings,
    litellm_environment,
    oracle_environment,
)

PACKAGE = Path(settings_mod.__file__).parent

pytest_plugins = ["pytester"]


def test_every_group_is_frozen() -> None:
    s = Settings()
    for group in dataclasses.fields(s):
        value = getattr(s, group.name)
        assert dataclasses.is_dataclass(value)
        first = dataclasses.fields(value)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, first, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.database = DatabaseSettings()  # type: ignore[misc]


def test_every_option_has_a_place_in_a_group() -> None:
    names = {o.name.replace("-", "_") for o in OPTIONS}
    # The flat names in FIELDS are the option names, with three plurals for repeatable options.
    plural = {"task_dirs": "tasks", "task_ids": "task", "sources": "source", "subsets": None, "model_aliases": None}
    flat = {plural.get(k, k) for k in FIELDS} - {None}
    assert names == flat
    s = Settings()
    for group, attr in FIELDS.values():
        assert hasattr(getattr(s, group), attr), (group, attr)


def test_of_routes_flat_values_to_their_group() -> None:
    s = Settings.of(subsets=("smoke",), timeout=2.5, data=Path("/rel"), data_cache=Path("/c"), model="reference",
                    answers=Path("a.jsonl"), results=Path("r.json"), db="dsn", task_ids=("Mbpp/2",))
    assert s.tasks.subsets == ("smoke",) and s.tasks.ids == ("Mbpp/2",)
    assert s.database.timeout == 2.5 and s.database.kind == "dsn"
    assert s.data.release == Path("/rel") and s.data.cache == Path("/c")
    assert s.model.name == "reference" and s.answers.file == Path("a.jsonl")
    assert s.report.results == Path("r.json")
    assert s.answer_source == "answers:a.jsonl"
    with pytest.raises(TypeError, match="unknown setting 'timeot'"):
        Settings.of(timeot=3)


def test_from_config_groups_the_command_line(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import json
        from pytest_plsqlbench.registry import Registry
        from pytest_plsqlbench.settings import Settings

        def pytest_configure(config):
            s = Settings.from_config(config, Registry.from_plugins(config.pluginmanager))
            print("SETTINGS", json.dumps({
                "subsets": s.tasks.subsets, "ids": s.tasks.ids, "shard": s.tasks.shard,
                "dialect": s.database.dialect, "timeout": s.database.timeout, "kind": s.database.kind,
                "safety": s.database.safety,
                "model": s.model.name, "samples": s.model.samples, "cache_only": s.answers.cache_only,
                "missing": s.answers.missing, "sources": {k: str(v) for k, v in s.data.sources.items()},
            }))
        """
    )
    pytester.makeini("[pytest]\nplsql_timeout = 7\nplsql_safety = warn\n")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-s", "--collect-only", "--subset=smoke,mbpp", "--plsql-task=A,B",
        "--plsql-task=C", "--plsql-shard=2/3", "--plsql-model=reference", "--plsql-samples=3",
        "--plsql-cache-only", "--plsql-missing=exclude", "--plsql-source=x=/tmp/x.jsonl", "--plsql-timeout=4",
    )
    line = next(ln for ln in result.outlines if ln.startswith("SETTINGS "))
    import json

    got = json.loads(line.removeprefix("SETTINGS "))
    assert got == {
        "subsets": ["smoke", "mbpp"], "ids": ["A", "B", "C"], "shard": [2, 3],
        "dialect": "postgres",  # the registry's default: no dialect named
        "timeout": 4.0,  # the command line wins over the ini file
        "kind": "embedded", "safety": "warn",  # the ini file where the command line is silent
        "model": "reference", "samples": 3, "cache_only": True, "missing": "exclude",
        "sources": {"x": "/tmp/x.jsonl"},
    }


def test_the_default_dialect_is_the_registrys_and_each_bundled_subset_keeps_its_dialect() -> None:
    """PostgreSQL, the registered dialect that runs without setup, not a literal of settings.py; a
    bundled subset that lacks it (Spider2: Oracle only) runs in its own first dialect, as before."""
    default = registry.active().default_dialect().name
    assert Settings.of().database.dialect == DatabaseSettings().dialect == default == "postgres"
    for name, manifest in discover().items():
        want = "postgres" if "postgres" in manifest.dialects else manifest.dialects[0]
        assert run_dialect([manifest], default) == want, name


def test_environment_readers_take_an_explicit_mapping() -> None:
    ora = oracle_environment({"PLSQL_DSN": "u/p@h/s", "PLSQL_ORACLE_IMAGE": "img", "TNS_ADMIN": "/w"})
    assert (ora.dsn, ora.image, ora.tns_admin) == ("u/p@h/s", "img", "/w")
    assert oracle_environment({"PLSQL_ORACLE_DSN": "a/b@c/d", "PLSQL_DSN": "x"}).dsn == "a/b@c/d"
    assert litellm_environment({}).local_cost_map is True
    assert litellm_environment({"LITELLM_LOCAL_MODEL_COST_MAP": "False", "LITELLM_LOG": "DEBUG"}) == \
        settings_mod.LitellmEnvironment(local_cost_map=False, log="DEBUG")


def _environment_reads(tree: ast.AST) -> list[int]:
    """Lines that read os.environ / os.getenv (writes such as setdefault are configuration of a library)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if f.attr == "getenv" and isinstance(f.value, ast.Name) and f.value.id == "os":
                lines.append(node.lineno)
            if (f.attr in ("get", "__getitem__") and isinstance(f.value, ast.Attribute)
                    and f.value.attr == "environ"):
                lines.append(node.lineno)
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "environ":
            lines.append(node.lineno)
        if isinstance(node, ast.Compare) and any(isinstance(c, ast.Attribute) and c.attr == "environ"
                                                 for c in node.comparators):
            lines.append(node.lineno)
    return lines


def test_settings_module_is_the_only_reader_of_the_environment() -> None:
    # The one exception: the conversion sandbox passes PATH through to the child it starts
    # (the child's environment, not a setting of the harness).
    allowed = {("convert/sandbox.py", "PATH")}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "settings.py":
            continue
        source = path.read_text()
        for line in _environment_reads(ast.parse(source)):
            text = source.splitlines()[line - 1]
            if not any(rel == f and name in text for f, name in allowed):
                found.append(f"{rel}:{line}: {text.strip()}")
    assert found == []
    # The scan itself finds reads (so the assertion above can fail).
    assert _environment_reads(ast.parse("import os\nos.environ.get('X')\nos.getenv('Y')\nos.environ['Z']\n")) == [2, 3, 4]

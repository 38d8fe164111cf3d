"""The registry: dialects and families come from plug-ins (entry points, conftests), never a list."""

from __future__ import annotations

from types import SimpleNamespace

import pluggy
import pytest

from pytest_plsqlbench import hooks, registry
from pytest_plsqlbench.errors import UsageError
from pytest_plsqlbench.protocols import Dialect, Family

pytest_plugins = ["pytester"]


def _manager(*plugins: object) -> pluggy.PluginManager:
    manager = pluggy.PluginManager("pytest")
    manager.add_hookspecs(hooks)
    for plugin in plugins:
        manager.register(plugin)
    return manager


def test_the_builtins_register_through_the_entry_points() -> None:
    found = registry.outside_pytest()
    assert {"postgres", "oracle"} <= set(found.dialects)
    assert {"plsqlbench", "procarena"} <= set(found.families)
    assert all(isinstance(d, Dialect) for d in found.dialects.values())
    assert all(isinstance(f, Family) for f in found.families.values())
    assert found.dialect("oracle").kinds[0] == "container"


def test_a_return_that_is_no_dialect_is_one_error_naming_the_plugin() -> None:
    class Broken:
        @pytest.hookimpl
        def pytest_plsql_dialects(self) -> list[object]:
            return [SimpleNamespace(name="half", label="Half")]

    with pytest.raises(UsageError, match=r"plug-in .*: pytest_plsql_dialects returned .* not a dialect \(missing: .*kinds"):
        registry.Registry.from_plugins(_manager(Broken()))


def test_a_later_registration_of_a_name_wins_and_an_unknown_name_lists_the_known() -> None:
    builtin = registry.outside_pytest().dialect("postgres")

    class Mine:
        name, label, kinds, system_prompt, runs_without_setup = "postgres", "Mine", ("dsn",), "mine", False
        lexicon, safety = builtin.lexicon, builtin.safety
        resolve_database = preflight = make_backend = builtin.make_backend

    class Plugin:
        @pytest.hookimpl
        def pytest_plsql_dialects(self) -> list[object]:
            return [builtin, Mine()]

    found = registry.Registry.from_plugins(_manager(Plugin()))
    assert found.dialect("postgres").label == "Mine"
    with pytest.raises(UsageError, match=r"--plsql-dialect: no dialect 'sqlite' is registered \(registered: postgres\)"):
        found.dialect("sqlite")


def test_the_default_dialect_is_the_first_registered_that_runs_without_setup() -> None:
    """PostgreSQL, whose embedded server needs nothing but pip install, whatever the order or
    another such dialect registered after it; none that does: the first; none at all: one error."""
    builtin = registry.outside_pytest().dialects
    postgres, oracle = builtin["postgres"], builtin["oracle"]
    assert postgres.runs_without_setup and not oracle.runs_without_setup
    assert registry.outside_pytest().default_dialect() is postgres
    assert registry.Registry([oracle, postgres]).default_dialect() is postgres
    other = SimpleNamespace(name="other", runs_without_setup=True)
    assert registry.Registry([postgres, other]).default_dialect() is postgres  # type: ignore[list-item]
    assert registry.Registry([oracle]).default_dialect() is oracle
    with pytest.raises(UsageError, match="no dialect is registered"):
        registry.Registry().default_dialect()


def test_the_help_names_the_default_dialect(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--help")
    assert "runs without setup (postgres)" in " ".join(result.stdout.str().split())


def test_an_unregistered_dialect_is_one_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--subset=smoke", "--plsql-model=reference",
                                           "--plsql-dialect=sqlite", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--plsql-dialect: no dialect 'sqlite' is registered (registered: oracle, postgres)*"])


def test_a_broken_or_missing_group_is_a_warning_not_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import EntryPoint

    broken = EntryPoint("broken", "no_such_module_here", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [broken])
    with pytest.warns(registry.PluginWarning, match=r"plug-in broken \(no_such_module_here\) cannot be loaded"):
        registry.load_entry_points(_manager())
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    with pytest.warns(registry.PluginWarning, match=r"no 'pytest_plsqlbench' entry points are installed.*pip install -e"):
        registry.load_entry_points(_manager())

"""Tasks written by hand in YAML (the ``smoke`` subset, and users' own subsets).

A manifest with ``loader: yaml`` and ``options: {dir: smoke}`` reads every ``*.yaml`` in that
folder (relative to the manifest). One file per task::

    id: order_total                 # unique in the subset
    entry_points: [order_total]     # or {oracle: [...], postgres: [...]}
    fixtures: [shop]                # fixtures/<name>/<dialect>.sql, loaded once per worker
    schema_prompt: true             # show the fixture DDL to the model
    markers: [construct_function]
    metadata: {construct: function over a schema}
    answer_mode: install            # or execute (the answer is the program)
    prompt: |                       # shared text; prompt_oracle / prompt_postgres override
      ...
    reference: {oracle: ..., postgres: ...}
    tests:
      - id: case-1
        kind: assert                # assert | output | rows | reference
        oracle: <script>
        postgres: <script>
        expected: [line, ...]       # or {oracle: [...], postgres: [...]}

Multi-turn tasks put ``prompt``/``reference``/``tests`` under ``turns: [...]`` instead.
Every task must exist in each dialect the manifest names (``dialects:``, default both); a
missing part is an error naming file and field. The format is documented in docs/task-files.md.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..errors import UsageError
from ..manifests import Manifest, yaml_error
from ..registry import active
from ..resources import fixtures_dir
from ..scripts import split
from ..settings import Settings
from ..tasks import Fixture, Task, Turn, UnitTest

#: libyaml's safe loader when available (much faster on big task folders).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

LOADER = "yaml"
_MARKER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Bad(UsageError):
    pass


def _per_dialect(value: Any, dialect: str, where: str, dialects: tuple[str, ...] | None = None) -> Any:
    """``value`` itself, or ``value[dialect]`` when it is a per-dialect mapping (keyed by the
    registered dialects or the manifest's), which must have a version for each of ``dialects`` (the
    manifest's: a postgres-only subset needs no oracle one; None: the registered dialects)."""
    registered = tuple(active().dialects)
    dialects = registered if dialects is None else dialects
    known = tuple(dict.fromkeys((*registered, *dialects, dialect)))
    if isinstance(value, dict) and set(value) <= set(known):
        missing = [d for d in known if d not in value and (d in dialects or d == dialect)]
        if missing:
            raise _Bad(f"{where}: missing the {', '.join(missing)} version")
        return value[dialect]
    return value


def _fixture(name: str, dialect: str, search: tuple[Path, ...], where: str) -> Fixture:
    for folder in search:
        path = folder / name / f"{dialect}.sql"
        if path.is_file():
            script = path.read_text(encoding="utf-8")
            # Keyed by content: two subsets' different `shop` fixtures are two fixtures.
            digest = hashlib.sha256(script.encode()).hexdigest()[:12]
            return Fixture(key=f"yaml:{name}:{dialect}:{digest}", script=script, description=name, source=str(path))
    raise _Bad(f"{where}: fixture {name!r} not found (looked for {name}/{dialect}.sql in {', '.join(map(str, search))})")


def _names(raw: Any, where: str) -> tuple[str, ...]:
    """A list of names (``entry_points``, ``fixtures``, ``markers``); a bare string is an error."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(x, str) and x for x in raw):
        raise _Bad(f"{where}: must be a list of names, e.g. [a, b]")
    return tuple(raw)


def _tests(raw: Any, dialect: str, where: str, dialects: tuple[str, ...] | None = None) -> tuple[UnitTest, ...]:
    if not isinstance(raw, list) or not raw:
        raise _Bad(f"{where}: 'tests' must be a non-empty list")
    out = []
    for n, item in enumerate(raw, 1):
        here = f"{where} test {n}"
        if not isinstance(item, dict):
            raise _Bad(f"{here}: must be a mapping")
        test_id = item.get("id")
        if not isinstance(test_id, str) or not re.fullmatch(r"[A-Za-z0-9_.+\-]+", test_id):
            raise _Bad(f"{here}: 'id' must be a simple name (letters, digits, _ . + -)")
        kind = item.get("kind", "assert")
        if "script" in item:
            script = _per_dialect(item["script"], dialect, here, dialects)
        elif dialect in item:
            script = item[dialect]
        elif kind in ("rows", "reference", "output") and item.get("runs_answer"):
            script = None
        else:
            raise _Bad(f"{here} ({test_id}): no {dialect} script")
        expected = item.get("expected")
        if expected is not None:
            expected = _per_dialect(expected, dialect, here, dialects)
            if not isinstance(expected, list):
                raise _Bad(f"{here} ({test_id}): 'expected' must be a list of lines")
            expected = tuple("" if e is None else str(e) for e in expected)
        try:
            out.append(UnitTest(id=test_id, kind=kind, script=script, expected=expected, options=dict(item.get("options") or {})))
        except ValueError as exc:
            raise _Bad(f"{here}: {exc}") from None
    return tuple(out)


def _turn(raw: Mapping[str, Any], index: int, dialect: str, where: str, dialects: tuple[str, ...] | None = None) -> Turn:
    prompt = raw.get(f"prompt_{dialect}", raw.get("prompt"))
    prompt = _per_dialect(prompt, dialect, f"{where} prompt", dialects)
    if not isinstance(prompt, str) or not prompt.strip():
        raise _Bad(f"{where}: missing 'prompt'")
    reference = raw.get("reference")
    if reference is not None:
        reference = _per_dialect(reference, dialect, f"{where} reference", dialects)
    return Turn(index=index, prompt=prompt.strip() + "\n", reference=reference,
                tests=_tests(raw.get("tests"), dialect, where, dialects))


def load_task_file(
    path: Path, subset: str, dialect: str, fixture_dirs: tuple[Path, ...], dialects: tuple[str, ...] | None = None
) -> Task:
    """One task file; per-dialect values need a version for each of ``dialects`` (the manifest's; None:
    the registered dialects)."""
    where = str(path)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise yaml_error(path, exc) from None
    if not isinstance(raw, dict):
        raise _Bad(f"{where}: a task file must be a mapping")
    task_id = raw.get("id")
    if not isinstance(task_id, str) or not task_id.strip():
        raise _Bad(f"{where}: missing 'id'")
    if "turns" in raw:
        if not isinstance(raw["turns"], list) or not raw["turns"]:
            raise _Bad(f"{where}: 'turns' must be a non-empty list")
        turns = tuple(_turn(t, i, dialect, f"{where} turn {i}", dialects) for i, t in enumerate(raw["turns"], 1))
    else:
        turns = (_turn(raw, 1, dialect, where, dialects),)
    fixtures = tuple(_fixture(n, dialect, fixture_dirs, where) for n in _names(raw.get("fixtures"), f"{where} fixtures"))
    schema_ddl = None
    if raw.get("schema_prompt") and fixtures:
        schema_ddl = "\n".join(_ddl_only(f.script, dialect) for f in fixtures)
    markers = _names(raw.get("markers"), f"{where} markers")
    bad = [m for m in markers if not _MARKER.match(str(m))]
    if bad:
        raise _Bad(f"{where}: markers must be identifiers, got {bad}")
    try:
        return Task(
            id=task_id.strip(),
            subset=subset,
            dialect=dialect,
            turns=turns,
            entry_points=_names(_per_dialect(raw.get("entry_points"), dialect, f"{where} entry_points", dialects),
                                f"{where} entry_points"),
            fixtures=fixtures,
            schema_ddl=schema_ddl,
            answer_mode=raw.get("answer_mode", "install"),
            markers=markers,
            metadata=dict(raw.get("metadata") or {}),
        )
    except ValueError as exc:
        raise _Bad(f"{where}: {exc}") from None


def _ddl_only(script: str, dialect: str) -> str:
    """The schema part of a fixture script (what a model may see), without the data."""
    keep = [
        stmt.text.rstrip(";") + ";"
        for stmt in split(script, dialect)
        if stmt.kind != "client" and stmt.first_word in ("CREATE", "COMMENT", "ALTER")
    ]
    return "\n".join(keep)


def load(manifest: Manifest, settings: Settings) -> list[Task]:
    folder = manifest.directory / str(manifest.options.get("dir", manifest.name))
    if not folder.is_dir():
        raise UsageError(f"{manifest.path}: task folder {folder} does not exist")
    candidates = (manifest.directory.parent / "fixtures", manifest.directory / "fixtures", fixtures_dir())
    fixture_dirs = tuple(dict.fromkeys(d for d in candidates if d.is_dir()))
    tasks = [
        load_task_file(p, manifest.name, settings.database.dialect, fixture_dirs, tuple(manifest.dialects))
        for p in sorted(folder.glob("*.yaml"))
    ]
    seen: dict[str, Path] = {}
    for task, path in zip(tasks, sorted(folder.glob("*.yaml"))):
        if task.id in seen:
            raise UsageError(f"{path}: task id {task.id!r} already used by {seen[task.id]}")
        seen[task.id] = path
    return tasks


@pytest.hookimpl(trylast=True)
def pytest_plsql_load_subset(config: pytest.Config, manifest: Manifest, settings: Settings) -> list[Task] | None:
    if manifest.loader != LOADER:
        return None
    return load(manifest, settings)

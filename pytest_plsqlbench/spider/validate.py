"""``plsqlbench validate``: do the Spider gold queries transpile and run in this dialect?

The spider subset runs in PostgreSQL from what transpiles and runs; this check says how much
that is before a model is paid for: every gold query is transpiled (postgres) and executed in
a fresh worker database loaded with its schema. Queries whose schema is not in the data are
counted, not failed -- a partial copy is allowed to be partial.
"""

from __future__ import annotations

import logging
from collections import Counter

from ..datasources import resolve
from ..errors import InfrastructureError, UsageError
from ..manifests import discover
from ..runner import open_backend
from ..settings import Settings
from . import build
from .dialects import dialect_for

log = logging.getLogger(__name__)

LOADERS = ("spider", "spider2-st", "spider2-mt")
SHOW = 20


def validate_subset(settings: Settings, subset_name: str) -> tuple[list[str], bool]:
    """Report lines and whether every gold query with its schema present transpiles and runs.

    Needs a database for ``settings.database.dialect`` (the embedded PostgreSQL by default); raises
    :class:`~pytest_plsqlbench.errors.UsageError` for unknown subsets and
    :class:`~pytest_plsqlbench.errors.InfrastructureError` when no database can be had.
    """
    manifests = discover(settings.tasks.dirs)
    manifest = manifests.get(subset_name)
    if manifest is None:
        raise UsageError(f"unknown subset {subset_name!r}; known subsets: {', '.join(sorted(manifests))}")
    if manifest.loader not in LOADERS:
        raise UsageError(
            f"subset {subset_name!r} is not a schema-grounded PLSQLBench subset (loader {manifest.loader!r})"
        )
    if settings.database.dialect not in manifest.dialects:
        raise UsageError(
            f"subset {subset_name!r} exists only for {', '.join(manifest.dialects)}, "
            f"not for --plsql-dialect={settings.database.dialect}"
        )
    root = resolve(manifest, settings.data)
    tasks, notes = build.load(manifest, settings, root)
    absent = [t for t in tasks if t.metadata.get("schema") == "absent"]
    lines = [
        f"{subset_name} ({settings.database.dialect}, data {root}): {len(tasks)} task(s); "
        f"{len(absent)} without their schema in the data"
    ]
    if manifest.loader != "spider":
        lines.append(
            "  no gold SQL in this subset: its expected outputs come from the reference answers "
            "(run it with --plsql-model=reference to check them)"
        )
        return lines, True
    untranspiled = [t for t in tasks if t.metadata.get("gold_transpiled") is False]
    candidates = [t for t in tasks if t.not_runnable is None]
    ran, empty, failures = 0, 0, []
    errors: Counter[str] = Counter()
    if candidates:
        with open_backend(settings, "validate") as backend:
            session = backend.session()
            for task in candidates:
                gold = str(task.turns[0].tests[0].options["gold_sql"])
                try:
                    backend.ensure_fixtures(task.fixtures)
                except InfrastructureError as exc:
                    failures.append(f"{task.id}: schema did not load: {exc}")
                    errors["schema load"] += 1
                    continue
                session.begin_task()
                try:
                    result = session.run(gold, isolated=True, phase="reference")
                finally:
                    session.end_task()
                if result.ok:
                    ran += 1
                    empty += not result.lines
                else:
                    assert result.error is not None
                    failures.append(f"{task.id}: {result.error.short()}")
                    errors[result.error.code or result.error.failure_class] += 1
    with_schema = len(tasks) - len(absent)
    translated_to = dialect_for(settings.database.dialect).translated_to
    if translated_to:
        lines.append(
            f"  gold queries transpiled to {translated_to}: {with_schema - sum(1 for t in untranspiled if t not in absent)}"
            f" of {with_schema} with their schema ({len(tasks) - len(untranspiled)} of {len(tasks)} overall)"
        )
    lines.append(
        f"  gold queries run: {ran} of {len(candidates)} tried ({empty} return no rows"
        f"{', e.g. on empty tables' if empty else ''}); failed: {len(failures)}"
    )
    for task in untranspiled[:SHOW]:
        lines.append(f"    not transpiled: {task.id}: {task.not_runnable}")
    for failure in failures[:SHOW]:
        lines.append(f"    failed: {failure}")
    if errors:
        lines.append("  failures by error: " + ", ".join(f"{k} {v}" for k, v in errors.most_common()))
    for owner, adjustments in notes.adjustments.items():
        lines.extend(f"  load of {owner} adjusted: {text}" for text in adjustments)
    lines.extend(f"  rows not loaded: {text}" for text in notes.foreign_rows)
    for table, why in notes.tables_without_rows.items():
        lines.append(f"  table {table} has no rows in the data ({why})")
    if notes.orphan_data:
        lines.append(f"  note: {len(notes.orphan_data)} table(s) have data but no DDL in the data")
    ok = not failures and not [t for t in untranspiled if t not in absent]
    return lines, ok

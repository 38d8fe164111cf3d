"""PLForge-format records (the public seed of ProcArena) as call-suite tasks on Spider databases.

``pytest --subset plforge --plsql-source plforge=FILE.json [--plsql-data RELEASE]``

A record (a JSON list, or JSON Lines)::

    {"text": "<requirement>", "plsql": "CREATE OR REPLACE PROCEDURE sp(...) ...",
     "call": ["call sp(1, 'x');", ...],          # Oracle: ["BEGIN sp(1, 'x'); commit; END;", ...]
     "database": "<Spider db id>", "table": "<table>" or [...], "id": optional}

The databases are the Spider schemas of the PLSQLBench release, built exactly as the ``spider``
subset builds them (Oracle DDL/DML as published; in PostgreSQL transpiled with sqlglot into a
schema named like the database). PLForge's gold names tables unqualified, so the run's scope
resolves them in that schema: PostgreSQL ``search_path = answers, <schema>, public``; Oracle
private synonyms in the candidate schema, which the session's janitor drops at the end of the
task. PLForge itself reads each table ordered by its first column and compares exactly; we
compare multisets in the canonical form of :mod:`.state` (order-insensitive, floats rounded),
and like PLForge a call that raises where gold's does not fails.

A record the data cannot run (its database is not in the release) is collected and skipped
with the reason, as the ``spider`` subset does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ..datasources import data_cache_dir, resolve
from ..errors import DataError, UsageError
from ..manifests import Manifest, discover
from ..settings import Settings
from ..tasks import Fixture, Task, Turn, UnitTest
from . import JUDGE
from .describe import describe_fixture
from .loader import KIND
from .prompt import render

LOADER = "plforge"
_PROC = re.compile(r"\bPROCEDURE\s+(?:\"?\w+\"?\.)?\"?(\w+)\"?", re.I)


def read_records(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: neither a JSON list nor JSON Lines ({exc.msg} at line {exc.lineno})") from None
    if isinstance(data, dict):
        data = data.get("data") or data.get("records") or [data]
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a list of PLForge records")
    return data


def _check(rec: Any, n: int, path: Path, dialect: str) -> tuple[str, str, list[str], str, list[str], str]:
    where = f"{path} record {n}"
    if not isinstance(rec, dict):
        raise DataError(f"{where}: must be an object with text, plsql, call, database, table")
    for key in ("text", "plsql", "database"):
        if not isinstance(rec.get(key), str) or not rec[key].strip():
            raise DataError(f"{where}: field {key!r} must be a non-empty string")
    calls = rec.get("call")
    if isinstance(calls, str):
        calls = [calls]
    if not isinstance(calls, list) or not calls or not all(isinstance(c, str) and c.strip() for c in calls):
        raise DataError(f"{where}: field 'call' must be a non-empty list of call statements")
    oracle_form = all(c.strip().upper().startswith(("BEGIN", "DECLARE")) for c in calls)
    pg_form = all(c.strip().upper().startswith("CALL") for c in calls)
    if dialect == "postgres" and not pg_form:
        raise DataError(f"{where}: field 'call' holds Oracle blocks; run it with --plsql-dialect=oracle")
    if dialect == "oracle" and not (oracle_form or pg_form):
        raise DataError(f"{where}: field 'call': expected 'BEGIN sp(...); END;' blocks")
    m = _PROC.search(rec["plsql"])
    if not m:
        raise DataError(f"{where}: field 'plsql' must create a PROCEDURE")
    table = rec.get("table")
    tables = [table] if isinstance(table, str) else [t for t in (table or []) if isinstance(t, str)]
    task_id = str(rec.get("id") or rec.get("task_id") or f"plforge_{n:04d}")
    return rec["text"], rec["plsql"], [c.strip() for c in calls], m.group(1), tables, task_id


def _signature(gold: str, procedure: str) -> str:
    """``sp(a integer, b varchar(20))`` as the gold procedure declares it (balanced parentheses)."""
    m = _PROC.search(gold)
    if not m or "(" not in gold[m.end():m.end() + 5]:
        return procedure
    start = gold.index("(", m.end())
    depth = 0
    for i in range(start, len(gold)):
        depth += {"(": 1, ")": -1}.get(gold[i], 0)
        if depth == 0:
            return procedure + " ".join(gold[start:i + 1].split())
    return procedure


def load(manifest: Manifest, settings: Settings) -> list[Task]:
    from ..spider.schema import Catalog, pg_ident

    path = resolve(manifest, settings.data)
    records = read_records(path)
    spider = discover(settings.tasks.dirs).get(str(manifest.options.get("databases", "spider")))
    if spider is None:
        raise UsageError(f"{manifest.path}: options.databases names no known subset manifest (the Spider release)")
    root = resolve(spider, settings.data)
    catalog = Catalog.spider(root)
    cache = data_cache_dir(settings.data) if settings.database.dialect == "postgres" else None
    tasks = []
    seen: set[str] = set()
    for n, rec in enumerate(records, 1):
        text, gold, calls, procedure, tables, task_id = _check(rec, n, path, settings.database.dialect)
        if task_id in seen:
            raise DataError(f"{path} record {n}: id {task_id!r} used twice")
        seen.add(task_id)
        owners = catalog.owners_of_db(rec["database"])
        meta: dict[str, Any] = {"judge": JUDGE, "scenario": "a1", "category": "synthesis", "database": rec["database"],
                                "dialect": settings.database.dialect, "procedure": procedure, "tables": tables, "n_calls": len(calls),
                                "safety_allow": ["write"], "source_record": n}
        fixtures: tuple[Fixture, ...] = ()
        description = ""
        if not owners:
            meta["not_runnable"] = f"database {rec['database']!r} is not in the release's Spider schemas ({root})"
            schema = rec["database"].lower()
        else:
            owner = owners[0]
            if settings.database.dialect == "postgres":
                fixtures = (catalog.postgres_fixture(owner, cache).fixture,)
                schema = pg_ident(owner).strip('"')
            else:
                fixtures = (catalog.oracle_fixture(owner),)
                schema = owner
            meta["search_path"] = [schema]
            description = describe_fixture(fixtures[0].script, settings.database.dialect)
        meta["schema"] = schema
        signature = _signature(gold, procedure)
        prompt = render(dialect=settings.database.dialect, requirement=text, database=rec["database"], procedure=procedure,
                        signature=signature, description=description or "(schema not available)", schema=None)
        tests = tuple(UnitTest(id=f"call-{k}", kind=KIND, script=c, options={"call": k})
                      for k, c in enumerate(calls, 1))
        tasks.append(Task(
            id=task_id, subset=manifest.name, dialect=settings.database.dialect,  # type: ignore[arg-type]
            turns=(Turn(1, prompt, tests, reference=gold, source_id=task_id),),
            entry_points=(procedure,), fixtures=fixtures, markers=("procarena", "plforge"), metadata=meta,
        ))
    return tasks


@pytest.hookimpl(trylast=True)
def pytest_plsql_load_subset(config: pytest.Config, manifest: Manifest, settings: Settings) -> list[Task] | None:
    if manifest.loader != LOADER:
        return None
    return load(manifest, settings)

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

import hashlib
import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..datasources import resolve
from ..errors import DataError, UsageError
from ..manifests import Manifest, discover
from ..settings import Settings
from ..tasks import Fixture, Task, Turn, UnitTest
from . import JUDGE
from .describe import describe_fixture
from .dialects import Adapter, adapter_for
from .hollow import gold_prints, output_request
from .judge import JUDGING
from .loader import KIND, note_hollow
from .prompt import render

if TYPE_CHECKING:  # Spider's modules load with the first PLForge subset, not with the plugin
    from ..spider.dialects import SpiderDialect
    from ..spider.schema import Catalog

LOADER = "plforge"
#: What loading left out and why: shown on the terminal by :mod:`..loading`.
progress = logging.getLogger("pytest_plsqlbench.progress")
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


def _check(rec: Any, n: int, path: Path, adapter: Adapter) -> tuple[str, str, list[str], str, list[str], str]:
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
    problem = adapter.plforge_call_problem(calls)
    if problem:
        raise DataError(f"{where}: {problem}")
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


def _quoted(gold: str, dialect: str) -> set[str]:
    """The identifiers gold writes in double quotes, as written (``"Pigs"`` -> ``Pigs``)."""
    from .mutate import MutationError, lex

    try:
        return {t.text[1:-1].replace('""', '"') for t in lex(gold, dialect) if t.kind == "qword" and len(t.text) > 2}
    except MutationError:
        return set(re.findall(r'"([^"\n]+)"', gold))


def _named(schema: Any) -> set[str]:
    """Every name the record's ``schema`` field mentions (keys, strings, quoted names in DDL text)."""
    out: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            out.add(str(key))
            out |= _named(value)
    elif isinstance(schema, list):
        for value in schema:
            out |= _named(value)
    elif isinstance(schema, str):
        out.add(schema.strip())
        out |= set(re.findall(r'"([^"\n]+)"', schema))
        out |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", schema))
    return out


def case_renames(script: str, schema: str, records: list[dict[str, Any]], dialect: str) -> list[str]:
    """``ALTER ... RENAME`` statements giving the built PostgreSQL schema the mixed-case names the
    records' gold quotes (and their ``schema`` field names, when they have one): the port folds
    ``"Pigs"`` to ``pigs``, PLForge's database keeps Spider's spelling. One spelling per name for
    all records of a database (PLForge's database has one); names no record quotes stay folded."""
    from ..spider.schema import pg_ident
    from .describe import tables_of

    wanted: dict[str, str] = {}
    for rec in records:
        named = _named(rec.get("schema")) if rec.get("schema") else None
        for name in _quoted(str(rec.get("plsql") or ""), dialect):
            if name != name.lower() and (named is None or name in named):
                wanted.setdefault(name.lower(), name)
    if not wanted:
        return []
    out = []
    qualified = pg_ident(schema) if schema != schema.lower() else schema
    for table in tables_of(script, dialect):
        bare = table.name.split(".")[-1].strip('"')
        name = f"{qualified}.{pg_ident(bare) if bare != bare.lower() else bare}"
        for col in table.columns:
            if col.name in wanted:
                out.append(f'ALTER TABLE {name} RENAME COLUMN {col.name} TO "{wanted[col.name]}";')
        if bare.lower() in wanted:
            out.append(f'ALTER TABLE {name} RENAME TO "{wanted[bare.lower()]}";')
    return out


def _database(catalog: Catalog, owner: str, dialect: SpiderDialect, cache: Path | None,
              records: list[dict[str, Any]]) -> tuple[Fixture, str, list[str]]:
    """``owner``'s Spider schema as the records' gold names it: (fixture, schema, renames)."""
    base, _ = dialect.fixture(catalog, owner, cache)
    schema = dialect.schema_name(owner)
    renames = case_renames(base.script, schema, records, dialect.name) if dialect.folds_names else []
    if not renames:
        return base, schema, []
    return Fixture(
        key=f"{base.key}:case:{hashlib.sha256(chr(10).join(renames).encode()).hexdigest()[:12]}",
        script=base.script + "\n-- names as PLForge's gold quotes them\n" + "\n".join(renames) + "\n",
        description=base.description), schema, renames


def load(manifest: Manifest, settings: Settings, left_out: list[str] | None = None) -> list[Task]:
    """The records' tasks; those asking for what no call can judge are left out, each appended
    to ``left_out`` as "id: why" when a list is given."""
    from ..spider.dialects import dialect_for
    from ..spider.schema import Catalog

    path = resolve(manifest, settings.data)
    records = read_records(path)
    spider = discover(settings.tasks.dirs).get(str(manifest.options.get("databases", "spider")))
    if spider is None:
        raise UsageError(f"{manifest.path}: options.databases names no known subset manifest (the Spider release)")
    root = resolve(spider, settings.data)
    catalog = Catalog.spider(root)
    adapter = adapter_for(settings.database.dialect)
    spider_dialect = dialect_for(settings.database.dialect)
    cache = spider_dialect.cache_dir(settings.data)
    mode = str(manifest.options.get("judging") or "plforge")
    if mode not in JUDGING:
        raise UsageError(f"{manifest.path}: options.judging must be one of {list(JUDGING)}, not {mode!r}")
    by_db: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        if isinstance(rec, dict) and isinstance(rec.get("database"), str):
            by_db.setdefault(rec["database"].lower(), []).append(rec)
    #: Owner -> its fixture (with PLForge's spelling of names), schema and the renames that made it.
    databases: dict[str, tuple[Fixture, str, list[str]]] = {}
    tasks = []
    left_out = left_out if left_out is not None else []
    seen: set[str] = set()
    for n, rec in enumerate(records, 1):
        text, gold, calls, procedure, tables, task_id = _check(rec, n, path, adapter)
        why = output_request(text) or gold_prints(gold)
        if why:  # the judge could not see part of what the record asks: left out, and counted
            left_out.append(f"{task_id}: {why}")
            continue
        if task_id in seen:
            raise DataError(f"{path} record {n}: id {task_id!r} used twice")
        seen.add(task_id)
        owners = catalog.owners_of_db(rec["database"])
        meta: dict[str, Any] = {"judge": JUDGE, "scenario": "a1", "category": "synthesis", "database": rec["database"],
                                "dialect": settings.database.dialect, "procedure": procedure, "tables": tables, "n_calls": len(calls),
                                "safety_allow": ["write"], "source_record": n}
        fixtures: tuple[Fixture, ...] = ()
        description = ""
        not_runnable = None
        if not owners:
            not_runnable = f"database {rec['database']!r} is not in the release's Spider schemas ({root})"
            schema = rec["database"].lower()
        else:
            owner = owners[0]
            if owner not in databases:
                databases[owner] = _database(catalog, owner, spider_dialect, cache,
                                             by_db.get(rec["database"].lower(), []))
            fixture, schema, renamed = databases[owner]
            fixtures = (fixture,)
            meta["search_path"] = [schema]
            description = describe_fixture(fixture.script, settings.database.dialect)
            if renamed:
                description += "\n\nNames in mixed case (write them in double quotes): " + ", ".join(
                    r.rsplit(" TO ", 1)[1].rstrip(";") for r in renamed)
        meta["schema"] = schema
        meta["judging"] = mode
        signature = _signature(gold, procedure)
        prompt = render(dialect=settings.database.dialect, requirement=text, database=rec["database"], procedure=procedure,
                        signature=signature, description=description or "(schema not available)", schema=None)
        tests = tuple(UnitTest(id=f"call-{k}", kind=KIND, script=c, options={"call": k})
                      for k, c in enumerate(calls, 1))
        tasks.append(Task(
            id=task_id, subset=manifest.name, dialect=settings.database.dialect,
            turns=(Turn(1, prompt, tests, reference=gold, source_id=task_id),),
            entry_points=(procedure,), fixtures=fixtures, markers=("procarena", "plforge"), metadata=meta,
            not_runnable=not_runnable,
        ))
    if left_out:
        progress.info("plsqlbench: %s: %d of %d record(s) left out as hollow tasks:\n  %s", manifest.name,
                      len(left_out), len(records), "\n  ".join(left_out))
    return tasks


@pytest.hookimpl(trylast=True)
def pytest_plsql_load_subset(config: pytest.Config, manifest: Manifest, settings: Settings) -> list[Task] | None:
    if manifest.loader != LOADER:
        return None
    left_out: list[str] = []
    tasks = load(manifest, settings, left_out)
    note_hollow(config, manifest.name, left_out)
    return tasks

"""The release's schema files as per-owner fixtures (``CHINOOK``, ``CRE_DOC_TEMPLATE_MGT`` ...).

A :class:`Catalog` holds the tables of one schema family (Spider, or Spider2) with their
published Oracle DDL and the INSERT statements of their data. Tasks name the tables they
use (``OWNER.TABLE``); each owner becomes one :class:`~pytest_plsqlbench.tasks.Fixture`
keyed by family, owner, dialect and a digest of its content, so a worker loads it once and
a changed copy of the data is a different fixture.

Oracle fixtures are the published statements verbatim (tables in foreign-key order, then the
data, then COMMIT); the backend creates the owner first. PostgreSQL fixtures are transpiled
with :mod:`.transpile`; their foreign keys are added after the data as ``NOT VALID``; what
does not transpile is left out and listed in :attr:`PgFixture.problems`, never dropped
silently. Transpiled fixtures are cached on disk by content hash.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlglot

from ..errors import DataError
from ..tasks import Fixture
from . import release
from .adjust import OwnerAdjustments, Relaxed, null_counts, table_columns
from .transpile import PG_RESERVED, TranspileError, ddl_to_postgres, to_postgres

log = logging.getLogger(__name__)

#: Bump when the PostgreSQL translation of fixtures changes (invalidates the disk cache).
PG_FIXTURE_VERSION = "2"
#: Bump when the Oracle fixture script changes beyond the published statements (its key changes).
ORACLE_FIXTURE_VERSION = "1"

_NAME = r'"?[A-Za-z_][\w$#]*"?'
_CREATE_TABLE = re.compile(rf"^\s*CREATE\s+TABLE\s+({_NAME})\s*\.\s*({_NAME})", re.I)
_INSERT_HEAD = re.compile(
    rf"^\s*INSERT\s+(?:/\*.*?\*/\s*)?INTO\s+(?P<owner>{_NAME})\s*\.\s*(?P<table>{_NAME})\s*"
    r"\((?P<cols>[^)]*)\)\s*VALUES\s*(?P<values>.*)\Z",
    re.I | re.S,
)
_REFERENCES = re.compile(rf"REFERENCES\s+({_NAME})\s*\.\s*({_NAME})", re.I)
#: Atomic and possessive (Python 3.11+): a failed match must not backtrack through digits.
_LITERALS_ONLY = re.compile(
    r"(?>'(?:[^']++|'')*+'|NULL\b|[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[(),\s])*+\Z", re.I
)
_STRING_OR_OTHER = re.compile(r"'(?:[^']|'')*'|[^']+")
_TUPLE_SEP = re.compile(r"\)\s*,\s*\(")


def _bare(name: str) -> str:
    """Oracle's stored form of a name: quoted kept as is, unquoted upper-cased."""
    return name[1:-1] if name.startswith('"') and name.endswith('"') else name.upper()


def pg_ident(name: str) -> str:
    """A name as the PostgreSQL port spells it (see :func:`transpile.normalize_identifiers`)."""
    bare = _bare(name)
    if re.fullmatch(r"[A-Z][A-Z0-9_$#]*", bare):
        lowered = bare.lower()
        return f'"{lowered}"' if name.startswith('"') or lowered in PG_RESERVED else lowered
    return '"' + bare.replace('"', '""') + '"'


@dataclass(frozen=True)
class Table:
    owner: str
    name: str
    ddl: str
    db_id: str
    where: str
    references: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        return f"{self.owner}.{self.name}"


@dataclass
class PgFixture:
    fixture: Fixture
    tables: int
    rows_loaded: int
    problems: list[str] = field(default_factory=list)


class Catalog:
    """Tables and data of one schema family, read from the release files that exist."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.tables: dict[str, Table] = {}
        self.inserts: dict[str, list[str]] = {}
        self.rows: dict[str, int] = {}
        self.ddl_files: list[Path] = []
        self.dml_files: list[Path] = []
        self._oracle: dict[str, Fixture] = {}
        self._pg: dict[str, PgFixture] = {}
        self._adjustments: dict[str, OwnerAdjustments] = {}
        #: DML entries not loaded because they are another database's rows (see add_spider_dml).
        self.foreign_rows: list[str] = []
        #: Upper-case bare table name -> the source databases whose rows the DML holds under it.
        self.dml_sources: dict[str, set[str]] = {}
        #: ``OWNER.TABLE`` -> failed statements the release's ``execution_summary`` reports.
        self.reported_failures: dict[str, int] = {}

    # ----------------------------------------------------------------- reading
    @classmethod
    def spider(cls, root: Path) -> Catalog:
        cat = cls("spider")
        ddl = root / release.SPIDER_DDL
        if ddl.is_file():
            cat.add_ddl_file(ddl)
        dml = release.first_existing(root, release.SPIDER_DML)
        if dml is not None:
            cat.add_spider_dml(dml)
        elif ddl.is_file():
            # Schemas without their rows: every task would run on empty tables, where an answer
            # that prints nothing matches every empty gold result -- scores that mean nothing.
            raise DataError(
                f"{root}: {release.SPIDER_DDL} is there but {release.SPIDER_DML[0]} (the tables' rows) "
                "is missing: copy it too, or let the plugin download the release (no --plsql-data)"
            )
        return cat

    @classmethod
    def spider2(cls, root: Path) -> Catalog:
        cat = cls("spider2")
        for path in release.spider2_schema_files(root, "ddl"):
            cat.add_ddl_file(path)
        for path in release.spider2_schema_files(root, "dml"):
            cat.add_jsonl_dml(path)
        return cat

    def add_ddl_file(self, path: Path) -> None:
        self.ddl_files.append(path)
        for rec in release.read_jsonl(path):
            sql = rec.data.get("sql")
            if not isinstance(sql, str):
                raise DataError(f"{rec.where}: DDL record without a 'sql' string")
            m = _CREATE_TABLE.match(sql)
            if m is None:
                raise DataError(f"{rec.where}: expected 'CREATE TABLE OWNER.TABLE ...', got {sql[:60]!r}")
            owner, name = _bare(m.group(1)), _bare(m.group(2))
            refs = frozenset(f"{_bare(a)}.{_bare(b)}" for a, b in _REFERENCES.findall(sql))
            table = Table(
                owner, name, sql.strip().rstrip(";"), str(rec.data.get("db_id") or owner), rec.where, refs
            )
            if table.key in self.tables:
                log.warning(
                    "%s: table %s already defined at %s; keeping the first",
                    rec.where,
                    table.key,
                    self.tables[table.key].where,
                )
                continue
            self.tables[table.key] = table

    def _add_inserts(
        self, statements: Iterable[str], where: str, total_rows: Any = None, source: str | None = None
    ) -> None:
        statements = list(statements)
        kept: list[tuple[str, str, str]] = []
        foreign: dict[str, int] = {}
        for stmt in statements:
            m = _INSERT_HEAD.match(stmt)
            if m is None:
                raise DataError(
                    f"{where}: expected 'INSERT INTO OWNER.TABLE (...) VALUES ...', got {stmt[:60]!r}"
                )
            key = f"{_bare(m.group('owner'))}.{_bare(m.group('table'))}"
            if source and not self._belongs(key, source):
                foreign[key] = foreign.get(key, 0) + 1
                continue
            kept.append((key, m.group("values"), stmt))
        for key, n in foreign.items():
            self.foreign_rows.append(
                f"{where}: its source_database is {source}, but {n} statement(s) insert into {key}; "
                "not loaded (never another database's rows)"
            )
            log.warning("%s", self.foreign_rows[-1])
        # total_rows counts the entry's rows when all of them went to one table.
        use_total = isinstance(total_rows, int) and not foreign and len({k for k, _, _ in kept}) == 1
        for key, values, stmt in kept:
            self.inserts.setdefault(key, []).append(stmt.strip().rstrip(";"))
            if not use_total:
                self.rows[key] = self.rows.get(key, 0) + len(_TUPLE_SEP.findall(values)) + 1
        if use_total:
            self.rows[kept[0][0]] = self.rows.get(kept[0][0], 0) + total_rows

    def add_spider_dml(self, path: Path) -> None:
        """``spider_dml.json``: ``{metadata, tables: {NAME: {insert_statements, total_rows ...}}}``."""
        self.dml_files.append(path)
        doc = release.read_json_pairs(path)
        tables = doc.get("tables") if hasattr(doc, "get") else None
        if tables is None:
            raise DataError(f"{path}: no 'tables' object (is this spider_dml.json?)")
        for name, info in tables:
            statements = list(
                release.iter_strings(info.get("insert_statements") if hasattr(info, "get") else None)
            )
            source = info.get("source_database") if hasattr(info, "get") else None
            source = source if isinstance(source, str) and source.strip() else None
            self.dml_sources.setdefault(str(name).upper(), set()).add(source or "?")
            self._add_inserts(statements, f"{path} table {name}", info.get("total_rows"), source)
            summary = info.get("execution_summary") if hasattr(info, "get") else None
            failed = summary.get("failed_statements") if summary is not None and hasattr(summary, "get") else None
            for stmt in statements[:1]:
                m = _INSERT_HEAD.match(stmt)
                if m is not None and isinstance(failed, int):
                    key = f"{_bare(m.group('owner'))}.{_bare(m.group('table'))}"
                    self.reported_failures[key] = self.reported_failures.get(key, 0) + failed

    def add_jsonl_dml(self, path: Path) -> None:
        """Spider2 ``OUTPUT_DML_dev.jsonl``: one object per table or statement; the statements
        are read from ``insert_statements``, ``statements``, ``sql`` or ``dml``."""
        self.dml_files.append(path)
        for rec in release.read_jsonl(path):
            for key in ("insert_statements", "statements", "sql", "dml"):
                if key in rec.data:
                    statements = list(release.iter_strings(rec.data[key]))
                    break
            else:
                raise DataError(f"{rec.where}: no INSERT statements (keys: {sorted(rec.data)})")
            self._add_inserts(statements, rec.where, rec.data.get("total_rows"))

    def _belongs(self, key: str, source: str) -> bool:
        """Whether rows for ``key`` are ``source``'s own: the table's owner or its DDL's db_id
        is that database (the release names owners after the Spider database, upper-cased)."""
        want = source.upper()
        table = self.tables.get(key)
        return key.split(".", 1)[0] == want or (table is not None and table.db_id.upper() == want)

    # ----------------------------------------------------------------- questions
    def owners(self) -> set[str]:
        return {t.owner for t in self.tables.values()}

    def owners_of_db(self, db_id: str) -> list[str]:
        want = db_id.upper()
        return sorted({t.owner for t in self.tables.values() if t.db_id.upper() == want or t.owner == want})

    def missing(self, qualified: Iterable[str]) -> list[str]:
        return [q for q in qualified if _key(q) not in self.tables]

    def owner_tables(self, owner: str) -> list[Table]:
        """The owner's tables, referenced tables first (file order otherwise)."""
        pending = [t for t in self.tables.values() if t.owner == owner]
        done: list[Table] = []
        names = {t.key for t in pending}
        while pending:
            ready = [t for t in pending if not (t.references & names) - {d.key for d in done} - {t.key}]
            if not ready:  # a cycle: keep file order for the rest
                done.extend(pending)
                break
            done.extend(ready)
            pending = [t for t in pending if t not in ready]
        return done

    def data_rows(self, owner: str) -> int:
        return sum(n for key, n in self.rows.items() if key.split(".", 1)[0] == owner)

    def table_rows(self, key: str) -> int:
        return self.rows.get(_key(key), 0)

    def why_no_rows(self, key: str) -> str:
        """Why a table with DDL has no rows in the DML files, as far as the files tell."""
        table = self.tables.get(_key(key))
        name = table.name if table else _key(key).split(".")[-1]
        own = table.db_id.upper() if table else ""
        others = sorted(s for s in self.dml_sources.get(name.upper(), ()) if s.upper() not in (own, "?"))
        if others:
            return (
                f"the DML keys tables by bare name and its {name.title()!r} entry holds "
                f"{', '.join(others)}'s rows: this database's rows are not in the release"
            )
        if not self.dml_files:
            return "no DML file in the data"
        return f"no {name.title()!r} entry for this database in the DML"

    def adjustments(self, owner: str) -> OwnerAdjustments:
        """What loading ``owner`` does beyond the published statements (see :mod:`.adjust`)."""
        if owner not in self._adjustments:
            out = OwnerAdjustments()
            for table in self.owner_tables(owner):
                statements = self.inserts.get(table.key, ())
                if not statements:
                    continue
                cols = table_columns(table.ddl)
                if not cols.not_null and not cols.primary_key:
                    continue
                counts: dict[str, tuple[int, int]] = {}
                for stmt in statements:
                    m = _INSERT_HEAD.match(stmt)
                    if m is None:
                        continue
                    if "''" not in m.group("values") and "NULL" not in m.group("values").upper():
                        continue  # the common case: nothing to count
                    names = [_bare(c.strip()) for c in m.group("cols").split(",") if c.strip()]
                    for col, (n, empty) in null_counts(names, [m.group("values")]).items():
                        old = counts.get(col, (0, 0))
                        counts[col] = (old[0] + n, old[1] + empty)
                for col, (n, empty) in sorted(counts.items()):
                    if col in cols.primary_key:
                        out.unloadable.append(
                            f"{n} row(s) of {table.key} insert NULL (or '') into primary-key column {col}"
                        )
                    elif col in cols.not_null:
                        failures = self.reported_failures.get(table.key)
                        out.relaxed.append(Relaxed(table.key, col, n, empty, failures))
            self._adjustments[owner] = out
        return self._adjustments[owner]

    def orphan_data(self) -> list[str]:
        """Tables with data but no DDL (their data cannot be loaded)."""
        return sorted(k for k in self.inserts if k not in self.tables)

    # ----------------------------------------------------------------- prompts
    def ddl_text(self, keys: Iterable[str], render: Callable[[Table, frozenset[str]], list[str]]) -> str:
        """The DDL of the given tables as the model sees it, each table's statements from
        ``render`` (the dialect's :meth:`~.dialects.SpiderDialect.table_ddl`)."""
        names = frozenset(self.tables)
        out = []
        for key in keys:
            table = self.tables.get(_key(key))
            if table is not None:
                out.extend(render(table, names))
        return "\n\n".join(out)

    # ----------------------------------------------------------------- fixtures
    def _digest(self, owner: str, extra: str = "") -> str:
        h = hashlib.sha256(extra.encode())
        for table in self.owner_tables(owner):
            h.update(table.ddl.encode())
            for stmt in self.inserts.get(table.key, ()):
                h.update(stmt.encode())
        return h.hexdigest()

    def oracle_fixture(self, owner: str) -> Fixture:
        if owner not in self._oracle:
            parts = [f"-- {self.family} schema {owner}: published DDL and data (pytest-plsqlbench)"]
            for table in self.owner_tables(owner):
                parts.append(table.ddl + ";")
            for relaxed in self.adjustments(owner).relaxed:
                parts.append(f"-- adjusted: {relaxed.describe()}")
                parts.append(f"ALTER TABLE {_oracle_name(relaxed.table)} MODIFY (\"{relaxed.column}\" NULL);")
            for table in self.owner_tables(owner):
                parts.extend(stmt + ";" for stmt in self.inserts.get(table.key, ()))
            parts.append("COMMIT;")
            digest = self._digest(owner, f"oracle:{ORACLE_FIXTURE_VERSION}")[:12]
            self._oracle[owner] = Fixture(
                key=f"plsqlbench:{self.family}:{owner}:oracle:{digest}",
                script="\n".join(parts) + "\n",
                description=f"{self.family} schema {owner} ({self.data_rows(owner)} rows)",
            )
        return self._oracle[owner]

    def postgres_fixture(self, owner: str, cache_dir: Path | None = None) -> PgFixture:
        if owner in self._pg:
            return self._pg[owner]
        digest = self._digest(owner, f"pg:{PG_FIXTURE_VERSION}:{sqlglot.__version__}")
        cached = _read_cache(cache_dir, digest)
        if cached is not None:
            script, tables, rows, problems = cached
        else:
            script, tables, rows, problems = self._build_postgres(owner)
            _write_cache(cache_dir, digest, script, tables, rows, problems)
        pg = PgFixture(
            Fixture(
                key=f"plsqlbench:{self.family}:{owner}:postgres:{digest[:12]}",
                script=script,
                description=f"{self.family} schema {owner} ({rows} rows)",
            ),
            tables,
            rows,
            problems,
        )
        self._pg[owner] = pg
        return pg

    def _build_postgres(self, owner: str) -> tuple[str, int, int, list[str]]:
        problems: list[str] = []
        creates: list[str] = []
        alters: list[str] = []
        inserts: list[str] = []
        created: set[str] = set()
        known = frozenset(self.tables)
        for table in self.owner_tables(owner):
            try:
                create, fks = ddl_to_postgres(table.ddl, known)
            except TranspileError as exc:
                problems.append(f"table {table.key} left out: its DDL does not transpile ({exc})")
                continue
            creates.append(create + ";")
            alters.extend(a + ";" for a in fks)
            created.add(table.key)
        for relaxed in self.adjustments(owner).relaxed:
            if relaxed.table in created:
                creates.append(f"-- adjusted: {relaxed.describe()}")
                column = pg_ident(f'"{relaxed.column}"')
                creates.append(f"ALTER TABLE {_pg_name(relaxed.table)} ALTER COLUMN {column} DROP NOT NULL;")
        rows = 0
        for table in self.owner_tables(owner):
            if table.key not in created:
                continue
            for stmt in self.inserts.get(table.key, ()):
                try:
                    inserts.append(insert_to_postgres(stmt) + ";")
                    m = _INSERT_HEAD.match(stmt)
                    rows += len(_TUPLE_SEP.findall(m.group("values"))) + 1 if m else 0
                except TranspileError as exc:
                    problems.append(f"an INSERT into {table.key} left out ({exc})")
        head = [
            f"-- {self.family} schema {owner} transpiled from the published Oracle DDL/DML with sqlglot",
            f"CREATE SCHEMA IF NOT EXISTS {pg_ident(owner)};",
        ]
        script = "\n".join(head + creates + inserts + alters) + "\n"
        for problem in problems:
            log.warning("%s schema %s: %s", self.family, owner, problem)
        return script, len(created), rows, problems


def _oracle_name(key: str) -> str:
    return ".".join(f'"{part}"' for part in key.split(".", 1))


def _pg_name(key: str) -> str:
    return ".".join(pg_ident(f'"{part}"') for part in key.split(".", 1))


def _key(qualified: str) -> str:
    owner, _, name = qualified.partition(".")
    return f"{_bare(owner.strip())}.{_bare(name.strip())}" if name else _bare(owner.strip())


def insert_to_postgres(stmt: str) -> str:
    """One published INSERT in PostgreSQL; Oracle's ``''`` (which is NULL) becomes NULL.

    The release's INSERTs are literal rows; those pass through as text (exact and fast), the
    rest (TO_DATE, TIMESTAMP literals, TO_CLOB chunks ...) go through sqlglot.
    """
    m = _INSERT_HEAD.match(stmt)
    if m is None:
        raise TranspileError("not an INSERT ... VALUES statement")
    values = m.group("values").strip().rstrip(";")
    target = f"{pg_ident(m.group('owner'))}.{pg_ident(m.group('table'))}"
    cols = ", ".join(pg_ident(c.strip()) for c in m.group("cols").split(",") if c.strip())
    if _LITERALS_ONLY.match(values):
        body = "".join("NULL" if tok == "''" else tok for tok in _STRING_OR_OTHER.findall(values))
        return f"INSERT INTO {target} ({cols}) VALUES {body}"
    return to_postgres(stmt)


def _cache_path(cache_dir: Path | None, digest: str) -> Path | None:
    return None if cache_dir is None else cache_dir / "spider-postgres" / f"{digest}.sql"


def _read_cache(cache_dir: Path | None, digest: str) -> tuple[str, int, int, list[str]] | None:
    path = _cache_path(cache_dir, digest)
    if path is None or not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    header, _, script = text.partition("\n")
    m = re.fullmatch(r"-- cache tables=(\d+) rows=(\d+) problems=(\d+)", header)
    if m is None:
        return None
    lines = script.split("\n")
    n = int(m.group(3))
    problems = [line[len("-- problem: ") :] for line in lines[:n]]
    return "\n".join(lines[n:]), int(m.group(1)), int(m.group(2)), problems


def _write_cache(
    cache_dir: Path | None, digest: str, script: str, tables: int, rows: int, problems: list[str]
) -> None:
    path = _cache_path(cache_dir, digest)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "\n".join(
            [
                f"-- cache tables={tables} rows={rows} problems={len(problems)}",
                *(f"-- problem: {p.replace(chr(10), ' ')}" for p in problems),
                script,
            ]
        )
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body)
        os.replace(tmp, path)
    except OSError as exc:  # a cache is an optimisation
        log.info("could not cache %s: %s", path, exc)

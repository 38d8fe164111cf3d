"""Grow a task's tables to the row counts recorded with the task (``b2.scale_rows``, ``b2.scale``).

Generated rows are *variations of the fixture's own rows*, so the data keeps the shape the
procedures were written for (statuses, ratings, dates, NULL ratios) and every CHECK that holds
for a fixture row over non-key columns holds for its copies:

* each new row copies a template row of the same table, chosen by a seeded generator;
* columns of a primary key or unique constraint that are not foreign-key columns get fresh
  values (integers/decimals above the column's maximum, dates and timestamps after it, text
  with a unique suffix within the declared length);
* foreign-key columns take the key of a row of the parent table (fixture or generated: parents
  are grown first); a NULL foreign key in the template stays NULL; a key made of foreign-key
  columns only (a link table) draws combinations until an unused one is found;
* NOT NULL holds because templates are valid rows and fresh values are never NULL.

Deterministic: the same catalog, fixture rows, targets and seed give the same rows, on every
machine (``random.Random`` seeded with text). PostgreSQL writes them with ``COPY`` inside the
task's transaction (rolled back afterwards) and refreshes the planner statistics; Oracle inserts
them with bind variables and the harness restores the clean state afterwards.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import random
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .catalog import BOOL, DATE, DECIMAL, FLOAT, INT, TEXT, TIMESTAMP, Column, Schema, Table

log = logging.getLogger(__name__)

DEFAULT_SEED = 0
#: Draws of a fresh foreign-key combination before a link table stops growing.
MAX_DRAWS = 50
_DIGITS = string.digits + string.ascii_uppercase

Row = dict[str, Any]


@dataclass
class ScalePlan:
    """The rows to add per table (parents first) and what could not be grown, with why."""

    order: list[str] = field(default_factory=list)
    new_rows: dict[str, list[Row]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # rows per table after scaling
    notes: list[str] = field(default_factory=list)


def target_rows(table: Table, scale_rows: int, scale: Mapping[str, int]) -> int:
    """``scale`` keys are ``schema.table`` (or a bare table name); anything else gets ``scale_rows``."""
    wanted = {str(k).lower(): int(v) for k, v in scale.items()}
    return wanted.get(table.full, wanted.get(table.name, scale_rows))


# --------------------------------------------------------------------------- fresh values
def _base36(n: int) -> str:
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = _DIGITS[r] + out
        if n == 0:
            return out


class _Fresh:
    """Unused values for one column of a unique key, in a deterministic sequence."""

    def __init__(self, column: Column, existing: Iterable[Any]) -> None:
        self.column = column
        self.taken = {v for v in existing if v is not None}
        self.n = 0
        values = list(self.taken)
        kind = column.kind
        self.top: Any = None
        if kind in (INT, DECIMAL, FLOAT) and values or kind in (DATE, TIMESTAMP) and values:
            self.top = max(values)

    def next(self, template: Any) -> Any:
        kind = self.column.kind
        while True:
            self.n += 1
            if kind == INT:
                value: Any = (self.top or 0) + self.n
            elif kind == DECIMAL:
                value = decimal.Decimal(int(self.top or 0)) + self.n
            elif kind == FLOAT:
                value = float(int(self.top or 0) + self.n)
            elif kind == DATE:
                value = (self.top or dt.date(2000, 1, 1)) + dt.timedelta(days=self.n)
            elif kind == TIMESTAMP:
                value = (self.top or dt.datetime(2000, 1, 1)) + dt.timedelta(seconds=self.n)
            elif kind == TEXT:
                value = self._text(template)
                if value is None:
                    return None
            else:
                return None  # booleans and other types cannot carry many distinct values
            if value not in self.taken:
                self.taken.add(value)
                return value

    def _text(self, template: Any) -> str | None:
        suffix = "~" + _base36(self.n)
        limit = self.column.length
        base = "" if template is None else str(template).rstrip()
        if limit is not None:
            if len(suffix) > limit:
                suffix = _base36(self.n)
                if len(suffix) > limit:
                    return None
            base = base[: max(0, limit - len(suffix))]
        return base + suffix


def _default(column: Column, n: int) -> Any:
    """A value for a table with no fixture row to copy (NULL where allowed)."""
    if column.nullable:
        return None
    return {INT: n, DECIMAL: decimal.Decimal(n), FLOAT: float(n), DATE: dt.date(2000, 1, 1),
            TIMESTAMP: dt.datetime(2000, 1, 1), BOOL: False, TEXT: "x"}.get(column.kind, "0")


# --------------------------------------------------------------------------- the plan
def plan(schema: Schema, existing: Mapping[str, Sequence[Row]], scale_rows: int,
         scale: Mapping[str, int] | None = None, seed: int = DEFAULT_SEED) -> ScalePlan:
    """The rows that grow every table of ``schema`` to its target (pure: no database)."""
    scale = scale or {}
    out = ScalePlan()
    rows: dict[str, list[Row]] = {name: list(existing.get(name, ())) for name in schema.tables}
    for table in schema.parents_first():
        name = table.full
        out.order.append(name)
        have = rows[name]
        need = target_rows(table, scale_rows, scale) - len(have)
        new: list[Row] = []
        if need > 0:
            new = _grow(table, have, need, rows, random.Random(f"plsqlbench-b2:{seed}:{name}"), out.notes)
        out.new_rows[name] = new
        have.extend(new)
        out.counts[name] = len(have)
    return out


def _grow(table: Table, have: list[Row], need: int, rows: Mapping[str, list[Row]], rng: random.Random,
          notes: list[str]) -> list[Row]:
    fk_columns = {c for fk in table.foreign_keys for c in fk.columns}
    keys = table.keys
    fresh_columns = [c for key in keys for c in key if c not in fk_columns]
    fresh = {c: _Fresh(table.column(c), (r.get(c) for r in have)) for c in dict.fromkeys(fresh_columns)}
    # keys made of foreign-key columns only: combinations must not repeat
    link_keys = [key for key in keys if key and all(c in fk_columns for c in key)]
    used = {key: {tuple(r.get(c) for c in key) for r in have} for key in link_keys}
    templates = list(have)
    # rows a reference may point at (a self-reference: the fixture's rows)
    parents = {i: [p for p in rows.get(fk.parent, ()) if all(p.get(pc) is not None for pc in fk.parent_columns)]
               for i, fk in enumerate(table.foreign_keys)}
    new: list[Row] = []
    for n in range(need):
        template = templates[rng.randrange(len(templates))] if templates else {
            c.name: _default(c, len(have) + n + 1) for c in table.columns}
        row = {c.name: template.get(c.name) for c in table.writable}
        ok = True
        for _attempt in range(MAX_DRAWS if link_keys else 1):
            ok = _draw_parents(table, template, row, parents, rng)
            if not ok:
                break
            if all(tuple(row.get(c) for c in key) not in used[key] for key in link_keys):
                break
        else:
            ok = False
        if not ok:
            notes.append(f"{table.full}: grown to {len(have) + len(new)} rows, not further "
                         "(no parent row or no unused key combination left)")
            break
        for c, gen in fresh.items():
            value = gen.next(template.get(c))
            if value is None:
                notes.append(f"{table.full}: cannot make {need} distinct values for unique column {c}")
                return new
            row[c] = value
        for key in link_keys:
            used[key].add(tuple(row.get(c) for c in key))
        new.append(row)
    return new


def _draw_parents(table: Table, template: Row, row: Row, parents: Mapping[int, list[Row]], rng: random.Random) -> bool:
    for i, fk in enumerate(table.foreign_keys):
        if all(template.get(c) is None for c in fk.columns) and all(table.column(c).nullable for c in fk.columns):
            continue  # an optional reference stays absent, as in the template
        candidates = parents[i]
        if not candidates:
            return False
        parent = candidates[rng.randrange(len(candidates))]
        for c, pc in zip(fk.columns, fk.parent_columns):
            row[c] = parent.get(pc)
    return True


# --------------------------------------------------------------------------- values <-> text
def from_text(column: Column, text: Any) -> Any:
    """A value read as PostgreSQL text (the candidate session's loaders) as a Python value."""
    if text is None:
        return None
    text = str(text)
    kind = column.kind
    try:
        if kind == INT:
            return int(text)
        if kind == DECIMAL:
            return decimal.Decimal(text)
        if kind == FLOAT:
            return float(text)
        if kind == DATE:
            return dt.date.fromisoformat(text)
        if kind == TIMESTAMP and "+" not in text[10:] and "-" not in text[10:]:
            return dt.datetime.fromisoformat(text)
        if kind == BOOL:
            return text in ("t", "true")
    except ValueError:
        pass
    return text


def to_text(value: Any) -> str | None:
    """What COPY's text format expects for a value (its PostgreSQL input form)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float):
        return repr(value)
    return str(value)


# --------------------------------------------------------------------------- PostgreSQL
ANALYZER_SCHEMA = "plsqlbench_b2"
ANALYZER = f"{ANALYZER_SCHEMA}.analyze_schema"
STASH = f"{ANALYZER_SCHEMA}.stash_tables"
REFILL = f"{ANALYZER_SCHEMA}.refill_tables"

#: Copies of the scaled tables, made once per bench in the candidate's transaction by their
#: owner (the candidate cannot read or change them), and the registry of what was copied; named
#: after the backend so that benches of workers sharing a database never wait on each other.
_STASH_FN = f"""CREATE OR REPLACE FUNCTION {STASH}(p_tables text[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE reg text := 'stash_' || pg_backend_pid(); t text; n int := 0; cols text; s record;
BEGIN
  EXECUTE format('CREATE TABLE {ANALYZER_SCHEMA}.%I (ord int, rel regclass, copy text, cols text)', reg);
  EXECUTE format('CREATE TABLE {ANALYZER_SCHEMA}.%I (seq regclass, last_value int8, is_called bool)', reg || '_seq');
  FOREACH t IN ARRAY p_tables LOOP
    n := n + 1;
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO cols FROM pg_attribute
     WHERE attrelid = t::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = '';
    EXECUTE format('CREATE TABLE {ANALYZER_SCHEMA}.%I AS SELECT %s FROM %s', reg || '_' || n, cols, t::regclass);
    EXECUTE format('INSERT INTO {ANALYZER_SCHEMA}.%I VALUES ($1, $2, $3, $4)', reg) USING n, t::regclass, reg || '_' || n, cols;
  END LOOP;
  FOR s IN SELECT c.oid::regclass AS seq FROM pg_class c
            WHERE c.relkind = 'S' AND c.relnamespace IN (SELECT relnamespace FROM pg_class
                                                          WHERE oid = ANY (p_tables::regclass[])) LOOP
    EXECUTE format('INSERT INTO {ANALYZER_SCHEMA}.%I SELECT %L::regclass, last_value, is_called FROM %s',
                   reg || '_seq', s.seq, s.seq);
  END LOOP;
END $f$"""

#: Put the scaled state back into fresh files: TRUNCATE gives every table (and its indexes) a
#: new, empty file inside the run's subtransaction, the rows come back from the copies in the
#: same physical order, the planner statistics are taken again (a full sample at B2's sizes:
#: the same statistics every time), the sequences are set back. The run's rollback drops those
#: files with everything the run left in them. User triggers do not fire for the refill.
_REFILL_FN = f"""CREATE OR REPLACE FUNCTION {REFILL}() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE reg text := 'stash_' || pg_backend_pid(); r record; list text;
BEGIN
  EXECUTE format('SELECT string_agg(rel::text, '', '' ORDER BY ord) FROM {ANALYZER_SCHEMA}.%I', reg) INTO list;
  FOR r IN EXECUTE format('SELECT rel FROM {ANALYZER_SCHEMA}.%I ORDER BY ord', reg) LOOP
    EXECUTE format('ALTER TABLE %s DISABLE TRIGGER USER', r.rel);
  END LOOP;
  EXECUTE 'TRUNCATE ' || list;
  FOR r IN EXECUTE format('SELECT rel, copy, cols FROM {ANALYZER_SCHEMA}.%I ORDER BY ord', reg) LOOP
    EXECUTE format('INSERT INTO %s (%s) OVERRIDING SYSTEM VALUE SELECT %s FROM {ANALYZER_SCHEMA}.%I',
                   r.rel, r.cols, r.cols, r.copy);
    EXECUTE format('ALTER TABLE %s ENABLE TRIGGER USER', r.rel);
    EXECUTE format('ANALYZE %s', r.rel);
  END LOOP;
  FOR r IN EXECUTE format('SELECT seq, last_value, is_called FROM {ANALYZER_SCHEMA}.%I', reg || '_seq') LOOP
    PERFORM setval(r.seq, r.last_value, r.is_called);
  END LOOP;
END $f$"""


def pg_stash(conn: Any, tables: Sequence[str]) -> None:
    """Copy the scaled tables (``schema.table``, parents first) for :func:`pg_refill`."""
    conn.execute(f"SELECT {STASH}(%s)", (list(tables),))


def pg_refill(conn: Any) -> None:
    """Every stashed table back to its scaled rows, in fresh files (see :data:`_REFILL_FN`)."""
    conn.execute(f"SELECT {REFILL}()")


def install_analyzer(admin: Any, role: str) -> bool:
    """A SECURITY DEFINER function (owned by the fixtures' owner) the candidate session calls to
    ANALYZE the task's tables inside its own transaction (ANALYZE needs ownership; the rows to
    sample are uncommitted, so only that session sees them). Returns False if it cannot be made."""
    from psycopg import sql as pgsql

    try:
        with admin.transaction():
            admin.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pgsql.Identifier(ANALYZER_SCHEMA)))
            admin.execute(
                f"CREATE OR REPLACE FUNCTION {ANALYZER}(p_schema text) RETURNS void "
                "LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$ "
                "DECLARE t record; BEGIN "
                "IF p_schema IN ('pg_catalog', 'information_schema') OR p_schema LIKE 'pg\\_%' THEN RETURN; END IF; "
                "FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = p_schema AND c.relkind IN ('r', 'p') ORDER BY 1 LOOP "
                "EXECUTE format('ANALYZE %I.%I', p_schema, t.relname); END LOOP; END $f$")
            admin.execute(_STASH_FN)
            admin.execute(_REFILL_FN)
            for fn in (f"{ANALYZER}(text)", f"{STASH}(text[])", f"{REFILL}()"):
                admin.execute(f"REVOKE ALL ON FUNCTION {fn} FROM PUBLIC")
            admin.execute(pgsql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                pgsql.Identifier(ANALYZER_SCHEMA), pgsql.Identifier(role)))
            for fn in (f"{ANALYZER}(text)", f"{STASH}(text[])", f"{REFILL}()"):
                admin.execute(pgsql.SQL(f"GRANT EXECUTE ON FUNCTION {fn} TO {{}}").format(pgsql.Identifier(role)))
        return True
    except Exception as exc:  # noqa: BLE001 - a --plsql-dsn user that does not own the fixtures
        log.warning("B2: planner statistics cannot be refreshed after scaling (%s)", str(exc).strip())
        return False


def revoke_analyzer(admin: Any, role: str) -> None:
    """Take back what :func:`install_analyzer` granted, once the scaled tables are analyzed.

    ANALYZE writes ``pg_class.reltuples``/``relpages`` in place, which no rollback undoes: an
    answer that could call it (say, on tables it emptied in a subtransaction it then rolled
    back) would leave gold and the degraded input planning against tables that look empty for
    the rest of the bench, and every later task on the worker too."""
    from psycopg import sql as pgsql

    try:
        with admin.transaction():
            for fn in (f"{ANALYZER}(text)", f"{STASH}(text[])"):  # the refill stays: it runs before every run
                admin.execute(pgsql.SQL(f"REVOKE EXECUTE ON FUNCTION {fn} FROM {{}}").format(pgsql.Identifier(role)))
    except Exception as exc:  # noqa: BLE001 - logged; the grant stays, as it was before this call
        log.warning("B2: could not revoke the analyzer from %s (%s)", role, str(exc).strip())


def pg_rows(conn: Any, table: Table) -> list[Row]:
    """The table's rows in key order, as Python values."""
    from psycopg import sql as pgsql

    cols = [c for c in table.writable]
    order = table.primary_key or tuple(c.name for c in cols)
    query = pgsql.SQL("SELECT {} FROM {}.{} ORDER BY {}").format(
        pgsql.SQL(", ").join(pgsql.SQL("{}::pg_catalog.text").format(pgsql.Identifier(c.name)) for c in cols),
        pgsql.Identifier(table.schema), pgsql.Identifier(table.name),
        pgsql.SQL(", ").join(pgsql.Identifier(c) for c in order))
    return [{c.name: from_text(c, v) for c, v in zip(cols, row)} for row in conn.execute(query).fetchall()]


def pg_scale(conn: Any, schema_name: str, scale_rows: int, scale: Mapping[str, int] | None = None,
             seed: int = DEFAULT_SEED, analyze: bool = True) -> ScalePlan:
    """Grow the tables of ``schema_name`` on ``conn`` inside its open transaction (the caller
    rolls back). Formatting settings are pinned for the reads and restored after."""
    from psycopg import sql as pgsql

    from .catalog import pg_schema

    conn.execute("SAVEPOINT plsql_b2_read")
    try:
        for stmt in ("SET LOCAL search_path = pg_catalog, pg_temp", "SET LOCAL DateStyle = 'ISO, YMD'",
                     "SET LOCAL extra_float_digits = 3", "SET LOCAL TimeZone = 'UTC'"):
            conn.execute(stmt)
        catalog = pg_schema(conn, schema_name)
        existing = {name: pg_rows(conn, t) for name, t in catalog.tables.items()}
    finally:
        conn.execute("ROLLBACK TO SAVEPOINT plsql_b2_read")
        conn.execute("RELEASE SAVEPOINT plsql_b2_read")
    result = plan(catalog, existing, scale_rows, scale, seed)
    conn.execute("SET LOCAL DateStyle = 'ISO, YMD'")
    for name in result.order:
        rows = result.new_rows[name]
        if not rows:
            continue
        table = catalog.tables[name]
        cols = [c.name for c in table.writable]
        copy_sql = pgsql.SQL("COPY {}.{} ({}) FROM STDIN").format(
            pgsql.Identifier(table.schema), pgsql.Identifier(table.name),
            pgsql.SQL(", ").join(pgsql.Identifier(c) for c in cols))
        with conn.cursor() as cur, cur.copy(copy_sql) as copy:
            for row in rows:
                copy.write_row([to_text(row.get(c)) for c in cols])
    conn.execute("RESET DateStyle")
    if analyze:
        conn.execute(f"SELECT {ANALYZER}(%s)", (schema_name,))
    return result


# --------------------------------------------------------------------------- Oracle
def ora_insert_sql(table: Table) -> str:
    """The INSERT the admin runs (executemany) for one table's new rows; bind variables only."""
    from ..state import ora_quote

    cols = [c.name for c in table.writable]
    return (f"INSERT INTO {ora_quote(table.schema.upper())}.{ora_quote(table.name.upper())} "
            f"({', '.join(ora_quote(c.upper()) for c in cols)}) "
            f"VALUES ({', '.join(f':{n}' for n in range(1, len(cols) + 1))})")


ORA_STATS = "BEGIN DBMS_STATS.GATHER_TABLE_STATS(ownname => :1, tabname => :2, no_invalidate => FALSE); END;"


def ora_rows_sql(table: Table) -> str:
    from ..state import ora_quote

    cols = [c.name for c in table.writable]
    order = table.primary_key or tuple(cols)
    return (f"SELECT {', '.join(ora_quote(c.upper()) for c in cols)} FROM "
            f"{ora_quote(table.schema.upper())}.{ora_quote(table.name.upper())} "
            f"ORDER BY {', '.join(ora_quote(c.upper()) for c in order)}")


def ora_scale(sql: Callable[[str, Sequence[Any]], list], many: Callable[[str, list[list[Any]]], None],
              owner: str, scale_rows: int, scale: Mapping[str, int] | None = None,
              seed: int = DEFAULT_SEED) -> ScalePlan:
    """Oracle: read the catalog and rows with ``sql``, insert parents-first with ``many``
    (``executemany``), gather statistics, and commit (the caller's ``Restorer`` puts the clean
    state back afterwards: the scaled rows are committed data, as Oracle's calls commit too)."""
    from .catalog import ora_schema

    catalog = ora_schema(sql, owner)
    existing = {}
    for name, table in catalog.tables.items():
        cols = [c.name for c in table.writable]
        existing[name] = [dict(zip(cols, r)) for r in sql(ora_rows_sql(table), [])]
    result = plan(catalog, existing, scale_rows, scale, seed)
    for name in result.order:
        rows = result.new_rows[name]
        if rows:
            table = catalog.tables[name]
            cols = [c.name for c in table.writable]
            many(ora_insert_sql(table), [[r.get(c) for c in cols] for r in rows])
    for name in result.order:
        table = catalog.tables[name]
        sql(ORA_STATS, [table.schema.upper(), table.name.upper()])
    sql("COMMIT", [])
    return result

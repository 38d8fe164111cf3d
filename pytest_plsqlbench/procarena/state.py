"""Database state: a snapshot of every table a task can change, in a canonical form, and its diff.

The state is every table of the task's database schema plus every table in the candidate's
scratch schema (what either side created), each a *multiset* of rows: row order, which PLForge
relies on ("ordered by the first column"), is not part of the state. Every sequence of those
schemas is part of it too, as a one-row table ``<schema>.<sequence> (sequence)`` holding where it
stands: a procedure that numbers rows by ``max(id) + 1`` where gold calls ``nextval`` leaves the
same rows and a different sequence. PostgreSQL only, for now (``pg_sequences.last_value``):
Oracle's restore (:mod:`.oracle_restore`) does not yet put sequences back after a run, and
``LAST_NUMBER`` of a cached sequence jumps by its cache size, so Oracle states leave sequences out.

Canonical form of a value (so equal states compare equal, run after run):

* NULL stays ``None`` (distinct from ``''``; Oracle stores ``''`` as NULL anyway);
* integers and decimals: the exact decimal value without trailing zeros (``1.50`` -> ``1.5``,
  ``-0`` -> ``0``);
* floating point (``real``/``double precision``/``BINARY_DOUBLE``): rounded to 12 significant
  digits, so the last bits of two computations in a different order do not matter;
* dates and times: ISO text (``2024-01-15``, ``2024-01-15 10:00:00[.ffffff]``); PostgreSQL
  ``timestamptz`` read in UTC; the session's DateStyle/NLS settings cannot change it;
* booleans ``true``/``false``; bytes lower-case hex; text exactly as stored (case and trailing
  blanks count).

Reading cannot be redirected by an answer: tables are found through the catalog with fully
qualified names (``pg_catalog.*`` with ``search_path = pg_catalog, pg_temp``; Oracle ``SYS.*``
views) and read as ``"schema"."table"``, so a view, function, synonym or type an answer
creates under a similar name is never what the snapshot reads. In PostgreSQL the read runs
in a savepoint with fixed formatting settings and ``row_security = off`` (a row-level policy on
an answer's own table makes the read fail loudly instead of hiding rows), rolled back after.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InfrastructureError

#: Rows read per table at most; a larger table is recorded as such (and differs from gold's).
MAX_ROWS = 100_000
#: Tables read at most (an answer creating thousands of tables must not stall the harness).
MAX_TABLES = 500
FLOAT_DIGITS = 12
#: Rows of a difference shown in a failure message (per side).
SHOWN_ROWS = 3

Row = tuple


@dataclass(frozen=True)
class TableState:
    name: str
    columns: tuple[str, ...]
    rows: Counter = field(default_factory=Counter)
    #: Why the table could not be read in full (too many rows, a read error); compared as is.
    problem: str | None = None


State = Mapping[str, TableState]


# --------------------------------------------------------------------------- canonical form
def _decimal_text(d: decimal.Decimal) -> str:
    if not d.is_finite():
        return str(d)
    if d == 0:
        return "0"
    return format(d.normalize(), "f")


def canonical(value: Any, *, floating: bool = False) -> str | None:
    """The canonical text of one value (see the module doc); ``floating`` for binary floats."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) or (floating and isinstance(value, (int, decimal.Decimal, str))):
        try:
            f = float(value)
        except ValueError:
            return str(value)
        if f != f or f in (float("inf"), float("-inf")):
            return str(f)
        return _decimal_text(decimal.Decimal(format(f, f".{FLOAT_DIGITS}g")))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return _decimal_text(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if hasattr(value, "read"):  # an Oracle LOB
        return canonical(value.read(), floating=floating)
    return str(value)


def _sort_key(row: Row) -> tuple:
    return tuple((0, "") if v is None else (1, v) for v in row)


def table_state(name: str, columns: Iterable[str], rows: Iterable[Row], problem: str | None = None) -> TableState:
    return TableState(name, tuple(columns), Counter(rows), problem)


# --------------------------------------------------------------------------- comparison
def _fmt_row(columns: tuple[str, ...], row: Row) -> str:
    cells = ", ".join(f"{c}={'NULL' if v is None else repr(v)}" for c, v in zip(columns, row))
    return f"({cells})"


def table_diff(expected: TableState | None, actual: TableState | None) -> str | None:
    """Why two versions of one table differ, or None when they are equal."""
    if expected is None and actual is None:
        return None
    if expected is None:
        assert actual is not None
        return f"table {actual.name}: created by the answer, not by gold ({sum(actual.rows.values())} row(s))"
    if actual is None:
        return f"table {expected.name}: gold has it, the answer's state does not"
    name = expected.name
    if expected.columns != actual.columns:
        return f"table {name}: columns differ: gold {list(expected.columns)}, answer {list(actual.columns)}"
    if expected.problem != actual.problem:
        return f"table {name}: gold {expected.problem or 'read in full'}, answer {actual.problem or 'read in full'}"
    if expected.rows == actual.rows:
        return None
    missing = expected.rows - actual.rows
    extra = actual.rows - expected.rows
    lines = [
        f"table {name} differs: {sum(missing.values())} gold row(s) missing, {sum(extra.values())} unexpected row(s)"
        f" ({sum(expected.rows.values())} vs {sum(actual.rows.values())} rows)"
    ]
    for label, rows in (("missing", missing), ("unexpected", extra)):
        shown = sorted(rows.elements(), key=_sort_key)
        for row in shown[:SHOWN_ROWS]:
            lines.append(f"  {label}: {_fmt_row(expected.columns, row)}")
        if len(shown) > SHOWN_ROWS:
            lines.append(f"  ... {len(shown) - SHOWN_ROWS} more {label}")
    return "\n".join(lines)


def diff(expected: State, actual: State) -> list[str]:
    """One message per differing table, in table-name order (empty: the states are equal)."""
    out = []
    for name in sorted(set(expected) | set(actual)):
        why = table_diff(expected.get(name), actual.get(name))
        if why:
            out.append(why)
    return out


def differing_tables(expected: State, actual: State) -> list[str]:
    return [n for n in sorted(set(expected) | set(actual)) if table_diff(expected.get(n), actual.get(n))]


# --------------------------------------------------------------------------- PostgreSQL
_PG_SETTINGS = (
    "SET LOCAL search_path = pg_catalog, pg_temp",
    "SET LOCAL row_security = off",
    # An error reading one table is that table's state ("unreadable"), never the session's end,
    # whatever the answer left set (the session also resets it after each script).
    "SET LOCAL exit_on_error = off",
    "SET LOCAL DateStyle = 'ISO, YMD'",
    "SET LOCAL IntervalStyle = 'postgres'",
    "SET LOCAL TimeZone = 'UTC'",
    "SET LOCAL extra_float_digits = 1",
    "SET LOCAL bytea_output = 'hex'",
)
_PG_TABLES = (
    "SELECT n.nspname, c.relname, c.oid FROM pg_catalog.pg_class c "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname OPERATOR(pg_catalog.=) ANY (%s::pg_catalog.text[]) AND c.relkind IN ('r', 'p') "
    "AND NOT c.relispartition ORDER BY 1, 2"
)
_PG_FLOATS = {"float4", "float8"}
#: Where each sequence stands (``pg_sequences`` shows NULL for one the reader may not use: the
#: same for gold and the answer, who read with the same role).
_PG_SEQUENCES = (
    "SELECT schemaname, sequencename, last_value::pg_catalog.text FROM pg_catalog.pg_sequences "
    "WHERE schemaname OPERATOR(pg_catalog.=) ANY (%s::pg_catalog.text[]) ORDER BY 1, 2"
)
SEQUENCE_COLUMNS = ("last_value",)


def sequence_name(schema: str, sequence: str) -> str:
    """The state key of a sequence (never a table's: a table name has no blank)."""
    return f"{schema}.{sequence} (sequence)".lower()


def _pg_value(text: Any, category: str, typname: str) -> str | None:
    if text is None:
        return None
    if category == "N":
        if typname in _PG_FLOATS:
            return canonical(text, floating=True)
        try:
            return canonical(decimal.Decimal(str(text)))
        except decimal.InvalidOperation:
            return str(text)
    if category == "B" and str(text) in ("t", "f"):
        return "true" if text == "t" else "false"
    if isinstance(text, (bytes, memoryview)):
        return canonical(text)
    return str(text)


_PG_ALL_COLUMNS = (
    "SELECT a.attrelid, a.attname, t.typcategory, t.typname FROM pg_catalog.pg_attribute a "
    "JOIN pg_catalog.pg_type t ON t.oid = a.atttypid WHERE a.attrelid OPERATOR(pg_catalog.=) ANY (%s::pg_catalog.oid[]) "
    "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attrelid, a.attnum"
)


def pg_snapshot(conn: Any, schemas: Iterable[str], max_rows: int = MAX_ROWS) -> dict[str, TableState]:
    """The state of every table in ``schemas``, read on ``conn`` (the candidate's connection,
    inside its task transaction) without leaving anything behind.

    Read first in a few round trips (the settings in one, every table's columns in one, no
    savepoint per table); only when that read meets an error is it read again table by table,
    each under its own savepoint, so that one unreadable table is that table's state. Both reads
    give the same state: the second is the first with the error confined to its table."""
    import psycopg

    schemas = list(schemas)
    try:
        conn.execute("SAVEPOINT plsql_snapshot")
    except psycopg.Error as exc:
        raise InfrastructureError(f"cannot read the database state: {str(exc).strip()}") from exc
    try:
        try:
            return _pg_read(conn, schemas, max_rows, guarded=False)
        except psycopg.errors.Error:
            if conn.closed or conn.broken:
                raise
            conn.execute("ROLLBACK TO SAVEPOINT plsql_snapshot")
            return _pg_read(conn, schemas, max_rows, guarded=True)
    except psycopg.Error as exc:
        if conn.closed or conn.broken:
            raise InfrastructureError(f"lost the database while reading its state: {exc}") from exc
        raise InfrastructureError(f"reading the database state failed: {str(exc).strip()}") from exc
    finally:
        if not (conn.closed or conn.broken):
            conn.execute("ROLLBACK TO SAVEPOINT plsql_snapshot")
            conn.execute("RELEASE SAVEPOINT plsql_snapshot")


def _pg_read(conn: Any, schemas: list[str], max_rows: int, guarded: bool) -> dict[str, TableState]:
    """One read of the state (see :func:`pg_snapshot`); ``guarded``: each table under a savepoint."""
    import psycopg
    from psycopg import sql as pgsql

    out: dict[str, TableState] = {}
    conn.execute("; ".join(_PG_SETTINGS))
    tables = conn.execute(_PG_TABLES, (schemas,)).fetchall()
    if len(tables) > MAX_TABLES:
        out["<too many tables>"] = table_state("<too many tables>", (), (), f"{len(tables)} tables")
        tables = tables[:MAX_TABLES]
    columns: dict[int, list[tuple[str, str, str]]] = {oid: [] for _, _, oid in tables}
    for oid, *col in conn.execute(_PG_ALL_COLUMNS, ([oid for _, _, oid in tables],)).fetchall():
        columns[oid].append(tuple(col))
    for schema, table, oid in tables:
        cols = columns[oid]
        name = f"{schema}.{table}".lower()
        names = [c[0] for c in cols]
        as_text = (pgsql.SQL(", ").join(pgsql.SQL("{}::pg_catalog.text").format(pgsql.Identifier(c)) for c in names)
                   if names else pgsql.SQL(""))
        query = pgsql.SQL("SELECT {} FROM {}.{} LIMIT {}").format(
            as_text, pgsql.Identifier(schema), pgsql.Identifier(table), pgsql.Literal(max_rows + 1),
        )
        try:
            if guarded:
                conn.execute("SAVEPOINT plsql_snapshot_table")
            rows = conn.execute(query).fetchall()
            problem = None
            if len(rows) > max_rows:
                # Compared in part only: the whole table's rows (as text) are digested on the
                # server -- a sum of 64-bit hashes, in constant memory, order-independent -- so
                # a difference past the first max_rows rows still shows.
                digest = pgsql.SQL(
                    "SELECT count(*), sum(('x' || left(md5(r), 16))::bit(64)::int8::numeric) FROM "
                    "(SELECT ROW({})::pg_catalog.text AS r FROM {}.{}) q").format(
                    as_text, pgsql.Identifier(schema), pgsql.Identifier(table))
                count, total = conn.execute(digest).fetchone()
                problem = f"more than {max_rows} rows ({count} rows, digest {total})"
                rows = []  # the first rows read depend on physical order: the digest decides
            if guarded:
                conn.execute("RELEASE SAVEPOINT plsql_snapshot_table")
        except psycopg.errors.Error as exc:
            if not guarded or conn.closed or conn.broken:
                raise
            conn.execute("ROLLBACK TO SAVEPOINT plsql_snapshot_table")
            out[name] = table_state(name, names, (), f"unreadable ({str(exc).strip().splitlines()[0]})")
            continue
        canon = (tuple(_pg_value(v, c[1], c[2]) for v, c in zip(row, cols)) for row in rows)
        out[name] = table_state(name, names, canon, problem)
    for schema, sequence, last in conn.execute(_PG_SEQUENCES, (schemas,)).fetchall():
        name = sequence_name(schema, sequence)
        out[name] = table_state(name, SEQUENCE_COLUMNS, [(last,)])
    return out


# --------------------------------------------------------------------------- Oracle
ORA_TABLES = (
    "SELECT owner, table_name FROM SYS.ALL_TABLES WHERE owner IN ({owners}) "
    "AND temporary = 'N' AND nested = 'NO' AND secondary = 'N' AND table_name NOT LIKE 'BIN$%' "
    "AND table_name NOT LIKE 'PLSQLBENCH%' AND table_name NOT LIKE 'PA$%' ORDER BY owner, table_name"
)
ORA_COLUMNS = (
    "SELECT column_name, data_type FROM SYS.ALL_TAB_COLUMNS WHERE owner = :o AND table_name = :t "
    "AND data_type NOT IN ('ROWID', 'UROWID') ORDER BY column_id"
)
_ORA_FLOATS = {"BINARY_FLOAT", "BINARY_DOUBLE", "FLOAT"}


def ora_quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def ora_snapshot(conn: Any, owners: Iterable[str], max_rows: int = MAX_ROWS) -> dict[str, TableState]:
    """The state of every table of ``owners`` (upper-case schema names), read on ``conn``.

    Dictionary views are named ``SYS.*`` and tables ``"OWNER"."TABLE"``, so an answer's private
    synonym or table called ``ALL_TABLES`` (or like a task table) is never read instead.
    """
    owners = [o.upper() for o in owners]
    binds = ", ".join(f":o{i}" for i in range(len(owners)))
    out: dict[str, TableState] = {}
    cur = conn.cursor()
    try:
        cur.execute(ORA_TABLES.format(owners=binds), {f"o{i}": o for i, o in enumerate(owners)})
        tables = cur.fetchall()
        if len(tables) > MAX_TABLES:
            out["<too many tables>"] = table_state("<too many tables>", (), (), f"{len(tables)} tables")
            tables = tables[:MAX_TABLES]
        for owner, table in tables:
            cur.execute(ORA_COLUMNS, {"o": owner, "t": table})
            cols = cur.fetchall()
            name = f"{owner}.{table}".lower()
            names = [c[0].lower() for c in cols]
            select = ", ".join(ora_quote(c[0]) for c in cols)
            cur.execute(f"SELECT {select} FROM {ora_quote(owner)}.{ora_quote(table)} "
                        f"FETCH FIRST {max_rows + 1} ROWS ONLY")
            rows = cur.fetchall()
            problem = f"more than {max_rows} rows" if len(rows) > max_rows else None
            floats = [c[1] in _ORA_FLOATS for c in cols]
            canon = (tuple(canonical(v, floating=f) for v, f in zip(row, floats)) for row in rows[:max_rows])
            out[name] = table_state(name, names, canon, problem)
    except Exception as exc:  # noqa: BLE001 - the driver's errors; the harness's query failed
        raise InfrastructureError(f"reading the database state failed: {str(exc).strip()}") from exc
    finally:
        cur.close()
    return out

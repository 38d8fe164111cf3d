"""The shape of a task's tables, read from the database catalog: what the scaler must respect.

Columns with a coarse kind (integer, decimal, float, text, date, timestamp, boolean, other),
NOT NULL, text length, primary key, unique constraints and foreign keys. PostgreSQL reads
``pg_catalog`` (visible to the candidate role, unlike parts of ``information_schema``);
Oracle reads ``SYS.ALL_TAB_COLUMNS`` / ``ALL_CONSTRAINTS`` / ``ALL_CONS_COLUMNS``. CHECK
constraints are not parsed: the scaler copies non-key values from existing rows, which satisfy
them already.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..oracle_restore import parents_first

INT, DECIMAL, FLOAT, TEXT, DATE, TIMESTAMP, BOOL, OTHER = (
    "int", "decimal", "float", "text", "date", "timestamp", "bool", "other")


@dataclass(frozen=True)
class Column:
    name: str
    kind: str
    nullable: bool = True
    length: int | None = None  # character columns: the declared maximum
    #: Filled by the database (identity / generated column): never written by the scaler.
    generated: bool = False


@dataclass(frozen=True)
class ForeignKey:
    columns: tuple[str, ...]
    parent: str  # schema.table, lower case
    parent_columns: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    schema: str
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    uniques: tuple[tuple[str, ...], ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = ()
    identity: bool = False  # PostgreSQL: a GENERATED ALWAYS identity column exists

    @property
    def full(self) -> str:
        return f"{self.schema}.{self.name}".lower()

    @property
    def writable(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if not c.generated)

    @property
    def keys(self) -> tuple[tuple[str, ...], ...]:
        """Every set of columns that must be unique (primary key first)."""
        return ((self.primary_key,) if self.primary_key else ()) + tuple(u for u in self.uniques if u != self.primary_key)

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)


@dataclass
class Schema:
    tables: dict[str, Table] = field(default_factory=dict)

    def parents_first(self) -> list[Table]:
        edges = [(t.full, fk.parent) for t in self.tables.values() for fk in t.foreign_keys]
        return [self.tables[n] for n in parents_first(self.tables, edges)]


# --------------------------------------------------------------------------- PostgreSQL
def pg_kind(typname: str, category: str) -> str:
    if typname in ("int2", "int4", "int8"):
        return INT
    if typname == "numeric":
        return DECIMAL
    if typname in ("float4", "float8"):
        return FLOAT
    if typname == "date":
        return DATE
    if typname in ("timestamp", "timestamptz"):
        return TIMESTAMP
    if typname == "bool":
        return BOOL
    if category == "S":
        return TEXT
    return OTHER


PG_COLUMNS = (
    "SELECT c.relname, a.attname, t.typname, t.typcategory, a.attnotnull, "
    "CASE WHEN t.typname IN ('varchar', 'bpchar') AND a.atttypmod > 4 THEN a.atttypmod - 4 END, "
    "a.attidentity, a.attgenerated "
    "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
    "JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
    "WHERE n.nspname OPERATOR(pg_catalog.=) %s AND c.relkind IN ('r', 'p') AND NOT c.relispartition "
    "ORDER BY c.relname, a.attnum"
)
PG_CONSTRAINTS = (
    "SELECT c.relname, k.contype, "
    "ARRAY(SELECT a.attname::text FROM pg_catalog.unnest(k.conkey) WITH ORDINALITY u(n, i) "
    "      JOIN pg_catalog.pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.n ORDER BY u.i), "
    "fn.nspname || '.' || f.relname, "
    "ARRAY(SELECT a.attname::text FROM pg_catalog.unnest(k.confkey) WITH ORDINALITY u(n, i) "
    "      JOIN pg_catalog.pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.n ORDER BY u.i) "
    "FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_class c ON c.oid = k.conrelid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "LEFT JOIN pg_catalog.pg_class f ON f.oid = k.confrelid "
    "LEFT JOIN pg_catalog.pg_namespace fn ON fn.oid = f.relnamespace "
    "WHERE n.nspname OPERATOR(pg_catalog.=) %s AND k.contype IN ('p', 'u', 'f') ORDER BY c.relname, k.conname"
)


def _text_array(value: Any) -> tuple[str, ...]:
    """A text[] as psycopg returns it, or as server text ``{a,b}`` (the candidate session's loaders)."""
    if isinstance(value, (list, tuple)):
        return tuple(str(v) for v in value)
    text = str(value or "").strip("{}")
    return tuple(p.strip('"') for p in text.split(",") if p)


def build(schema: str, columns: Sequence[Sequence[Any]], constraints: Sequence[Sequence[Any]],
          kind: Callable[..., str]) -> Schema:
    """The model from catalog rows (shared by both dialects; tests feed it rows directly)."""
    cols: dict[str, list[Column]] = {}
    identity: set[str] = set()
    for table, name, typname, category, notnull, length, ident, generated in columns:
        t = str(table).lower()
        gen = bool(generated and str(generated).strip()) or str(ident or "") == "a"
        if str(ident or "") == "a":
            identity.add(t)
        cols.setdefault(t, []).append(Column(str(name).lower(), kind(str(typname).lower(), str(category or "")),
                                             nullable=not _truthy(notnull), length=int(length) if length else None,
                                             generated=gen))
    pk: dict[str, tuple[str, ...]] = {}
    uniques: dict[str, list[tuple[str, ...]]] = {}
    fks: dict[str, list[ForeignKey]] = {}
    for table, contype, keycols, parent, parent_cols in constraints:
        t = str(table).lower()
        key = tuple(c.lower() for c in _text_array(keycols))
        if contype == "p":
            pk[t] = key
        elif contype == "u":
            uniques.setdefault(t, []).append(key)
        elif contype == "f" and parent:
            fks.setdefault(t, []).append(ForeignKey(key, str(parent).lower(),
                                                    tuple(c.lower() for c in _text_array(parent_cols))))
    out = Schema()
    for t, c in cols.items():
        table = Table(schema.lower(), t, tuple(c), pk.get(t, ()), tuple(uniques.get(t, ())), tuple(fks.get(t, ())),
                      identity=t in identity)
        out.tables[table.full] = table
    return out


def _truthy(value: Any) -> bool:
    return value is True or value in ("t", "true", "Y", 1)


def pg_schema(conn: Any, schema: str) -> Schema:
    """Read on ``conn`` (any role that can see the schema's tables)."""
    columns = conn.execute(PG_COLUMNS, (schema,)).fetchall()
    constraints = conn.execute(PG_CONSTRAINTS, (schema,)).fetchall()
    return build(schema, columns, constraints, pg_kind)


# --------------------------------------------------------------------------- Oracle
ORA_COLUMNS = (
    "SELECT table_name, column_name, data_type, NULL, CASE nullable WHEN 'N' THEN 'Y' ELSE 'N' END, "
    "CASE WHEN data_type IN ('VARCHAR2', 'CHAR', 'NVARCHAR2', 'NCHAR') THEN char_length END, "
    "CASE identity_column WHEN 'YES' THEN 'a' END, CASE virtual_column WHEN 'YES' THEN 's' END "
    "FROM SYS.ALL_TAB_COLS WHERE owner = :1 AND hidden_column = 'NO' "
    "AND table_name IN (SELECT table_name FROM SYS.ALL_TABLES WHERE owner = :1 AND temporary = 'N' "
    "AND nested = 'NO' AND secondary = 'N' AND table_name NOT LIKE 'PA$%' AND table_name NOT LIKE 'BIN$%') "
    "ORDER BY table_name, column_id"
)
ORA_CONSTRAINTS = (
    "SELECT c.table_name, LOWER(DECODE(c.constraint_type, 'P', 'p', 'U', 'u', 'R', 'f')), "
    "LISTAGG(cc.column_name, ',') WITHIN GROUP (ORDER BY cc.position), "
    "MAX(CASE WHEN p.table_name IS NOT NULL THEN p.owner || '.' || p.table_name END), "
    "MAX((SELECT LISTAGG(pc.column_name, ',') WITHIN GROUP (ORDER BY pc.position) FROM SYS.ALL_CONS_COLUMNS pc "
    "     WHERE pc.owner = p.owner AND pc.constraint_name = p.constraint_name)) "
    "FROM SYS.ALL_CONSTRAINTS c JOIN SYS.ALL_CONS_COLUMNS cc "
    "ON cc.owner = c.owner AND cc.constraint_name = c.constraint_name "
    "LEFT JOIN SYS.ALL_CONSTRAINTS p ON p.owner = c.r_owner AND p.constraint_name = c.r_constraint_name "
    "WHERE c.owner = :1 AND c.constraint_type IN ('P', 'U', 'R') AND c.table_name NOT LIKE 'PA$%' "
    "GROUP BY c.table_name, c.constraint_name, c.constraint_type ORDER BY c.table_name, c.constraint_name"
)


def ora_kind(data_type: str, _category: str = "") -> str:
    d = data_type.upper()
    if d == "NUMBER" or d.startswith("NUMBER("):
        return DECIMAL
    if d in ("INTEGER", "SMALLINT"):
        return INT
    if d in ("BINARY_FLOAT", "BINARY_DOUBLE", "FLOAT"):
        return FLOAT
    if d in ("VARCHAR2", "CHAR", "NVARCHAR2", "NCHAR", "CLOB"):
        return TEXT
    if d == "DATE":
        return DATE
    if d.startswith("TIMESTAMP"):
        return TIMESTAMP
    return OTHER


def ora_schema(sql: Callable[[str, Sequence[Any]], list], owner: str) -> Schema:
    """``sql(text, params)`` runs a query and returns its rows (the admin's, or a stand-in)."""
    owner = owner.upper()
    columns = [(t, c, d.lower(), "", n, ln, i, g) for t, c, d, _x, n, ln, i, g in sql(ORA_COLUMNS, [owner])]
    constraints = [(t, k, cols, p, pc) for t, k, cols, p, pc in sql(ORA_CONSTRAINTS, [owner])]
    return build(owner, columns, constraints, ora_kind)

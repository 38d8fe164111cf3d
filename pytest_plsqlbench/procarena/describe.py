"""The database description of a prompt, derived from the fixture script (no database needed).

ProcArena gives the Solver the schema and metadata of the task's database (§2): tables, columns
with types, keys, and a few values per column. We read them from the fixture's ``CREATE TABLE``
and ``INSERT`` statements with sqlglot, so collection stays fast and offline; a statement
sqlglot cannot read is shown as written rather than dropped.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..scripts import split
from .dialects import adapter_for

SAMPLE_VALUES = 3


@dataclass
class Column:
    name: str
    type: str
    not_null: bool = False
    values: list[str] = field(default_factory=list)


@dataclass
class Table:
    name: str  # as written, usually schema-qualified
    columns: list[Column] = field(default_factory=list)
    primary_key: list[str] = field(default_factory=list)
    foreign_keys: list[str] = field(default_factory=list)
    raw: str | None = None  # the statement, when sqlglot could not read it

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name.lower() == name.lower()), None)


def _table_name(table: exp.Table) -> str:
    return ".".join(p for p in (table.db, table.name) if p).lower()


def _create(stmt: exp.Create, dialect: str) -> Table | None:
    schema = stmt.this
    if not isinstance(schema, exp.Schema) or not isinstance(schema.this, exp.Table):
        return None
    table = Table(_table_name(schema.this))
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            kind = item.args.get("kind")
            col = Column(item.name.lower(), kind.sql(dialect=adapter_for(dialect).sqlglot) if kind else "")
            for cons in item.args.get("constraints") or []:
                c = cons.args.get("kind")
                if isinstance(c, exp.PrimaryKeyColumnConstraint):
                    table.primary_key.append(col.name)
                    col.not_null = True
                elif isinstance(c, exp.NotNullColumnConstraint) and not c.args.get("allow_null"):
                    col.not_null = True
                elif isinstance(c, exp.Reference):
                    target = c.find(exp.Table)
                    cols = [i.name.lower() for i in c.find_all(exp.Identifier) if target is None or i not in target.find_all(exp.Identifier)]
                    ref = _table_name(target) if target else "?"
                    table.foreign_keys.append(f"{col.name} -> {ref}" + (f"({', '.join(cols)})" if cols else ""))
            table.columns.append(col)
        elif isinstance(item, exp.PrimaryKey):
            table.primary_key.extend(e.name.lower() for e in item.expressions)
        elif isinstance(item, (exp.ForeignKey, exp.Constraint)):
            fk: exp.ForeignKey | None = item if isinstance(item, exp.ForeignKey) else item.find(exp.ForeignKey)
            pk: exp.PrimaryKey | None = item.find(exp.PrimaryKey) if isinstance(item, exp.Constraint) else None
            if pk is not None:
                table.primary_key.extend(e.name.lower() for e in pk.expressions)
            if fk is not None:
                reference: exp.Expression | None = fk.args.get("reference")
                referenced = reference.find(exp.Table) if reference is not None else None
                src = ", ".join(e.name.lower() for e in fk.expressions)
                dst = ""
                if reference is not None and isinstance(reference.this, exp.Schema):
                    dst = "(" + ", ".join(e.name.lower() for e in reference.this.expressions) + ")"
                table.foreign_keys.append(f"{src} -> {_table_name(referenced) if referenced else '?'}{dst}")
    return table


def _literal(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal):
        return repr(node.this) if node.is_string else node.this
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return "-" + node.this.this
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    strings = [lit for lit in node.find_all(exp.Literal) if lit.is_string]
    if strings:  # DATE '2024-01-15', TO_DATE('2024-01-15', ...), CAST(... AS DATE)
        return repr(strings[0].this)
    return node.sql()[:40]


def _insert(stmt: exp.Insert, tables: dict[str, Table]) -> None:
    target = stmt.this
    names: list[str] = []
    if isinstance(target, exp.Schema):
        names = [e.name.lower() for e in target.expressions]
        target = target.this
    if not isinstance(target, exp.Table):
        return
    table = tables.get(_table_name(target))
    values = stmt.expression
    if table is None or not isinstance(values, exp.Values):
        return
    names = names or [c.name for c in table.columns]
    for row in values.expressions:
        cells = row.expressions if isinstance(row, exp.Tuple) else [row]
        for name, cell in zip(names, cells):
            col = table.column(name)
            text = _literal(cell)
            if col is not None and text is not None and text not in col.values and len(col.values) < SAMPLE_VALUES:
                col.values.append(text)


def tables_of(script: str, dialect: str) -> list[Table]:
    """The tables a fixture creates, with keys and the first few values of each column."""
    tables: dict[str, Table] = {}
    for stmt in split(script, dialect):
        if stmt.kind == "client" or stmt.first_word not in ("CREATE", "INSERT"):
            continue
        is_table = stmt.first_word == "CREATE" and " TABLE " in f" {' '.join(stmt.text[:80].upper().split())} "
        if stmt.first_word == "CREATE" and not is_table:
            continue  # indexes, views, sequences: not part of the description
        try:
            tree = sqlglot.parse_one(stmt.text, read=adapter_for(dialect).sqlglot)
        except SqlglotError:
            tree = None
        if is_table:
            table = _create(tree, dialect) if isinstance(tree, exp.Create) else None
            if table is None:
                name = f"statement at line {stmt.line}"
                table = Table(name, raw=stmt.text.strip())
            tables[table.name] = table
        elif isinstance(tree, exp.Insert):
            _insert(tree, tables)
    return list(tables.values())


@functools.lru_cache(maxsize=64)
def describe_fixture(script: str, dialect: str) -> str:
    """:func:`describe` of a fixture script (memoised: every task of a database shares it)."""
    return describe(tables_of(script, dialect), dialect)


def describe(tables: list[Table], dialect: str) -> str:
    """Text for the prompt: one block per table."""
    lines: list[str] = []
    for t in tables:
        if t.raw is not None:
            lines += [t.raw, ""]
            continue
        lines.append(f"Table {t.name}")
        for c in t.columns:
            flags = []
            if c.name in t.primary_key:
                flags.append("primary key")
            elif c.not_null:
                flags.append("not null")
            sample = f"; e.g. {', '.join(c.values)}" if c.values else ""
            lines.append(f"  - {c.name} {c.type}" + (f" ({', '.join(flags)})" if flags else "") + sample)
        if len(t.primary_key) > 1:
            lines.append(f"  primary key ({', '.join(t.primary_key)})")
        for fk in t.foreign_keys:
            lines.append(f"  foreign key {fk}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"

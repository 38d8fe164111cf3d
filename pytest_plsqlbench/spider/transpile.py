"""Oracle SQL -> PostgreSQL with sqlglot, for the Spider schema, its data and its gold SQL.

sqlglot does the dialect work; this module adds what a *faithful* port of these files
needs and refuses, with :class:`TranspileError`, what it cannot port faithfully:

* identifiers: Oracle folds unquoted names to upper case and the release quotes upper-case
  names (``"DOCUMENT_ID"``); PostgreSQL folds to lower case. A quoted all-upper name becomes
  the quoted lower-case name, so unquoted references keep working in both databases;
  mixed-case quoted names stay as they are (they are case-sensitive in Oracle too);
* ``a || b`` ignores NULL in Oracle: it becomes ``CONCAT(a, b)``;
* ``WHERE ROWNUM <= n`` in a query block without its own ORDER BY becomes ``LIMIT n``; any
  other ROWNUM is refused;
* ``''`` is NULL in Oracle, so it becomes NULL;
* ``FROM DUAL`` is dropped, ``TO_CLOB(x)`` is ``x``, ``TO_NUMBER(x)`` a numeric cast;
* types: DATE keeps its time as ``TIMESTAMP(0)``, FLOAT is ``DOUBLE PRECISION``, RAW
  ``BYTEA``, CHAR(n) ``VARCHAR(n)`` (PostgreSQL drops CHAR padding in ``||``, Oracle keeps it:
  without padding the gold rows and the answers print alike);
* anything sqlglot reports as unsupported is an error, not a silent approximation.
"""

from __future__ import annotations

import logging
import re
from typing import cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, ParseError, SqlglotError, UnsupportedError

log = logging.getLogger(__name__)

#: PostgreSQL's reserved key words (SQL Key Words appendix, "reserved" and "reserved (can be
#: function or type)"): such names must stay quoted when they are column or table names.
PG_RESERVED = frozenset(
    """all analyse analyze and any array as asc asymmetric authorization binary both case cast check
    collate collation column concurrently constraint create cross current_catalog current_date
    current_role current_schema current_time current_timestamp current_user default deferrable desc
    distinct do else end except false fetch for foreign freeze from full grant group having ilike in
    initially inner intersect into is isnull join lateral leading left like limit localtime
    localtimestamp natural not notnull null offset on only or order outer overlaps placing primary
    references returning right select session_user similar some symmetric system_user table
    tablesample then to trailing true union unique user using variadic verbose when where window
    with""".split()
)
_ORACLE_PLAIN = re.compile(r"^[A-Z][A-Z0-9_$#]*$")


class TranspileError(ValueError):
    """An Oracle statement with no faithful PostgreSQL translation here; says why."""


def _parse(sql: str) -> exp.Expression:
    try:
        statements = [s for s in sqlglot.parse(sql, read="oracle") if s is not None]
    except (ParseError, SqlglotError) as exc:
        raise TranspileError(f"sqlglot cannot parse it as Oracle SQL: {_first(exc)}") from None
    if len(statements) != 1:
        raise TranspileError(f"expected one statement, found {len(statements)}")
    return cast(exp.Expression, statements[0])  # sqlglot >= 30 types parse() as its Expr base


def _first(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _generate(tree: exp.Expression, pretty: bool = False) -> str:
    try:
        return tree.sql(dialect="postgres", unsupported_level=ErrorLevel.RAISE, pretty=pretty)
    except UnsupportedError as exc:
        raise TranspileError(f"no PostgreSQL equivalent: {_first(exc)}") from None


# --------------------------------------------------------------------------- rewrites
def normalize_identifiers(tree: exp.Expression) -> exp.Expression:
    """Oracle name folding -> PostgreSQL name folding (see module doc)."""
    for ident in tree.find_all(exp.Identifier):
        name = ident.name
        if ident.quoted:
            if _ORACLE_PLAIN.match(name):
                ident.set("this", name.lower())
        else:
            lowered = name.lower()
            ident.set("this", lowered)
            if lowered in PG_RESERVED:
                ident.set("quoted", True)
    return tree


def _concat_nullsafe(tree: exp.Expression) -> exp.Expression:
    def flatten(node: exp.Expression) -> list[exp.Expression]:
        if isinstance(node, exp.DPipe):
            return flatten(node.this) + flatten(node.expression)
        return [node]

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.DPipe) and not isinstance(node.parent, exp.DPipe):
            return exp.Anonymous(this="CONCAT", expressions=flatten(node))
        return node

    return tree.transform(rewrite, copy=False)


def _functions(tree: exp.Expression) -> exp.Expression:
    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Literal) and node.is_string and node.this == "":
            return exp.Null()  # Oracle's '' is NULL
        if (
            isinstance(node, exp.Anonymous)
            and str(node.this).upper() == "TO_CLOB"
            and len(node.expressions) == 1
        ):
            return exp.cast(node.expressions[0], "TEXT")
        if isinstance(node, exp.ToNumber) and not node.args.get("format"):
            return exp.cast(node.this, exp.DataType.build("DECIMAL"))
        if isinstance(node, exp.Hint):
            return None  # type: ignore[return-value]  # optimizer hints mean nothing here
        return node

    return tree.transform(rewrite, copy=False)


def _is_rownum(node: exp.Expression) -> bool:
    return isinstance(node, exp.Column) and not node.table and node.name.upper() == "ROWNUM"


def _rownum_limit(cond: exp.Expression) -> int | None:
    """``n`` for ``ROWNUM <= n`` / ``ROWNUM < n+1`` / ``ROWNUM = 1`` (either side), else None."""
    left, right = cond.args.get("this"), cond.args.get("expression")
    if left is None or right is None:
        return None
    flipped: dict[type[exp.Expression], type[exp.Expression]] = {exp.GTE: exp.LTE, exp.GT: exp.LT, exp.EQ: exp.EQ}
    kind: type[exp.Expression] | None = type(cond)
    if _is_rownum(right) and not _is_rownum(left):
        left, right = right, left
        kind = flipped.get(type(cond))
    if not _is_rownum(left) or not isinstance(right, exp.Literal) or right.is_string:
        return None
    try:
        n = int(right.this)
    except ValueError:
        return None
    if kind is exp.LTE:
        return n
    if kind is exp.LT:
        return n - 1
    if kind is exp.EQ and n == 1:
        return 1
    return None


def _rownum(tree: exp.Expression) -> exp.Expression:
    for select in list(tree.find_all(exp.Select)):
        where = select.args.get("where")
        if where is None or not any(_is_rownum(c) for c in where.find_all(exp.Column)):
            continue
        conjuncts = list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]
        limits = [(c, _rownum_limit(cast(exp.Expression, c))) for c in conjuncts]
        found = [(c, n) for c, n in limits if n is not None]
        if not found:
            continue
        if select.args.get("order"):
            raise TranspileError(
                "ROWNUM filters rows before ORDER BY in the same query block; PostgreSQL's LIMIT does not"
            )
        keep = [c for c in conjuncts if all(c is not f for f, _ in found)]
        n = min(n for _, n in found)
        if keep:
            where.set("this", exp.and_(*keep))
        else:
            select.set("where", None)
        select.set("limit", exp.Limit(expression=exp.Literal.number(max(n, 0))))
    if any(_is_rownum(c) for c in tree.find_all(exp.Column)):
        raise TranspileError("ROWNUM used other than as a simple 'WHERE ROWNUM <= n' filter")
    return tree


def _drop_dual(tree: exp.Expression) -> exp.Expression:
    for select in tree.find_all(exp.Select):
        source = select.args.get("from_") or select.args.get("from")
        if (
            source is not None
            and isinstance(source.this, exp.Table)
            and source.this.name.upper() == "DUAL"
            and not source.this.db
            and not select.args.get("joins")
        ):
            select.set("from_" if "from_" in select.args else "from", None)
    return tree


def _types(tree: exp.Expression) -> exp.Expression:
    mapping = {
        exp.DataType.Type.DATE: exp.DataType.build("TIMESTAMP(0)", dialect="postgres"),
        exp.DataType.Type.FLOAT: exp.DataType.build("DOUBLE PRECISION"),
    }

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.DataType):
            if node.this in mapping and not isinstance(node.parent, exp.Cast):
                return mapping[node.this].copy()
            if node.this in (exp.DataType.Type.CHAR, exp.DataType.Type.NCHAR):
                # Oracle keeps CHAR padding through ``||``; PostgreSQL drops it when char
                # becomes text, so a padded column would print differently in the gold rows
                # and in an answer. Without padding both print the same.
                return exp.DataType(this=exp.DataType.Type.VARCHAR, expressions=node.expressions)
            if node.this == exp.DataType.Type.USERDEFINED and str(
                node.args.get("kind", "")
            ).upper().startswith("RAW"):
                return exp.DataType.build("BYTEA")
        return node

    return tree.transform(rewrite, copy=False)


def _rewrite(tree: exp.Expression) -> exp.Expression:
    tree = _functions(tree)
    tree = _rownum(tree)
    tree = _drop_dual(tree)
    tree = _concat_nullsafe(tree)
    return normalize_identifiers(tree)


# --------------------------------------------------------------------------- entry points
def to_postgres(sql: str) -> str:
    """One Oracle query or DML statement in PostgreSQL; raises :class:`TranspileError`."""
    tree = _parse(sql.strip().rstrip(";"))
    if not isinstance(tree, (exp.Query, exp.Insert, exp.Update, exp.Delete, exp.Merge)):
        raise TranspileError(f"not a query or DML statement ({type(tree).__name__})")
    return _generate(_rewrite(tree))


def expression_to_postgres(expression: str) -> str:
    """An Oracle SQL expression (a PL/SQL condition or right-hand side) in PostgreSQL."""
    tree = _parse(f"SELECT {expression} FROM DUAL")
    assert isinstance(tree, exp.Select)
    out = _rewrite(tree)
    if len(out.expressions) != 1:
        raise TranspileError(f"not one expression: {expression[:80]!r}")
    return _generate(out.expressions[0])


def ddl_to_postgres(
    sql: str, known_tables: frozenset[str] = frozenset(), pretty: bool = False
) -> tuple[str, list[str]]:
    """``CREATE TABLE`` without its foreign keys, and the keys as ``NOT VALID`` constraints.

    The keys are added after the data so load order never matters (the data is read-only
    afterwards, so ``NOT VALID`` loses nothing). A key to a table outside ``known_tables``
    (upper-case ``OWNER.TABLE``; empty means keep all) is dropped: a partial copy of the data
    may lack it.
    """
    tree = _parse(sql.strip().rstrip(";"))
    if not isinstance(tree, exp.Create) or str(tree.args.get("kind", "")).upper() != "TABLE":
        raise TranspileError("not a CREATE TABLE statement")
    schema = tree.this
    table = schema.this if isinstance(schema, exp.Schema) else schema
    keys: list[exp.Expression] = []
    if isinstance(schema, exp.Schema):
        for item in list(schema.expressions):
            fk = item.find(exp.ForeignKey) if isinstance(item, exp.Constraint) else None
            ref = fk.args.get("reference") if fk is not None else None
            if fk is None:
                continue
            item.pop()
            target = ref.find(exp.Table) if ref is not None else None
            target_name = f"{target.db}.{target.name}".upper() if target is not None else ""
            if known_tables and target_name not in known_tables:
                log.info(
                    "dropping foreign key %s of %s: %s is not in the data",
                    item.name,
                    table.sql(),
                    target_name,
                )
                continue
            keys.append(item)
    _types(tree)
    _rewrite(tree)
    create = _generate(tree, pretty)
    table_sql = _generate(table)
    alters = [f"ALTER TABLE {table_sql} ADD {_generate(normalize_identifiers(k))} NOT VALID" for k in keys]
    return create, alters

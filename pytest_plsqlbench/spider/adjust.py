"""What the release's own load evidently did, where its published DDL and DML disagree.

The release's ``spider_dml.json`` reports every statement as loaded (``execution_summary``:
``failed_statements: 0``), yet some INSERTs put ``''`` into columns ``spider_ddl.jsonl``
declares ``NOT NULL`` (``TEMPLATES.TEMPLATE_DETAILS`` of ``cre_Doc_Template_Mgt``). Oracle
stores ``''`` as NULL, and no Oracle keeps a NULL out of a NOT NULL column: the only load that
reports such an INSERT successful is one where the column did not enforce NOT NULL. So the
release's database holds NULL there, and the fixtures are built to hold the same: the column's
NOT NULL is relaxed (``ALTER TABLE … MODIFY (col NULL)`` on Oracle, ``… DROP NOT NULL`` on
PostgreSQL, right after the published CREATE TABLE) and the row keeps its NULL. Keeping ``''``
instead is not an option -- Oracle cannot store it, and PostgreSQL answers would then see a
value the paper's runs never saw.

The rule is the same for every table of every database, works from the statements alone
(no database needed, so it also holds for Oracle runs), and each use of it is listed in the
end-of-run data report. A NULL into a primary-key column cannot be loaded by any database:
that owner is reported as not loadable (a data error) and its tasks as not runnable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

_TOKENS = re.compile(r"'(?:[^']|'')*'|[(),]|[^'(),]+")


@dataclass(frozen=True)
class Columns:
    """A published CREATE TABLE's NOT NULL and primary-key columns (stored names)."""

    not_null: frozenset[str] = frozenset()
    primary_key: frozenset[str] = frozenset()


@dataclass
class Relaxed:
    """One NOT NULL column the release's data puts NULL (or ``''``) into."""

    table: str
    column: str
    rows: int
    empty_strings: int
    #: Failed statements the release reports for the table (None: it does not say).
    reported_failures: int | None = None

    def describe(self) -> str:
        what = "''" if self.empty_strings == self.rows else "'' or NULL" if self.empty_strings else "NULL"
        if self.reported_failures == 0:
            release = "the release reports the INSERT successful"
        elif self.reported_failures is None:
            release = "the release reports no failure"
        else:
            release = f"the release reports {self.reported_failures} failed statement(s) for the table"
        return (
            f"{self.table}.{self.column}: NOT NULL not enforced, as in the release's load "
            f"({self.rows} row(s) insert {what}, which Oracle stores as NULL; {release})"
        )


@dataclass
class OwnerAdjustments:
    """Everything the fixture of one owner does beyond the published statements."""

    relaxed: list[Relaxed] = field(default_factory=list)
    #: Why the owner cannot be loaded at all (a data error), if so.
    unloadable: list[str] = field(default_factory=list)


def table_columns(ddl: str) -> Columns:
    """NOT NULL and primary-key columns of a published (Oracle) CREATE TABLE."""
    try:
        tree = sqlglot.parse_one(ddl, read="oracle")
    except SqlglotError:
        return Columns()
    not_null: set[str] = set()
    pk: set[str] = set()
    for col in tree.find_all(exp.ColumnDef):
        for constraint in col.args.get("constraints") or ():
            kind = constraint.args.get("kind")
            if isinstance(kind, exp.NotNullColumnConstraint) and not kind.args.get("allow_null"):
                not_null.add(col.this.name)
            if isinstance(kind, exp.PrimaryKeyColumnConstraint):
                pk.add(col.this.name)
    for key in tree.find_all(exp.PrimaryKey):
        pk.update(e.name for e in key.expressions)
    return Columns(frozenset(not_null), frozenset(pk))


def value_rows(values: str) -> Iterator[list[str]]:
    """The top-level fields of each tuple of a ``VALUES (…), (…)`` list, as written."""
    depth = 0
    fields: list[str] = []
    current: list[str] = []
    for tok in _TOKENS.findall(values):
        if tok == "(":
            depth += 1
            if depth == 1:
                fields, current = [], []
                continue
        elif tok == ")":
            depth -= 1
            if depth == 0:
                fields.append("".join(current).strip())
                yield fields
                continue
        elif tok == "," and depth == 1:
            fields.append("".join(current).strip())
            current = []
            continue
        if depth >= 1:
            current.append(tok)


def is_null(value: str) -> bool:
    """``''`` and ``NULL`` are the same value in Oracle."""
    return value == "''" or value.upper() == "NULL"


def null_counts(columns: list[str], values: Iterable[str]) -> dict[str, tuple[int, int]]:
    """Per column: (rows whose value is NULL or ``''``, of which ``''``), over INSERT value lists."""
    counts: dict[str, list[int]] = {}
    for text in values:
        for row in value_rows(text):
            for name, value in zip(columns, row):
                if is_null(value):
                    c = counts.setdefault(name, [0, 0])
                    c[0] += 1
                    c[1] += value == "''"
    return {k: (v[0], v[1]) for k, v in counts.items()}

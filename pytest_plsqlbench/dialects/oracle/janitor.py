"""The janitor: undoing what an answer left in the candidate schema (DDL commits in Oracle).

The session snapshots the candidate's objects before a script; afterwards the janitor drops what
appeared and re-creates program units that were replaced (from their saved source).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .dsn import quote_ident

# --------------------------------------------------------------------------- janitor SQL
#: Drop order: dependents first; types last (with FORCE).
DROP_ORDER = (
    "TRIGGER",
    "MATERIALIZED VIEW",
    "VIEW",
    "SYNONYM",
    "PROCEDURE",
    "FUNCTION",
    "PACKAGE BODY",
    "PACKAGE",
    "TABLE",
    "SEQUENCE",
    "INDEX",
    "TYPE BODY",
    "TYPE",
    "JAVA SOURCE",
    "JAVA CLASS",
    "LIBRARY",
)
#: Objects that go with their table or are not droppable by name.
NOT_DROPPED = frozenset(
    {
        "LOB",
        "LOB PARTITION",
        "TABLE PARTITION",
        "INDEX PARTITION",
        "TABLE SUBPARTITION",
        "INDEX SUBPARTITION",
        "JOB",
        "DATABASE LINK",
    }
)
PLSQL_UNITS = ("TYPE", "TYPE BODY", "PACKAGE", "PACKAGE BODY", "FUNCTION", "PROCEDURE", "TRIGGER")


def drop_statement(name: str, object_type: str) -> str | None:
    kind = object_type.upper()
    if kind in NOT_DROPPED:
        return None
    ident = quote_ident(name)
    if kind == "TABLE":
        return f"DROP TABLE {ident} CASCADE CONSTRAINTS PURGE"
    if kind == "VIEW":
        return f"DROP VIEW {ident} CASCADE CONSTRAINTS"
    if kind == "TYPE":
        return f"DROP TYPE {ident} FORCE"
    return f"DROP {kind} {ident}"


def janitor_statements(objects: Iterable[tuple[str, str]]) -> list[str]:
    """DROP statements for ``(name, object_type)`` pairs, dependents first.

    A package body goes with its package and a type body with its type, so those are only
    dropped on their own when the spec stays (an answer replaced a baseline body).
    """
    objs = {(n, t.upper()) for n, t in objects}
    order = {k: i for i, k in enumerate(DROP_ORDER)}
    out = []
    for name, kind in sorted(objs, key=lambda o: (order.get(o[1], len(order)), o[0])):
        if kind == "PACKAGE BODY" and (name, "PACKAGE") in objs:
            continue
        if kind == "TYPE BODY" and (name, "TYPE") in objs:
            continue
        stmt = drop_statement(name, kind)
        if stmt:
            out.append(stmt)
    return out


@dataclass(frozen=True)
class ObjectState:
    """What identifies one version of a candidate object."""

    object_id: int
    last_ddl: Any
    status: str
    source: str | None = None


Snapshot = dict[tuple[str, str], ObjectState]


def diff_snapshots(before: Snapshot, after: Snapshot) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(objects that appeared, objects of ``before`` that were replaced, altered or dropped)."""
    new = [k for k in after if k not in before]
    changed = [k for k, v in before.items() if after.get(k) != v]
    return new, changed


def restore_statements(
    before: Snapshot, keys: Iterable[tuple[str, str]]
) -> tuple[list[str], list[tuple[str, str]]]:
    """``CREATE OR REPLACE`` statements re-creating program units from their saved source,
    and the objects that cannot be restored that way (tables, views ...)."""
    order = {k: i for i, k in enumerate(PLSQL_UNITS)}
    restorable, lost = [], []
    for key in sorted(keys, key=lambda k: (order.get(k[1], 99), k[0])):
        state = before.get(key)
        if state is not None and state.source and key[1] in order:
            restorable.append("CREATE OR REPLACE " + state.source.rstrip().rstrip("/").rstrip())
        else:
            lost.append(key)
    return restorable, lost


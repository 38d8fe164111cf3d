"""Oracle: the task database's clean state, restored after every run.

In Oracle a call may COMMIT and any DDL commits, so a rollback cannot undo what gold or an
answer did. The harness therefore keeps a *shadow copy* of each table of the task's schema and
puts it back after every run (gold's and the candidate's), and before the first one:

1. **Shadows** -- once per fixture content: ``CREATE TABLE "OWNER"."PA$<table>" AS SELECT * FROM
   "OWNER"."<table>"``, made by the admin right after the fixture loads (clean), recorded in the
   harness's registry table so workers sharing a database make them once. Snapshots never read
   ``PA$`` tables.
2. **Restore** -- by the admin, after the candidate's session ended its task (its transaction
   rolled back, its locks gone): ``DELETE`` every table in child-before-parent foreign-key order,
   then ``INSERT INTO t SELECT * FROM PA$t`` parent-first, then ``COMMIT``. Self-references need
   no order (one statement each). Objects the answer created in its own schema are dropped by
   the session's janitor (``end_task``), as for every Oracle task.
3. **Exclusion** -- a run writes shared tables, so on a database several workers share the task
   schema is held for the whole task (gold's run, the candidate's, the restores) by a row lock in
   the registry (``Backend.shared_once``: :meth:`OracleBackend._database_lock`), released after the last restore.

The SQL is built by pure functions (unit-tested with a stand-in connection); :class:`Restorer`
runs it through a ``sql(text, params)`` callable, the admin's.
"""

from __future__ import annotations

import contextlib
import graphlib
import hashlib
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ..dialects.base import Backend
from ..errors import InfrastructureError
from .state import ora_quote

SHADOW_PREFIX = "PA$"
#: B2's copies of the *scaled* tables (``PA$$<table>``: never a clean shadow, whose names continue
#: with the table's, and table names do not start with ``$``; still ``PA$%``, so every catalog
#: query and snapshot that skips shadows skips these too).
SCALED_PREFIX = "PA$$"
MAX_IDENT = 128

Sql = Callable[[str, Sequence[Any]], list]

TABLES_SQL = (
    "SELECT table_name FROM SYS.ALL_TABLES WHERE owner = :1 AND temporary = 'N' AND nested = 'NO' "
    "AND secondary = 'N' AND table_name NOT LIKE 'PA$%' AND table_name NOT LIKE 'BIN$%' ORDER BY table_name"
)
FK_SQL = (
    "SELECT c.table_name, p.table_name FROM SYS.ALL_CONSTRAINTS c JOIN SYS.ALL_CONSTRAINTS p "
    "ON p.owner = c.r_owner AND p.constraint_name = c.r_constraint_name "
    "WHERE c.owner = :1 AND c.constraint_type = 'R' AND p.owner = :1"
)


def shadow_name(table: str, prefix: str = SHADOW_PREFIX) -> str:
    return (prefix + table)[:MAX_IDENT]


def parents_first(tables: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[str]:
    """Tables ordered so every referenced (parent) table comes before the tables that reference it;
    ties in name order, so the order is deterministic. ``edges`` are (child, parent)."""
    tables = sorted(tables)
    graph: dict[str, set[str]] = {t: set() for t in tables}
    for child, parent in edges:
        if child in graph and parent in graph and child != parent:
            graph[child].add(parent)
    sorter = graphlib.TopologicalSorter(graph)
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        raise InfrastructureError(
            f"the foreign keys of tables {', '.join(exc.args[1])} form a cycle: the clean state cannot be "
            "restored table by table (ProcArena fixtures must not have FK cycles)"
        ) from None
    out: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        out.extend(ready)
        sorter.done(*ready)
    return out


def shadow_statements(owner: str, tables: Sequence[str], prefix: str = SHADOW_PREFIX) -> list[str]:
    o = ora_quote(owner)
    return [f"CREATE TABLE {o}.{ora_quote(shadow_name(t, prefix))} AS SELECT * FROM {o}.{ora_quote(t)}"
            for t in tables]


def drop_statement(owner: str, table: str, prefix: str = SHADOW_PREFIX) -> str:
    """Drop one shadow if it exists (ORA-00942 ignored), without going to the recycle bin."""
    name = f"{ora_quote(owner)}.{ora_quote(shadow_name(table, prefix))}".replace("'", "''")
    return (f"BEGIN EXECUTE IMMEDIATE 'DROP TABLE {name} PURGE'; "
            "EXCEPTION WHEN OTHERS THEN IF SQLCODE <> -942 THEN RAISE; END IF; END;")


def restore_statements(owner: str, ordered: Sequence[str], prefix: str = SHADOW_PREFIX) -> list[str]:
    """DELETE children first, then INSERT parents first (``ordered`` is parents-first)."""
    o = ora_quote(owner)
    deletes = [f"DELETE FROM {o}.{ora_quote(t)}" for t in reversed(ordered)]
    inserts = [f"INSERT INTO {o}.{ora_quote(t)} SELECT * FROM {o}.{ora_quote(shadow_name(t, prefix))}"
               for t in ordered]
    return [*deletes, *inserts]


class Restorer:
    """Shadows and restores one owner schema through the admin's ``sql``; ``commit`` commits.

    ``prefix`` names the shadows: the clean fixture state (``PA$``, one set per fixture content,
    shared by workers) or B2's scaled state (``PA$$``, made and dropped by one measurement)."""

    def __init__(self, owner: str, sql: Sql, commit: Callable[[], None], prefix: str = SHADOW_PREFIX) -> None:
        self.owner = owner.upper()
        self.sql = sql
        self.commit = commit
        self.prefix = prefix
        self.order: list[str] = []

    def discover(self) -> list[str]:
        tables = [r[0] for r in self.sql(TABLES_SQL, [self.owner])]
        edges = [(c, p) for c, p in self.sql(FK_SQL, [self.owner])]
        self.order = parents_first(tables, edges)
        return self.order

    def make_shadows(self) -> None:
        """Copy the tables as they are now (call right after the fixture loaded, under the lock)."""
        self.discover()
        for stmt, table in zip(shadow_statements(self.owner, self.order, self.prefix), self.order):
            self.sql(drop_statement(self.owner, table, self.prefix), [])
            self.sql(stmt, [])
        self.commit()

    def drop_shadows(self) -> None:
        """Drop this restorer's shadows (B2: the scaled copies, once the measurement is over)."""
        for table in self.order:
            self.sql(drop_statement(self.owner, table, self.prefix), [])

    def restore(self) -> None:
        if not self.order:
            self.discover()
        try:
            for stmt in restore_statements(self.owner, self.order, self.prefix):
                self.sql(stmt, [])
            self.commit()
        except InfrastructureError as exc:
            raise InfrastructureError(f"could not restore schema {self.owner} to its clean state: {exc}") from exc

    # ----------------------------------------------------------------- backend glue
    @classmethod
    def for_backend(cls, backend: Backend, owner: str) -> Restorer:
        """The worker's restorer of ``owner``: shadows made once per fixture content (registry)."""
        per_backend = _RESTORERS.setdefault(backend, {})
        key = owner.upper()
        if key not in per_backend:
            restorer = cls(key, lambda text, params: backend.admin_sql(text, params), backend.admin_commit)
            loaded = "\n".join(sorted(backend.loaded_fixtures))
            lock_key = f"procarena-shadow:{key}:{hashlib.sha256(loaded.encode()).hexdigest()[:16]}"
            with backend.shared_once(lock_key) as step:
                if not step.done:
                    restorer.make_shadows()
                    step.mark_done()
                else:
                    restorer.discover()
            per_backend[key] = restorer
        return per_backend[key]

    @contextlib.contextmanager
    def exclusive(self, backend: Backend) -> Iterator[None]:
        """Hold the schema for one task on a database workers share."""
        with backend.shared_once(f"procarena-run:{self.owner}"):
            yield


_RESTORERS: weakref.WeakKeyDictionary[Backend, dict[str, Restorer]] = weakref.WeakKeyDictionary()

"""ProcArena on PostgreSQL: PL/pgSQL's words and call form, and the judge's access (pristine
copies of the task's database on the embedded server; the worker's own database elsewhere)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ...dialects.base import Backend
from ...dialects.postgres import PostgresBackend
from ...scripts import lexicon_of, tokens
from ...tasks import Task
from .. import state as st
from ..access import Access
from .base import Adapter

log = logging.getLogger(__name__)

#: The candidate's own schema, where an answer's tables would land (kept in every snapshot).
SCRATCH_PG = "answers"


class PostgresAdapter(Adapter):
    name = "postgres"
    label = "PostgreSQL (PL/pgSQL)"
    language = "PL/pgSQL (PostgreSQL)"
    raise_statement = "RAISE EXCEPTION"
    call_words = ("CALL",)
    call_form = "CALL p(...);"
    sqlglot = "postgres"
    quoted_bodies = True

    def tokens(self, code: str) -> list[tuple[object, str]]:
        return tokens(code, lexicon_of(self.name))

    def row_limit(self, n: int) -> str:
        return f"LIMIT {n}"

    def do_nothing(self, signature: str) -> str:
        return f"CREATE OR REPLACE PROCEDURE {signature}\nLANGUAGE plpgsql AS $$\nBEGIN\n  NULL;\nEND;\n$$;"

    def plforge_call_problem(self, calls: Sequence[str]) -> str | None:
        if all(c.strip().upper().startswith("CALL") for c in calls):
            return None
        return "field 'call' holds Oracle blocks; run it with --plsql-dialect=oracle"

    def access(self, backend: Backend, task: Task) -> Access:
        return PostgresAccess(backend, task)


class PostgresAccess(Access):
    """Each contender scope on a fresh copy of the task's pristine database (an embedded server);
    elsewhere (``--plsql-db=dsn|container``) on the worker's database, which a rollback does not
    leave as it found it (warned once, docs/security.md)."""

    pristine: Any = None

    #: The shared server's sequences as the task found them (``nextval`` is not rolled back).
    sequences: tuple[tuple[str, str, Any, bool], ...] = ()

    def pg(self) -> PostgresBackend:
        """The backend with what only PostgreSQL has: pristine copies, the psycopg admin connection."""
        if not isinstance(self.backend, PostgresBackend):
            raise TypeError(f"PostgresAccess needs a PostgresBackend, not {type(self.backend).__name__}")
        return self.backend

    def prepare(self) -> None:
        store = self.backend.pristines if isinstance(self.backend, PostgresBackend) else None
        if store is None or not store.available:
            _warn_shared_server()
            self.grant_writes()
            self.sequences = self._sequences()
            return
        from ...dialects.pg_pristine import key_of

        fixtures, schema = tuple(self.task.fixtures), self.schema

        def build(builder: Any) -> None:
            builder.ensure_fixtures(fixtures)
            builder.allow_writes([schema])

        self.pristine = store.pristine(key_of("procarena", schema, *(f.key for f in fixtures)), build)

    def _sequences(self) -> tuple[tuple[str, str, Any, bool], ...]:
        """Where each sequence of the task's schema stands (read as the superuser)."""
        from psycopg import sql as pgsql

        admin = self.pg().admin
        assert admin is not None
        found = admin.execute("SELECT schemaname, sequencename FROM pg_catalog.pg_sequences WHERE schemaname = %s",
                              (self.schema,)).fetchall()
        out = []
        for schema, name in found:
            row = admin.execute(pgsql.SQL("SELECT last_value, is_called FROM {}.{}").format(
                pgsql.Identifier(schema), pgsql.Identifier(name))).fetchone()
            assert row is not None  # one row, always
            last, called = row
            out.append((schema, name, last, called))
        return tuple(out)

    def restore(self) -> None:
        """The shared server: sequences back where the task found them (a rollback leaves them
        advanced, so the answer would start where gold stopped)."""
        if not self.sequences:
            return
        from psycopg import sql as pgsql

        admin = self.pg().admin
        assert admin is not None
        for schema, name, last, called in self.sequences:
            admin.execute(pgsql.SQL("SELECT pg_catalog.setval({}, %s, %s)").format(
                pgsql.Literal(f"{pgsql.Identifier(schema).as_string(admin)}.{pgsql.Identifier(name).as_string(admin)}")),
                (last, called))

    def fresh_scope(self) -> None:
        if self.pristine is not None:
            backend = self.pg()
            backend.serve(backend.pristines.copy(self.pristine))

    def end_scope(self) -> None:
        if self.pristine is not None:
            self.pg().serve(None)

    def release(self) -> None:
        self.end_scope()

    def begin(self) -> None:
        path = self.task.metadata.get("search_path")
        if path:  # PLForge: unqualified table names resolve in the Spider schema
            from psycopg import sql as pgsql

            session = self.backend.session()
            statement = pgsql.SQL("SET LOCAL search_path = {}").format(
                pgsql.SQL(", ").join(pgsql.Identifier(s) for s in [SCRATCH_PG, *path, "public", "pg_temp"])
            ).as_string(session.connection)
            # Kept by the session across its reset of pinned settings after each install.
            session.pin_setting(statement)

    def snapshot(self) -> st.State:
        conn = self.backend.session().connection
        return st.pg_snapshot(conn, [self.schema, SCRATCH_PG])


_warned_shared: set[str] = set()


def _warn_shared_server() -> None:
    if "pg" not in _warned_shared:
        _warned_shared.add("pg")
        log.warning("ProcArena on a PostgreSQL server the harness does not run itself (--plsql-db=dsn or "
                    "container): gold and the answer share the worker's database, and what a rolled-back "
                    "run leaves (row versions, statistics, transaction ids) is readable by the next one; "
                    "use --plsql-db=embedded for scores that hold against a hostile answer (docs/security.md)")

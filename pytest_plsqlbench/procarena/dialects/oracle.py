"""ProcArena on Oracle: PL/SQL's words and call forms, and the judge's access (the clean state
restored after every run by :mod:`..oracle_restore`, since calls may COMMIT and DDL commits)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from ...dialects.base import Backend
from ...scripts import lexicon_of, tokens
from ...tasks import Task
from .. import state as st
from ..access import Access
from ..oracle_restore import TABLES_SQL, Restorer, ora_quote
from .base import Adapter


class OracleAdapter(Adapter):
    name = "oracle"
    label = "Oracle (PL/SQL)"
    language = "Oracle PL/SQL"
    raise_statement = "RAISE_APPLICATION_ERROR"
    call_words = ("BEGIN", "CALL", "DECLARE")
    call_form = "BEGIN p(...); END;"
    sqlglot = "oracle"
    quoted_bodies = False

    def tokens(self, code: str) -> list[tuple[object, str]]:
        return tokens(code, lexicon_of(self.name))

    def row_limit(self, n: int) -> str:
        return f"FETCH FIRST {n} ROWS ONLY"

    def do_nothing(self, signature: str) -> str:
        return f"CREATE OR REPLACE PROCEDURE {signature} IS\nBEGIN\n  NULL;\nEND;\n/"

    def plforge_call_problem(self, calls: Sequence[str]) -> str | None:
        """Oracle blocks, or PostgreSQL-style CALL statements (Oracle runs those too)."""
        if all(c.strip().upper().startswith(("BEGIN", "DECLARE")) for c in calls):
            return None
        if all(c.strip().upper().startswith("CALL") for c in calls):
            return None
        return "field 'call': expected 'BEGIN sp(...); END;' blocks"

    def access(self, backend: Backend, task: Task) -> Access:
        return OracleAccess(backend, task)


class OracleAccess(Access):
    #: The task's hold on its schema (:meth:`hold`), until :meth:`release`.
    _held: contextlib.ExitStack[bool | None] | None = None

    def prepare(self) -> None:
        self.grant_writes()
        self.restorer = Restorer.for_backend(self.backend, self.schema)
        self._synonyms(create=True)

    def _synonyms(self, create: bool) -> None:
        """PLForge: the Spider owner's tables under their bare names in the candidate schema
        (made outside the task scopes, so both gold's and the answer's scope see them)."""
        path = self.task.metadata.get("search_path")
        if not path:
            return
        session = self.backend.session()
        owner = str(path[0]).upper()
        for (table,) in self.backend.admin_sql(TABLES_SQL, [owner]):
            if create:
                session.harness_sql(f"CREATE OR REPLACE SYNONYM {ora_quote(table)} FOR {ora_quote(owner)}.{ora_quote(table)}")
            else:
                session.harness_sql(f"BEGIN EXECUTE IMMEDIATE 'DROP SYNONYM {ora_quote(table)}'; EXCEPTION WHEN OTHERS THEN NULL; END;")

    def snapshot(self) -> st.State:
        session = self.backend.session()
        return st.ora_snapshot(session.connection, [self.schema, self.backend.candidate_schema])

    def hold(self) -> None:
        if self._held is None:
            self._held = contextlib.ExitStack()
            self._held.enter_context(self.restorer.exclusive(self.backend))

    def release(self) -> None:
        held, self._held = self._held, None
        try:
            self._synonyms(create=False)
        finally:
            if held is not None:
                held.close()

    def restore(self) -> None:
        self.restorer.restore()

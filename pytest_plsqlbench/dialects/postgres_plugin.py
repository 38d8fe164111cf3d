"""The PostgreSQL dialect's plug-in (entry point ``plsqlbench-postgres``): what the core asks of
PostgreSQL by name -- its databases, the DSN's syntax, the start-up check, the backend, the
model's system prompt. The backend itself is :mod:`.postgres`, imported when a worker needs it."""

from __future__ import annotations

import pytest

from ..errors import UsageError
from ..lexicon import Lexicon, SafetyRules
from ..settings import DatabaseSettings, Settings
from .base import Backend
from .postgres_text import POSTGRES_LEXICON, POSTGRES_SAFETY
from .preflight import PROBE_TIMEOUT_S, check_docker

SYSTEM_PROMPT = """\
You are an expert PostgreSQL developer writing PL/pgSQL for PostgreSQL.

Respond with executable PostgreSQL SQL and PL/pgSQL only:
- Output nothing but code that runs as-is in psql: no markdown, no code fences, \
no explanations, no text before or after the code.
- Write functions and procedures as CREATE OR REPLACE FUNCTION/PROCEDURE ... AS $$ ... $$ \
LANGUAGE plpgsql; and anonymous blocks as DO $$ ... $$; end every statement with a semicolon \
and never use a slash (/) terminator.
- Use exactly the names, parameters, types and return types the request specifies.
- Use only the tables and columns of the given schema, named as the schema names them.
- When the request asks for printed output, emit each output line with RAISE NOTICE '%', value; \
(the PL/pgSQL counterpart of DBMS_OUTPUT.PUT_LINE).
- Do not change stored data unless the request asks for it.
- Comments inside the code are fine; prose outside the code is not."""


class PostgresDialect:
    """PostgreSQL: an embedded server per worker by default, a container, or a server by DSN."""

    name: str = "postgres"
    label: str = "PostgreSQL (PL/pgSQL)"
    kinds: tuple[str, ...] = ("embedded", "container", "dsn")
    runs_without_setup: bool = True  # the embedded server needs only pip install: the default dialect
    system_prompt: str = SYSTEM_PROMPT
    lexicon: Lexicon = POSTGRES_LEXICON
    safety: SafetyRules = POSTGRES_SAFETY

    def resolve_database(self, kind: str | None, dsn: str | None) -> tuple[str, str | None]:
        if dsn:
            import psycopg  # noqa: PLC0415 - only when a DSN is given

            try:
                psycopg.conninfo.conninfo_to_dict(dsn)
            except psycopg.ProgrammingError as exc:
                raise UsageError(f"--plsql-dsn: not a PostgreSQL connection string ({str(exc).strip()})") from None
        return kind or ("dsn" if dsn else self.kinds[0]), dsn

    def preflight(self, database: DatabaseSettings) -> None:
        if database.kind == "container":
            check_docker(database, "container")
        elif database.kind == "dsn" and database.dsn:
            import psycopg  # noqa: PLC0415

            try:
                psycopg.connect(database.dsn, connect_timeout=PROBE_TIMEOUT_S, autocommit=True).close()
            except psycopg.Error as exc:
                detail = " ".join(str(exc).split())
                raise UsageError(f"--plsql-dsn: cannot connect to PostgreSQL ({detail})") from None

    def make_backend(self, settings: Settings, worker: str) -> Backend:
        from .postgres import PostgresBackend  # noqa: PLC0415 - psycopg's server code, for workers only

        return PostgresBackend(settings, worker)


@pytest.hookimpl(trylast=True)
def pytest_plsql_dialects() -> list[PostgresDialect]:
    return [PostgresDialect()]

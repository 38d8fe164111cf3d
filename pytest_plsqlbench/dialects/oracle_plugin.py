"""The Oracle dialect's plug-in (entry point ``plsqlbench-oracle``): what the core asks of Oracle
by name -- its databases, the DSN from the environment, the start-up check, the backend, the
model's system prompt. The backend itself is :mod:`.oracle` (python-oracledb, an optional
dependency), imported when a worker needs it."""

from __future__ import annotations

import pytest

from ..errors import UsageError
from ..lexicon import Lexicon, SafetyRules
from ..settings import DatabaseSettings, Settings, oracle_environment
from .base import Backend
from .oracle_text import ORACLE_LEXICON, ORACLE_SAFETY
from .preflight import PROBE_TIMEOUT_S, check_docker

SYSTEM_PROMPT = """\
You are an expert Oracle Database developer writing PL/SQL for Oracle Database 23ai.

Respond with executable Oracle SQL and PL/SQL only:
- Output nothing but code that runs as-is in SQL*Plus or SQLcl: no markdown, no code fences, \
no explanations, no text before or after the code.
- End every PL/SQL program unit (CREATE OR REPLACE FUNCTION, PROCEDURE, PACKAGE, PACKAGE BODY, \
TYPE BODY, TRIGGER) and every anonymous block with a line containing only a slash (/).
- Use exactly the names, parameters, types and return types the request specifies.
- Use only the tables and columns of the given schema, named as the schema names them.
- When the request asks for printed output, print it with DBMS_OUTPUT.PUT_LINE.
- Do not change stored data unless the request asks for it.
- Comments inside the code are fine; prose outside the code is not."""


class OracleDialect:
    """Oracle: a testcontainers container per worker by default, or a database by DSN (no embedded
    server exists)."""

    name: str = "oracle"
    label: str = "Oracle (PL/SQL)"
    kinds: tuple[str, ...] = ("container", "dsn")
    runs_without_setup: bool = False  # it needs Docker (a container) or a DSN
    system_prompt: str = SYSTEM_PROMPT
    lexicon: Lexicon = ORACLE_LEXICON
    safety: SafetyRules = ORACLE_SAFETY

    def resolve_database(self, kind: str | None, dsn: str | None) -> tuple[str, str | None]:
        dsn = dsn or oracle_environment().dsn
        kind = kind or ("dsn" if dsn else self.kinds[0])
        if kind == "embedded":
            raise UsageError(
                "--plsql-db=embedded exists only for postgres; for oracle use "
                "--plsql-db=container (needs Docker) or --plsql-dsn"
            )
        return kind, dsn

    def preflight(self, database: DatabaseSettings) -> None:
        try:
            import oracledb
        except ImportError:
            raise UsageError(
                "--plsql-dialect=oracle needs python-oracledb: pip install 'pytest-plsqlbench[oracle]'"
            ) from None
        if database.kind == "container":
            check_docker(database, "oracle", " (or PLSQL_ORACLE_DSN)")
        elif database.kind == "dsn" and database.dsn:
            from .oracle import parse_dsn  # noqa: PLC0415 - the Oracle package, for an Oracle run only

            dsn = parse_dsn(database.dsn)
            try:
                oracledb.connect(user=dsn.user, password=dsn.password, dsn=dsn.dsn,
                                 tcp_connect_timeout=PROBE_TIMEOUT_S, **dict(dsn.params)).close()
            except oracledb.Error as exc:
                detail = " ".join(str(exc).split())
                raise UsageError(f"--plsql-dsn: cannot connect to Oracle as {dsn.redacted()} ({detail})") from None

    def make_backend(self, settings: Settings, worker: str) -> Backend:
        from .oracle import OracleBackend  # noqa: PLC0415 - optional dependency

        return OracleBackend(settings, worker)


@pytest.hookimpl(trylast=True)
def pytest_plsql_dialects() -> list[OracleDialect]:
    return [OracleDialect()]

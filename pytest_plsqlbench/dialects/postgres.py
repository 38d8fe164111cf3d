"""PostgreSQL / PL/pgSQL backend (psycopg 3).

Per worker: one database the harness owns (in its own embedded server, a container, or a
server given by DSN), an unprivileged candidate role with its own scratch schema
``answers``, and the benchmark fixtures, owned by the harness and read-only to candidates.

Isolation: a task is one transaction (``BEGIN`` ... ``ROLLBACK``); installing an answer and
every unit test run under savepoints; ``DISCARD ALL`` afterwards drops session state that
transactions do not undo (prepared statements, advisory locks, settings, LISTEN). Top-level
transaction control in answers (``COMMIT``, ``END`` ...) is neutralised, and a transaction
that nevertheless ends early is detected and the scratch schema rebuilt.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from typing import Any, Sequence

import psycopg
from psycopg import errors as pgerr
from psycopg import sql as pgsql

from .. import outcomes
from ..errors import InfrastructureError, UsageError
from ..outputs import format_row
from ..scripts import Statement, first_keyword, split
from ..settings import Settings
from ..tasks import Fixture
from .base import Backend, DbError, Execution, Phase, Session

log = logging.getLogger(__name__)

SCRATCH = "answers"
#: Top-level statements that would end or reshape the task's transaction.
TXN_STARTS = ("BEGIN", "START TRANSACTION", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE", "PREPARE TRANSACTION")
VOID_OID = 2278
MAX_ROWS = 100_000

# SQLSTATEs by what they say about an answer (PLSQLBench App. E.2 categories).
_INTERFACE = {"42883", "42P01", "42703", "3F000", "42809", "42725", "42P02", "42704"}
_ARTIFACT = {"42601", "42P13", "42P16", "42804", "0A000", "42P18", "42611", "42P10", "2F005", "42P08"}
_TIMEOUT = {"57014", "55P03", "25P03"}
_INFRA_PREFIX = ("08", "57P", "58", "XX", "53")


def classify(sqlstate: str | None, phase: Phase) -> str:
    """Failure class of a PostgreSQL error raised while installing or testing an answer."""
    if not sqlstate:
        return outcomes.INVALID_ARTIFACT if phase == "install" else outcomes.WRONG_OUTPUT
    if sqlstate in _TIMEOUT:
        return outcomes.TIMEOUT
    if sqlstate == "42501":  # insufficient_privilege: contained by the role's grants
        return outcomes.UNSAFE
    if sqlstate in _INTERFACE:
        return outcomes.INTERFACE
    if sqlstate.startswith("53") and sqlstate != "53000":
        return outcomes.WRONG_OUTPUT  # out of memory / too many ... caused by the answer
    if sqlstate.startswith(_INFRA_PREFIX):
        return outcomes.INFRASTRUCTURE
    if phase == "install":
        return outcomes.INVALID_ARTIFACT
    if sqlstate in _ARTIFACT or sqlstate.startswith("42"):
        return outcomes.INVALID_ARTIFACT
    return outcomes.WRONG_OUTPUT


def _dsn_with(dsn: str, **params: str) -> str:
    return psycopg.conninfo.make_conninfo(dsn, **params)


class _Watchdog:
    """Client-side second layer of the statement timeout.

    The candidate can change its own ``statement_timeout``; this thread cancels the running
    statement regardless, and terminates the backend if cancelling does not help.
    """

    def __init__(self, session: "PostgresSession", timeout: float) -> None:
        self.session = session
        self.timeout = timeout
        self.fired = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="plsql-watchdog")

    def __enter__(self) -> "_Watchdog":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        if self._done.wait(self.timeout + 1.0):
            return
        self.fired = True
        conn = self.session.conn
        if conn is not None:
            try:
                conn.cancel_safe(timeout=2.0)
            except Exception:  # noqa: BLE001 - best effort
                pass
        if self._done.wait(3.0):
            return
        self.session.backend.terminate(self.session.backend_pid)


class PostgresSession(Session):
    def __init__(self, backend: "PostgresBackend") -> None:
        self.backend = backend
        self.conn: psycopg.Connection | None = None
        self.backend_pid: int | None = None
        self._lines: list[str] = []
        self._chars = 0
        self._truncated = False
        self._capture = False
        self._in_task = False
        self._broken_isolation = False
        self.connect()

    # ----------------------------------------------------------------- connection
    def connect(self) -> None:
        self.close()
        try:
            conn = psycopg.connect(self.backend.candidate_dsn, autocommit=True, prepare_threshold=None)
        except psycopg.Error as exc:
            raise InfrastructureError(f"cannot connect as the candidate role: {exc}") from exc
        conn.add_notice_handler(self._on_notice)
        self.conn = conn
        self.backend_pid = conn.info.backend_pid
        self._in_task = False

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # noqa: BLE001
                pass
            self.conn = None

    def _on_notice(self, diag: psycopg.errors.Diagnostic) -> None:
        # Only what the answer printed (RAISE ...), not server chatter such as
        # "function f() does not exist, skipping".
        if not self._capture or "at RAISE" not in (diag.context or ""):
            return
        self._append(diag.message_primary or "")

    def _append(self, line: str) -> None:
        if self._truncated:
            return
        limit = self.backend.settings.max_output
        if self._chars + len(line) > limit:
            self._lines.append(line[: max(0, limit - self._chars)])
            self._lines.append(f"<output truncated at {limit} characters>")
            self._truncated = True
            return
        self._chars += len(line) + 1
        self._lines.append(line)

    def _exec(self, query: str | pgsql.Composable) -> None:
        assert self.conn is not None
        try:
            self.conn.execute(query)
        except psycopg.OperationalError as exc:
            raise InfrastructureError(f"database connection lost: {exc}") from exc

    # ----------------------------------------------------------------- task scope
    def begin_task(self) -> None:
        if self.conn is None or self.conn.closed:
            self.connect()
        self._broken_isolation = False
        self._exec("BEGIN")
        self._in_task = True

    def end_task(self) -> None:
        if self.conn is None or self.conn.closed:
            self.connect()
            return
        try:
            self._exec("ROLLBACK")
            self._exec("DISCARD ALL")
        except InfrastructureError:
            self.connect()
        self._in_task = False
        if self._broken_isolation:
            log.warning("an answer ended the task transaction early; rebuilding the scratch schema")
            self.backend.reset_scratch()
            self._broken_isolation = False

    # ----------------------------------------------------------------- scripts
    def run(self, script: str, *, isolated: bool, phase: Phase) -> Execution:
        if self.conn is None or self.conn.closed:
            raise InfrastructureError("the candidate connection is closed")
        statements = split(script, "postgres")
        result = Execution()
        savepoint = "plsql_test" if isolated else "plsql_install"
        self._lines, self._chars, self._truncated = result.lines, 0, False
        t0 = time.monotonic()
        self._exec(f"SAVEPOINT {savepoint}")
        try:
            for stmt in statements:
                if not self._runnable(stmt, result):
                    continue
                error = self._run_statement(stmt, phase)
                if error is not None:
                    result.error = error
                    break
        finally:
            self._capture = False
            result.truncated = self._truncated
            result.duration_s = time.monotonic() - t0
            self._after_script(savepoint, keep=not isolated and result.error is None)
        return result

    def _runnable(self, stmt: Statement, result: Execution) -> bool:
        if stmt.kind == "client":
            result.notes.append(f"skipped client command at line {stmt.line}: {stmt.text[:40]}")
            return False
        words = " ".join(first_keyword(stmt.text, 2).split())
        if any(words == w or words.startswith(w + " ") for w in TXN_STARTS):
            # Transaction control would end the task's isolation scope.
            result.notes.append(f"ignored transaction control at line {stmt.line}: {words}")
            return False
        return True

    def _run_statement(self, stmt: Statement, phase: Phase) -> DbError | None:
        assert self.conn is not None
        timeout = self.backend.settings.timeout
        watchdog = _Watchdog(self, timeout)
        self._capture = True
        try:
            with watchdog, self.conn.cursor() as cur:
                cur.execute(stmt.text)
                self._collect_rows(cur)
        except psycopg.Error as exc:
            if watchdog.fired:
                if self.conn.closed or self.conn.broken:
                    self.connect()
                    self._exec("BEGIN")  # keep the caller's scope shape; the task state is lost
                    self._broken_isolation = True
                return DbError(f"statement ran longer than {timeout:g}s and was cancelled",
                               getattr(exc, "sqlstate", None), outcomes.TIMEOUT, stmt.line)
            if self.conn.closed or self.conn.broken or isinstance(exc, psycopg.OperationalError) and not getattr(exc, "sqlstate", None):
                raise InfrastructureError(f"database connection lost: {exc}") from exc
            sqlstate = getattr(exc, "sqlstate", None)
            failure = classify(sqlstate, phase)
            if failure == outcomes.INFRASTRUCTURE:
                raise InfrastructureError(f"database error {sqlstate}: {exc}") from exc
            return DbError(str(exc).strip(), sqlstate, failure, stmt.line)
        finally:
            self._capture = False
        if self._in_task and self.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            # Something ended our transaction despite the filter; restore the scope shape.
            self._broken_isolation = True
            self._exec("BEGIN")
        return None

    def _collect_rows(self, cur: psycopg.Cursor[Any]) -> None:
        while True:
            if cur.description:
                void = all(col.type_code == VOID_OID for col in cur.description)
                for n, row in enumerate(cur):
                    if n >= MAX_ROWS or self._truncated:
                        break
                    if not void:
                        self._append(format_row(row))
            if not cur.nextset():
                break

    def _after_script(self, savepoint: str, keep: bool) -> None:
        if self.conn is None or self.conn.closed:
            return
        status = self.conn.info.transaction_status
        if status == psycopg.pq.TransactionStatus.IDLE:
            self._exec("BEGIN")
            self._broken_isolation = True
            return
        if keep:
            self._exec(f"RELEASE SAVEPOINT {savepoint}")
        else:
            self._exec(f"ROLLBACK TO SAVEPOINT {savepoint}")
            self._exec(f"RELEASE SAVEPOINT {savepoint}")


class PostgresBackend(Backend):
    dialect = "postgres"

    def __init__(self, settings: Settings, worker: str = "main") -> None:
        self.settings = settings
        self.worker = worker
        self.server = None
        self.container = None
        self.admin: psycopg.Connection | None = None
        self.admin_dsn = ""
        self.db_dsn = ""
        self.candidate_dsn = ""
        self.dbname = "plsqlbench"
        self.role = "plsql_candidate"
        self._password: str | None = None
        self._owns_database = False
        self._version = ""
        self._session: PostgresSession | None = None
        self._loaded: list[Fixture] = []
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- lifecycle
    @property
    def version(self) -> str:
        return self._version

    @property
    def description(self) -> str:
        return {"embedded": "embedded server", "container": "testcontainers"}.get(self.settings.db, "dsn")

    def start(self) -> None:
        kind = self.settings.db
        if kind == "embedded":
            from .pg_server import EmbeddedServer

            self.server = EmbeddedServer(self.worker)
            self.admin_dsn = self.server.start()
        elif kind == "container":
            self.admin_dsn = self._start_container()
        elif kind == "dsn":
            assert self.settings.dsn
            self.admin_dsn = self.settings.dsn
            suffix = f"{self.worker}_{secrets.token_hex(3)}".lower()
            self.dbname = f"plsqlbench_{suffix}"
            self.role = f"plsqlbench_cand_{suffix}"
            self._password = secrets.token_urlsafe(18)
        else:  # pragma: no cover - settings validate this
            raise UsageError(f"unknown --plsql-db {kind!r}")
        try:
            self._provision()
        except BaseException:
            self.stop()
            raise

    def _start_container(self) -> str:
        try:
            from testcontainers.postgres import PostgresContainer
        except ImportError:
            raise UsageError(
                "--plsql-db=container needs testcontainers: pip install 'pytest-plsqlbench[container]'"
            ) from None
        try:
            self.container = PostgresContainer("postgres:18", driver=None)
            self.container.start()
        except Exception as exc:  # noqa: BLE001 - docker missing, image pull failed ...
            self.container = None
            raise InfrastructureError(f"could not start a PostgreSQL container (is Docker running?): {exc}") from exc
        self._owns_database = False
        return self.container.get_connection_url()

    def _admin_connect(self, dsn: str) -> psycopg.Connection:
        deadline = time.monotonic() + 15
        while True:
            try:
                return psycopg.connect(dsn, autocommit=True)
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline:
                    raise InfrastructureError(f"cannot connect to PostgreSQL: {exc}") from exc
                time.sleep(0.2)

    def _provision(self) -> None:
        server_admin = self._admin_connect(self.admin_dsn)
        try:
            self._version = "PostgreSQL " + str(server_admin.execute("SHOW server_version").fetchone()[0]).split()[0]
            ident = pgsql.Identifier
            server_admin.execute(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident(self.dbname)))
            server_admin.execute(pgsql.SQL("CREATE DATABASE {}").format(ident(self.dbname)))
            self._owns_database = True
            if server_admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (self.role,)).fetchone():
                server_admin.execute(pgsql.SQL("DROP ROLE {}").format(ident(self.role)))
            server_admin.execute(
                pgsql.SQL(
                    "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION "
                    "NOBYPASSRLS NOINHERIT CONNECTION LIMIT 4 PASSWORD {}"
                ).format(ident(self.role), pgsql.Literal(self._password))
            )
        except psycopg.errors.InsufficientPrivilege as exc:
            raise UsageError(
                f"the DSN's user cannot create the per-worker database and role ({exc.diag.message_primary}); "
                "it needs CREATEDB and CREATEROLE"
            ) from None
        finally:
            server_admin.close()
        self.db_dsn = _dsn_with(self.admin_dsn, dbname=self.dbname)
        self.admin = self._admin_connect(self.db_dsn)
        role, db = pgsql.Identifier(self.role), pgsql.Identifier(self.dbname)
        t = self.settings.timeout
        for stmt in (
            pgsql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(db),
            pgsql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(db, role),
            pgsql.SQL("REVOKE CREATE ON SCHEMA public FROM PUBLIC"),
            pgsql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(role),
            pgsql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(pgsql.Identifier(SCRATCH), role),
            pgsql.SQL("ALTER ROLE {} IN DATABASE {} SET search_path = {}, public").format(
                role, db, pgsql.Identifier(SCRATCH)
            ),
            pgsql.SQL("ALTER ROLE {} SET statement_timeout = {}").format(role, pgsql.Literal(f"{int(t * 1000)}ms")),
            pgsql.SQL("ALTER ROLE {} SET lock_timeout = {}").format(role, pgsql.Literal(f"{int(t * 1000)}ms")),
            pgsql.SQL("ALTER ROLE {} SET idle_in_transaction_session_timeout = '30min'").format(role),
            pgsql.SQL("ALTER ROLE {} SET client_min_messages = 'notice'").format(role),
        ):
            self.admin.execute(stmt)
        if self.settings.db == "embedded":
            for setting in ("fsync = off", "synchronous_commit = off", "full_page_writes = off"):
                self.admin.execute(f"ALTER SYSTEM SET {setting}")
            self.admin.execute("SELECT pg_reload_conf()")
        params: dict[str, str] = {"user": self.role}
        if self._password:
            params["password"] = self._password
        self.candidate_dsn = _dsn_with(self.db_dsn, **params)

    def stop(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
        if self.admin is not None:
            try:
                self.admin.close()
            except Exception:  # noqa: BLE001
                pass
            self.admin = None
        if self.server is not None:
            self.server.stop()
            self.server = None
        elif self.container is not None:
            try:
                self.container.stop()
            except Exception as exc:  # noqa: BLE001
                log.warning("could not stop the PostgreSQL container: %s", exc)
            self.container = None
        elif self._owns_database and self.admin_dsn:
            self._drop_dsn_objects()

    def _drop_dsn_objects(self) -> None:
        """Janitor for --plsql-dsn: drop the per-worker database and role."""
        try:
            with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
                conn.execute(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(pgsql.Identifier(self.dbname)))
                conn.execute(pgsql.SQL("DROP ROLE IF EXISTS {}").format(pgsql.Identifier(self.role)))
        except psycopg.Error as exc:
            log.warning("could not drop %s / role %s: %s", self.dbname, self.role, exc)
        self._owns_database = False

    # ----------------------------------------------------------------- fixtures
    def ensure_fixtures(self, fixtures: Sequence[Fixture]) -> None:
        with self._lock:
            loaded = {f.key for f in self._loaded}
            for fixture in fixtures:
                if fixture.key in loaded:
                    continue
                self._load(fixture)
                self._loaded.append(fixture)
                loaded.add(fixture.key)

    def _load(self, fixture: Fixture) -> None:
        assert self.admin is not None
        role = pgsql.Identifier(self.role)
        try:
            with self.admin.transaction():
                self.admin.execute("SET LOCAL search_path = public")
                for stmt in split(fixture.script, "postgres"):
                    if stmt.kind != "client":
                        self.admin.execute(stmt.text)
                schemas = [
                    r[0]
                    for r in self.admin.execute(
                        "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%%' "
                        "AND nspname NOT IN ('information_schema', %s)",
                        (SCRATCH,),
                    )
                ]
                for schema in schemas:
                    ident = pgsql.Identifier(schema)
                    self.admin.execute(pgsql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident, role))
                    self.admin.execute(pgsql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(ident, role))
                    self.admin.execute(pgsql.SQL("GRANT SELECT ON ALL SEQUENCES IN SCHEMA {} TO {}").format(ident, role))
        except psycopg.OperationalError as exc:
            raise InfrastructureError(f"lost the database while loading fixture {fixture.key!r}: {exc}") from exc
        except psycopg.Error as exc:
            raise InfrastructureError(
                f"fixture {fixture.key!r} failed to load: {str(exc).strip().splitlines()[0]}"
            ) from exc

    def reset_scratch(self) -> None:
        """Drop everything in the candidate's scratch schema (janitor of last resort)."""
        assert self.admin is not None
        ident = pgsql.Identifier(SCRATCH)
        self.admin.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident))
        self.admin.execute(pgsql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(ident, pgsql.Identifier(self.role)))

    def scratch_objects(self) -> list[str]:
        """Names of objects left in the scratch schema (tests assert this stays empty)."""
        assert self.admin is not None
        rows = self.admin.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
            "UNION ALL SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %s "
            "UNION ALL SELECT t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
            "WHERE n.nspname = %s AND t.typtype <> 'b' AND t.typrelid = 0",
            (SCRATCH, SCRATCH, SCRATCH),
        ).fetchall()
        return sorted(r[0] for r in rows)

    # ----------------------------------------------------------------- sessions
    def session(self) -> PostgresSession:
        if self._session is None:
            self._session = PostgresSession(self)
        return self._session

    def terminate(self, pid: int | None) -> None:
        if pid is None:
            return
        try:
            with psycopg.connect(self.db_dsn, autocommit=True) as conn:
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        except psycopg.Error as exc:
            log.warning("could not terminate backend %s: %s", pid, exc)

    def alive(self) -> bool:
        try:
            assert self.admin is not None
            self.admin.execute("SELECT 1")
            return True
        except Exception:  # noqa: BLE001
            return False

    def recover(self) -> None:
        if self.server is not None and not self.server.alive():
            log.warning("the embedded PostgreSQL server died; restarting it")
            self.server.restart()
        if not self.alive():
            if self.admin is not None:
                try:
                    self.admin.close()
                except Exception:  # noqa: BLE001
                    pass
            self.admin = self._admin_connect(self.db_dsn)
        if self._session is not None:
            self._session.connect()

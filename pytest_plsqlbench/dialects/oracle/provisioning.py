"""The Oracle backend: where the database comes from, the candidate user, recovery.

``--plsql-db=container`` starts testcontainers' Oracle Database Free per worker; ``--plsql-dsn``
uses an existing database with one candidate user per worker (created here, dropped at the end).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...errors import InfrastructureError, UsageError
from ...scripts import Statement
from ...settings import Settings, oracle_environment
from ..base import Backend
from .dsn import OracleDsn, candidate_name, new_password, parse_dsn, quote_ident
from .errors import _codes_of, _driver
from .fixtures import REGISTRY, FixtureLoading
from .janitor import Snapshot, janitor_statements
from .locks import DatabaseLocks
from .session import OracleSession, _output_handler

log = logging.getLogger(__name__)

DEFAULT_IMAGE = "gvenzl/oracle-free:23-slim-faststart"
CANDIDATE_PRIVILEGES = (
    "CREATE SESSION",
    "CREATE PROCEDURE",
    "CREATE TYPE",
    "CREATE TABLE",
    "CREATE VIEW",
    "CREATE SEQUENCE",
    "CREATE TRIGGER",
    "CREATE SYNONYM",
)

# --------------------------------------------------------------------------- backend
class OracleBackend(FixtureLoading, DatabaseLocks, Backend):
    """An Oracle database for one worker: a container of its own, or a schema in a DSN's."""

    dialect = "oracle"

    def __init__(self, settings: Settings, worker: str = "main") -> None:
        super().__init__()
        self.settings = settings
        self.worker = worker
        self.container: Any = None
        self.admin: Any = None
        self.admin_dsn: OracleDsn | None = None
        self.connect_string = ""
        self.connect_params: dict[str, str] = {}
        self.candidate = candidate_name(worker)
        self.candidate_password = new_password()
        self.tablespace = "USERS"
        self._version = ""
        self._session: OracleSession | None = None
        self._candidate_statements: list[Statement] = []
        self._baseline: Snapshot | None = None
        self._candidate_created = False
        self._lock_conn: Any = None

    # ----------------------------------------------------------------- lifecycle
    @property
    def version(self) -> str:
        return self._version

    def start(self) -> None:
        _driver()
        if self.settings.database.kind == "container":
            self.admin_dsn = self._start_container()
        elif self.settings.database.kind == "dsn":
            dsn = self.settings.database.dsn or oracle_environment().dsn
            if not dsn:
                raise UsageError("--plsql-db=dsn needs --plsql-dsn (or PLSQL_ORACLE_DSN)")
            self.admin_dsn = parse_dsn(dsn)
        else:
            raise UsageError(
                f"--plsql-db={self.settings.database.kind} is not available for oracle; use container or dsn"
            )
        self.connect_string = self.admin_dsn.dsn
        self.connect_params = dict(self.admin_dsn.params)
        tns = oracle_environment().tns_admin
        if tns and "config_dir" not in self.connect_params:
            self.connect_params["config_dir"] = tns
        try:
            self.admin = self._admin_connect()
            self._provision()
        except BaseException:
            self.stop()
            raise

    def _start_container(self) -> OracleDsn:
        try:
            from testcontainers.community.oracle import OracleDbContainer
        except ImportError:
            try:
                from testcontainers.oracle import OracleDbContainer  # type: ignore[no-redef, unused-ignore]
            except ImportError:
                raise UsageError(
                    "--plsql-db=container needs testcontainers: pip install 'pytest-plsqlbench[oracle]'"
                ) from None
        try:
            import docker

            docker.from_env().ping()
        except Exception as exc:  # noqa: BLE001 - no socket, no daemon, no permission
            raise InfrastructureError(
                f"--plsql-db=container needs a running Docker ({exc}); or point --plsql-dsn "
                "(or PLSQL_ORACLE_DSN) at an Oracle database"
            ) from None
        image = oracle_environment().image or DEFAULT_IMAGE
        password = new_password()
        try:
            container = OracleDbContainer(image=image, oracle_password=password)
            container.start()
        except Exception as exc:  # noqa: BLE001 - pull failures, start timeouts
            raise InfrastructureError(f"could not start an Oracle container ({image}): {exc}") from exc
        self.container = container
        host = container.get_container_host_ip()
        port = container.get_exposed_port(1521)
        return OracleDsn("system", password, f"{host}:{port}/FREEPDB1")

    def _admin_connect(self) -> Any:
        oracledb = _driver()
        assert self.admin_dsn is not None
        deadline = time.monotonic() + (120 if self.container is not None else 30)
        delay = 0.5
        while True:
            try:
                conn = oracledb.connect(
                    user=self.admin_dsn.user,
                    password=self.admin_dsn.password,
                    dsn=self.connect_string,
                    **self.connect_params,
                )
                conn.outputtypehandler = _output_handler
                return conn
            except oracledb.Error as exc:
                codes, message = _codes_of(exc)
                if "ORA-01017" in codes or "ORA-28000" in codes:
                    raise UsageError(
                        f"Oracle rejected the admin login {self.admin_dsn.redacted()}: {message}"
                    ) from None
                if time.monotonic() > deadline:
                    raise InfrastructureError(
                        f"cannot connect to Oracle at {self.admin_dsn.redacted()}: {message}"
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 5)

    def _admin_sql(
        self, text: str, params: Sequence[Any] | Mapping[str, Any] = (), ignore: Iterable[str] = ()
    ) -> list[tuple[Any, ...]]:
        oracledb = _driver()
        try:
            with self.admin.cursor() as cur:
                cur.execute(text, params)
                return cur.fetchall() if cur.description else []
        except oracledb.Error as exc:
            codes, message = _codes_of(exc)
            if set(codes) & set(ignore):
                return []
            if "ORA-01031" in codes:
                raise UsageError(
                    f"the admin account lacks a privilege the harness needs ({message}); see docs/oracle.md"
                ) from None
            raise InfrastructureError(f"{message} (while running: {text[:80]})") from exc

    # ----------------------------------------------------------------- harness members
    @property
    def candidate_schema(self) -> str:
        return self.candidate

    @property
    def candidate_role(self) -> str:
        return self.candidate

    def admin_sql(
        self, text: str, params: Sequence[Any] | Mapping[str, Any] = (), *, ignore: Iterable[str] = ()
    ) -> list[tuple[Any, ...]]:
        return self._admin_sql(text, params, ignore)

    def admin_commit(self) -> None:
        self.admin.commit()

    def _provision(self) -> None:
        self._version = f"Oracle Database {self.admin.version}"
        rows = self._admin_sql(
            "SELECT property_value FROM database_properties "
            "WHERE property_name = 'DEFAULT_PERMANENT_TABLESPACE'"
        )
        self.tablespace = rows[0][0] if rows else "USERS"
        self._admin_sql(
            f"CREATE TABLE {REGISTRY} (fixture_key VARCHAR2(256) PRIMARY KEY, status VARCHAR2(16), "
            "owners VARCHAR2(4000), loaded_at TIMESTAMP)",
            ignore=("ORA-00955",),
        )
        ts = quote_ident(self.tablespace)
        user = quote_ident(self.candidate)
        self._admin_sql(
            f'CREATE USER {user} IDENTIFIED BY "{self.candidate_password}" DEFAULT TABLESPACE {ts} '
            f"QUOTA 256M ON {ts}"
        )
        self._candidate_created = True
        self._admin_sql(f"GRANT {', '.join(CANDIDATE_PRIVILEGES)} TO {user}")

    def stop(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
        if self.container is None and self._candidate_created and self.admin is not None:
            self._drop_user(self.candidate)
            self._candidate_created = False
        if self.admin is not None:
            with contextlib.suppress(Exception):
                self.admin.close()
            self.admin = None
        if self.container is not None:
            try:
                self.container.stop()
            except Exception as exc:  # noqa: BLE001
                log.warning("could not stop the Oracle container: %s", exc)
            self.container = None

    def _drop_user(self, name: str) -> None:
        """Drop a user the harness created, ending its sessions first."""
        try:
            for sid, serial in self._admin_sql(
                "SELECT sid, serial# FROM v$session WHERE username = :u", [name], ignore=("ORA-00942",)
            ):
                self.kill_session(sid, serial)
            self._admin_sql(f"DROP USER {quote_ident(name)} CASCADE", ignore=("ORA-01918",))
        except Exception as exc:  # noqa: BLE001 - cleanup must not mask the run's result
            log.warning("could not drop Oracle user %s: %s", name, exc)

    def serial_of(self, sid: int) -> int:
        rows = self._admin_sql("SELECT serial# FROM v$session WHERE sid = :s", [sid], ignore=("ORA-00942",))
        return int(rows[0][0]) if rows else 0

    def kill_session(self, sid: int, serial: int) -> None:
        if not serial or self.admin is None:
            return
        try:
            self._admin_sql(
                f"ALTER SYSTEM KILL SESSION '{int(sid)},{int(serial)}' IMMEDIATE",
                ignore=("ORA-00030", "ORA-00027", "ORA-00031"),
            )
        except Exception as exc:  # noqa: BLE001
            log.warning("could not end session %s,%s: %s", sid, serial, exc)


    def baseline_snapshot(self, session: OracleSession) -> Snapshot:  # type: ignore[override]  # only its own sessions
        """The candidate schema as fixtures left it (taken once after the last fixture load)."""
        if self._baseline is None:
            self._baseline = session.snapshot()
        return self._baseline

    def rebuild_candidate(self) -> None:
        """Janitor of last resort: empty the candidate schema and re-run its fixture statements."""
        rows = self._admin_sql(
            "SELECT object_name, object_type FROM all_objects WHERE owner = :o", [self.candidate]
        )
        oracledb = _driver()
        self._admin_sql(f"ALTER SESSION SET CURRENT_SCHEMA = {quote_ident(self.candidate)}")
        try:
            for stmt in janitor_statements((n, t) for n, t in rows):
                try:
                    with self.admin.cursor() as cur:
                        cur.execute(stmt)
                except oracledb.Error as exc:
                    log.debug("rebuild: %s: %s", stmt, _codes_of(exc)[1])
            self._admin_sql("PURGE RECYCLEBIN", ignore=("ORA-38301",))
        finally:
            self._admin_sql(
                "ALTER SESSION SET CURRENT_SCHEMA = "
                + quote_ident(self.admin_dsn.user.upper() if self.admin_dsn else "SYSTEM"),
                ignore=("ORA-01435", "ORA-02421"),
            )
        if self._candidate_statements:
            self._run_as(self.candidate, self._candidate_statements, "candidate baseline")
        self._baseline = None

    # ----------------------------------------------------------------- sessions
    def session(self) -> OracleSession:
        if self._session is None:
            self._session = OracleSession(self)
        return self._session

    def alive(self) -> bool:
        try:
            return (
                self.admin is not None
                and self.admin.is_healthy()
                and bool(self._admin_sql("SELECT 1 FROM dual"))
            )
        except Exception:  # noqa: BLE001
            return False

    def recover(self) -> None:
        if self.alive():
            if self._session is not None:
                self._session.connect()
            return
        with contextlib.suppress(Exception):
            if self.admin is not None:
                self.admin.close()
        self.admin = None
        if self.container is not None:
            try:
                self.container.get_wrapped_container().reload()
                running = self.container.get_wrapped_container().status == "running"
            except Exception:  # noqa: BLE001
                running = False
            if not running:
                raise InfrastructureError("the Oracle container stopped")
        self.admin = self._admin_connect()
        if self._session is not None:
            self._session.connect()

    # ----------------------------------------------------------------- tests
    def candidate_objects(self) -> list[tuple[str, str]]:
        """Objects in the candidate schema (tests assert the janitor leaves it at baseline)."""
        rows = self._admin_sql(
            "SELECT object_name, object_type FROM all_objects WHERE owner = :o "
            "AND object_name NOT LIKE 'BIN$%' ORDER BY 1, 2",
            [self.candidate],
        )
        return [(n, t) for n, t in rows]

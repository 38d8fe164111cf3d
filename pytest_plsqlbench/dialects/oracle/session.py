"""The candidate's Oracle session: scripts statement by statement, output capture, the task scope."""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ... import outcomes
from ...errors import InfrastructureError
from ...outputs import format_value
from ...scripts import Statement, serveroutput, split
from ..base import DbError, Execution, OutputCapture, Phase, Session
from .dsn import _bare
from .errors import (
    CONNECTION_CODES,
    PACKAGE_STATE_CODES,
    TIMEOUT_CODES,
    _codes_of,
    _driver,
    classify,
    error_codes,
    primary_code,
)
from .janitor import PLSQL_UNITS, ObjectState, Snapshot, diff_snapshots, janitor_statements, restore_statements

if TYPE_CHECKING:
    from .provisioning import OracleBackend

log = logging.getLogger(__name__)

MAX_ROWS = 100_000
OUTPUT_CHUNK = 500

# --------------------------------------------------------------------------- values
def format_cell(value: Any, type_name: str | None) -> str:
    """One result value as the paper's rules print it: DATE ``YYYY-MM-DD``, TIMESTAMP
    ``YYYY-MM-DD HH24:MI:SS``, NULL empty, BOOLEAN ``TRUE``/``FALSE``, numbers exact."""
    if value is None:
        return ""
    kind = (type_name or "").upper()
    if isinstance(value, dt.datetime):
        if kind.endswith("DB_TYPE_DATE") or kind == "DATE":
            return value.strftime("%Y-%m-%d")
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    return format_value(value)



def _output_handler(cursor: Any, metadata: Any) -> Any:
    """Fetch NUMBER as Decimal (exact), LOBs as str/bytes (no LOB round trips)."""
    oracledb = _driver()
    if metadata.type_code is oracledb.DB_TYPE_NUMBER:
        return cursor.var(decimal.Decimal, arraysize=cursor.arraysize)
    if metadata.type_code in (oracledb.DB_TYPE_CLOB, oracledb.DB_TYPE_NCLOB):
        return cursor.var(oracledb.DB_TYPE_LONG, arraysize=cursor.arraysize)
    if metadata.type_code is oracledb.DB_TYPE_BLOB:
        return cursor.var(oracledb.DB_TYPE_LONG_RAW, arraysize=cursor.arraysize)
    return None


_CREATE_UNIT = re.compile(
    r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:(?:NON)?EDITIONABLE\s+)?(?:FORCE\s+|NOFORCE\s+)?"
    r"(PACKAGE\s+BODY|PACKAGE|PROCEDURE|FUNCTION|TYPE\s+BODY|TYPE|TRIGGER|VIEW|JAVA\s+SOURCE)\s+"
    r"(?:(\"[^\"]+\"|[A-Za-z][\w$#]*)\s*\.\s*)?(\"[^\"]+\"|[A-Za-z][\w$#]*)",
    re.I,
)


def created_unit(text: str) -> tuple[str, str, str | None] | None:
    """(object type, name, owner) a CREATE statement defines, as USER_ERRORS spells them."""
    m = _CREATE_UNIT.match(text)
    if m is None:
        return None
    kind = " ".join(m.group(1).upper().split())
    return kind, _bare(m.group(3)), _bare(m.group(2)) if m.group(2) else None


# --------------------------------------------------------------------------- session
class OracleSession(Session):
    """The candidate's connection (see the module doc for what it guarantees)."""

    def __init__(self, backend: OracleBackend) -> None:
        self.backend = backend
        self.conn: Any = None
        self.sid: tuple[int, int] | None = None
        self._nls: dict[str, str] = {}
        self._task_baseline: Snapshot | None = None
        self._out = OutputCapture(self.backend.settings.database.max_output)
        self.connect()

    # ----------------------------------------------------------------- connection
    def connect(self) -> None:
        self.close()
        oracledb = _driver()
        try:
            conn = oracledb.connect(
                user=self.backend.candidate,
                password=self.backend.candidate_password,
                dsn=self.backend.connect_string,
                **self.backend.connect_params,
            )
        except oracledb.Error as exc:
            raise InfrastructureError(f"cannot connect as the candidate user: {_codes_of(exc)[1]}") from exc
        conn.outputtypehandler = _output_handler
        conn.call_timeout = int(self.backend.settings.database.timeout * 1000)
        self.conn = conn
        with conn.cursor() as cur:
            cur.callproc("dbms_output.enable", [None])
            cur.execute("SELECT SYS_CONTEXT('USERENV', 'SID') FROM dual")
            sid = int(cur.fetchone()[0])
            cur.execute("SELECT parameter, value FROM nls_session_parameters")
            self._nls = {p: v for p, v in cur.fetchall()}
        self.sid = (sid, self.backend.serial_of(sid))

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
            self.conn = None

    def healthy(self) -> bool:
        return self.conn is not None and self.conn.is_healthy()

    def lost(self) -> bool:
        """Whether the connection really is gone, asked of the server (a round trip), not read
        off an error code: PL/SQL can raise any code (``PRAGMA EXCEPTION_INIT(e, -3113)``), and
        an answer that fakes a lost connection must not pass its failure off as the harness's."""
        if not self.healthy():
            return True
        try:
            self.conn.ping()
        except Exception:  # noqa: BLE001 - any failure of the round trip: the connection is gone
            return True
        return False

    def _cursor(self) -> Any:
        if self.conn is None:
            raise InfrastructureError("the candidate connection is closed")
        return self.conn.cursor()

    def _sql(self, text: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[tuple[Any, ...]]:
        """Harness SQL on the candidate connection (not answer code): errors are infrastructure."""
        oracledb = _driver()
        try:
            with self._cursor() as cur:
                cur.execute(text, params)
                return cur.fetchall() if cur.description else []
        except oracledb.Error as exc:
            raise InfrastructureError(f"harness query failed: {_codes_of(exc)[1]}") from exc

    # ----------------------------------------------------------------- harness members
    def harness_sql(self, text: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[tuple[Any, ...]]:
        return self._sql(text, params)

    def pin_setting(self, statement: str) -> None:
        """Oracle resets no setting within a task (``end_task`` resets the session): run it now."""
        self._sql(statement)

    def reconnect(self) -> None:
        self.connect()

    @property
    def server_session_id(self) -> int:
        if self.sid is None:
            raise InfrastructureError("the candidate session is not connected")
        return int(self.sid[0])

    @property
    def connection(self) -> Any:
        return self.conn

    # ----------------------------------------------------------------- snapshots
    def snapshot(self) -> Snapshot:
        rows = self._sql(
            "SELECT object_name, object_type, object_id, last_ddl_time, status FROM user_objects "
            "WHERE object_name NOT LIKE 'BIN$%'"
        )
        source: dict[tuple[str, str], list[str]] = {}
        if any(r[1] in PLSQL_UNITS for r in rows):
            for name, kind, text in self._sql(
                "SELECT name, type, text FROM user_source ORDER BY name, type, line"
            ):
                source.setdefault((name, kind), []).append(text)
        return {
            (name, kind): ObjectState(
                int(oid), ddl, status, "".join(source[(name, kind)]) if (name, kind) in source else None
            )
            for name, kind, oid, ddl, status in rows
        }

    def undo(self, before: Snapshot, notes: list[str] | None = None) -> None:
        """Drop what appeared since ``before``; re-create program units it replaced."""
        after = self.snapshot()
        new, changed = diff_snapshots(before, after)
        if not new and not changed:
            return
        self._run_quietly(janitor_statements(new))
        restore, lost = restore_statements(before, changed)
        self._run_quietly(restore)
        if lost:
            msg = f"could not restore {', '.join(f'{t} {n}' for n, t in lost)} (not a program unit)"
            log.warning("janitor: %s", msg)
            if notes is not None:
                notes.append(msg)

    def _run_quietly(self, statements: Iterable[str]) -> None:
        oracledb = _driver()
        for text in statements:
            try:
                with self._cursor() as cur:
                    cur.execute(text)
            except oracledb.Error as exc:
                codes, message = _codes_of(exc)
                if set(codes) & CONNECTION_CODES:
                    raise InfrastructureError(f"lost the database during cleanup: {message}") from exc
                log.debug("janitor: %s: %s", text[:60], message)

    # ----------------------------------------------------------------- task scope
    def begin_task(self) -> None:
        if not self.healthy():
            self.connect()
        self._rollback()
        self._task_baseline = self.snapshot()
        if self._task_baseline != self.backend.baseline_snapshot(self):
            log.warning("candidate schema differs from its baseline at task start; rebuilding it")
            self.backend.rebuild_candidate()
            self._task_baseline = self.snapshot()

    def end_task(self) -> None:
        if not self.healthy():
            self.connect()
        self._rollback()
        baseline = self._task_baseline
        self._task_baseline = None
        if baseline is not None:
            after = self.snapshot()
            new, changed = diff_snapshots(baseline, after)
            self._run_quietly(janitor_statements(new))
            if changed:
                log.info("an answer replaced part of the task baseline (%s); restoring it", changed[:3])
                self.backend.rebuild_candidate()
            leftover, _ = diff_snapshots(baseline, self.snapshot())
            if leftover:
                log.warning("janitor could not drop %s; rebuilding the candidate schema", leftover[:5])
                self.backend.rebuild_candidate()
        self._reset_session_state()

    def _rollback(self) -> None:
        oracledb = _driver()
        try:
            self.conn.rollback()
        except oracledb.Error as exc:
            codes, message = _codes_of(exc)
            if set(codes) & CONNECTION_CODES or not self.healthy():
                self.connect()
            else:
                log.debug("rollback: %s", message)

    def _reset_session_state(self) -> None:
        """What rollback does not undo: package state, NLS changes, pending DBMS_OUTPUT."""
        oracledb = _driver()
        try:
            with self._cursor() as cur:
                cur.callproc("dbms_session.reset_package")
                cur.callproc("dbms_output.enable", [None])
                cur.execute("SELECT parameter, value FROM nls_session_parameters")
                changed = {p: v for p, v in cur.fetchall() if self._nls.get(p) != v}
                for param in changed:
                    if param in self._nls and re.fullmatch(r"NLS_[A-Z_]+", param):
                        value = self._nls[param].replace("'", "''")
                        cur.execute(f"ALTER SESSION SET {param} = '{value}'")
            self._drain(keep=False)
        except oracledb.Error as exc:
            log.info("session reset failed (%s); reconnecting", _codes_of(exc)[1])
            self.connect()

    # ----------------------------------------------------------------- scripts
    def run(self, script: str, *, isolated: bool, phase: Phase) -> Execution:
        if not self.healthy():
            raise InfrastructureError("the candidate connection is closed")
        result = Execution()
        self._out = OutputCapture.into(result, self.backend.settings.database.max_output)
        statements = split(script, "oracle")
        t0 = time.monotonic()
        before = self.snapshot() if isolated or phase == "install" else None
        self._drain(keep=False)  # output left by harness calls is not the script's
        capture = True
        try:
            for stmt in statements:
                if stmt.kind == "client":
                    setting = serveroutput(stmt)
                    if setting is not None:
                        capture = setting
                    else:
                        result.notes.append(f"skipped SQL*Plus command at line {stmt.line}: {stmt.text[:40]}")
                    continue
                error = self._run_statement(stmt, phase, capture)
                if error is not None:
                    result.error = error
                    break
        finally:
            result.truncated = self._out.truncated
            result.duration_s = time.monotonic() - t0
        if before is not None and (isolated or result.error is not None):
            self._rollback()
            self.undo(before, result.notes)
        return result


    def _drain(self, keep: bool = True) -> None:
        """Read DBMS_OUTPUT.GET_LINES until the buffer is empty."""
        with self._cursor() as cur:
            lines_var = cur.arrayvar(str, OUTPUT_CHUNK, 32767)
            count_var = cur.var(int)
            while True:
                count_var.setvalue(0, OUTPUT_CHUNK)
                cur.callproc("dbms_output.get_lines", (lines_var, count_var))
                count = count_var.getvalue() or 0
                if keep:
                    for line in lines_var.getvalue()[:count]:
                        self._out.append(line or "")
                if count < OUTPUT_CHUNK:
                    return

    def _run_statement(
        self, stmt: Statement, phase: Phase, capture: bool, retried: bool = False
    ) -> DbError | None:
        oracledb = _driver()
        error: DbError | None = None
        try:
            with self._cursor() as cur:
                cur.execute(stmt.text)
                if cur.description:
                    types = [getattr(d.type_code, "name", str(d.type_code)) for d in cur.description]
                    for n, row in enumerate(cur):
                        if self._out.truncated:
                            break
                        if n >= MAX_ROWS:  # said, as the character cap is
                            self._out.cut(f"<result truncated at {MAX_ROWS} rows>")
                            break
                        self._out.append_row(",".join(format_cell(v, t) for v, t in zip(row, types)))
                warning = cur.warning
            if warning is not None:
                error = self._compile_errors(stmt, phase)
        except oracledb.Error as exc:
            codes, message = _codes_of(exc)
            if {"ORA-24344", "DPY-7000"} & set(codes):
                error = self._compile_errors(stmt, phase)
                self._drain(keep=capture)
                return error
            if set(codes) & TIMEOUT_CODES:
                self._after_timeout()
                return DbError(
                    f"statement ran longer than {self.backend.settings.database.timeout:g}s and was cancelled",
                    codes[0],
                    outcomes.TIMEOUT,
                    stmt.line,
                )
            if (set(codes) & CONNECTION_CODES or not self.healthy()) and self.lost():
                raise InfrastructureError(f"database connection lost: {message}") from exc
            if set(codes) & PACKAGE_STATE_CODES and not retried:
                # The session held state of a package the answer just replaced; Oracle's
                # documented remedy (and what a fresh SQL*Plus session sees) is to call again.
                return self._run_statement(stmt, phase, capture, retried=True)
            failure = classify(codes, phase)
            if failure == outcomes.INFRASTRUCTURE:
                # A connection-loss code on a connection that answers a ping: the answer raised it.
                failure = outcomes.INVALID_ARTIFACT if phase == "install" else outcomes.WRONG_OUTPUT
            error = DbError(message, primary_code(codes), failure, stmt.line)
        if capture:
            self._drain()
        else:
            self._drain(keep=False)
        return error

    def _compile_errors(self, stmt: Statement, phase: Phase) -> DbError | None:
        unit = created_unit(stmt.text)
        if unit is None:
            return DbError(
                "created with compilation errors", "ORA-24344", outcomes.INVALID_ARTIFACT, stmt.line
            )
        kind, name, owner = unit
        query = (
            "SELECT line, position, text, attribute FROM all_errors WHERE owner = NVL(:o, USER) "
            "AND name = :n AND type = :t ORDER BY sequence"
        )
        rows = self._sql(query, {"o": owner, "n": name, "t": kind})
        errors = [r for r in rows if (r[3] or "ERROR") == "ERROR"]
        if not errors:
            return None  # warnings only
        texts = [f"{str(text).strip()} (line {line}, column {pos})" for line, pos, text, _ in errors]
        codes = [c for t in texts for c in error_codes(t)] or ["ORA-24344"]
        failure = classify(codes, phase)
        if failure not in (outcomes.INTERFACE, outcomes.INVALID_ARTIFACT):
            failure = outcomes.INVALID_ARTIFACT
        message = f"{kind} {name} has compilation errors: " + "; ".join(texts[:5])
        return DbError(message, primary_code(codes), failure, stmt.line)

    def _after_timeout(self) -> None:
        """The call was interrupted; make sure the server stops it, then start afresh."""
        sid = self.sid
        self.close()
        if sid is not None:
            self.backend.kill_session(*sid)
        self.connect()


"""Oracle / PL/SQL backend (python-oracledb thin mode: no Oracle Client needed).

Where the database comes from: ``--plsql-db=container`` starts testcontainers' Oracle
Database Free container per worker; ``--plsql-dsn`` (or ``PLSQL_ORACLE_DSN``/``PLSQL_DSN``)
uses an existing database -- e.g. Autonomous Database, as the paper did -- with one candidate
schema per worker.

Roles, as in the PostgreSQL backend: the harness's admin account owns the benchmark schemas
(``CHINOOK``, ``SHOP`` ...: schema-only accounts it creates before loading a fixture); each
worker's candidate user may create program units in its own schema and only *read* the
benchmark schemas. On a shared DSN, each benchmark schema is loaded once per database: a
registry table (``PLSQLBENCH_FIXTURES``) records what is loaded (keyed by content digest) and
a row lock held by a separate connection serialises the workers, DDL commits notwithstanding.

Isolation: DDL commits implicitly in Oracle, so rollback alone cannot undo an answer. The
session snapshots the candidate's objects (``USER_OBJECTS``, with ``USER_SOURCE`` for program
units) and its janitor drops what appeared and re-creates program units that were replaced:
after each isolated script, after a failed install (its partial effects are undone), and at
the end of each task, which also restores the task's baseline (objects fixtures put into the
candidate schema) and resets session state (package state, NLS settings, DBMS_OUTPUT).

Output: result rows of plain queries, then the statement's DBMS_OUTPUT lines
(``DBMS_OUTPUT.ENABLE``/``GET_LINES``), in execution order, capped by ``--plsql-max-output``;
``SET SERVEROUTPUT OFF`` in a script stops the capture as it would in SQL*Plus. Errors carry
their ORA-/PLS- code and are classified as in PLSQLBench App. E.2 (:func:`classify`).
Statement timeout: the driver's ``call_timeout``; after it the session is replaced.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import logging
import os
import re
import secrets
import string
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from .. import outcomes
from ..errors import InfrastructureError, UsageError
from ..outputs import format_value
from ..scripts import Statement, serveroutput, split
from ..settings import Settings
from ..tasks import Fixture
from .base import Backend, DbError, Execution, OutputCapture, Phase, Session

log = logging.getLogger(__name__)

REGISTRY = "PLSQLBENCH_FIXTURES"
USER_PREFIX = "PLSQLB_"
DEFAULT_IMAGE = "gvenzl/oracle-free:23-slim-faststart"
MAX_ROWS = 100_000
OUTPUT_CHUNK = 500
LOCK_WAIT_S = 1800
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

# --------------------------------------------------------------------------- error classes
#: Codes that say the answer does not match the database-facing contract (E.2 "interface,
#: signature, or schema grounding"): missing entry point, wrong arguments, missing package
#: member, unknown table/column/object.
INTERFACE_CODES = frozenset(
    {
        "PLS-00201",
        "PLS-00306",
        "PLS-00302",
        "PLS-00307",
        "PLS-00222",
        "PLS-00225",
        "PLS-00313",
        "PLS-00904",
        "ORA-00904",
        "ORA-00942",
        "ORA-04043",
        "ORA-00980",
        "ORA-06564",
        "ORA-02289",
    }
)
#: Codes that say the artifact is invalid or incomplete (E.2): invalid compiled objects.
INVALID_CODES = frozenset({"PLS-00905", "ORA-04063", "ORA-06508", "ORA-24344", "ORA-06575", "DPY-7000"})
#: Wrapper codes that point at the real error rather than being one.
WRAPPER_CODES = frozenset({"ORA-06550", "ORA-06512", "ORA-04088"})
TIMEOUT_CODES = frozenset({"DPY-4024", "ORA-01013", "ORA-00040", "ORA-56735", "ORA-30006"})
CONNECTION_CODES = frozenset(
    {
        "DPY-1001",
        "DPY-4011",
        "DPY-6005",
        "DPY-4005",
        "ORA-03113",
        "ORA-03114",
        "ORA-03135",
        "ORA-00028",
        "ORA-01012",
        "ORA-01033",
        "ORA-01034",
        "ORA-01089",
        "ORA-01092",
        "ORA-00603",
        "ORA-12514",
        "ORA-12541",
        "ORA-12170",
        "ORA-02396",
        "ORA-12537",
        "ORA-12547",
    }
)
UNSAFE_CODES = frozenset({"ORA-01031", "ORA-01749", "ORA-01950", "ORA-01536"})
PACKAGE_STATE_CODES = frozenset({"ORA-04068", "ORA-04061", "ORA-04065", "ORA-04062"})

_CODE = re.compile(r"\b(ORA|PLS|DPY|PLW)-(\d{3,5})\b")


def error_codes(message: str) -> list[str]:
    """Every ORA-/PLS-/DPY- code in ``message``, in order, without repeats (ORA/PLS numbers
    padded to five digits, DPY to four, as the driver prints them)."""
    out = (
        f"{m.group(1)}-{m.group(2).zfill(4 if m.group(1) == 'DPY' else 5)}"
        for m in _CODE.finditer(message or "")
    )
    return list(dict.fromkeys(out))


def primary_code(codes: Sequence[str]) -> str | None:
    """The code that names the problem: an interface code, else the first PLS- code, else the
    first code that is not a wrapper (``ORA-06550 line x`` only points at the PLS- error)."""
    for code in codes:
        if code in INTERFACE_CODES:
            return code
    for code in codes:
        if code.startswith("PLS-"):
            return code
    for code in codes:
        if code not in WRAPPER_CODES:
            return code
    return codes[0] if codes else None


def is_assertion(code: str | None) -> bool:
    """ORA-20000..ORA-20999: RAISE_APPLICATION_ERROR, what test assertions raise."""
    return bool(code) and code.startswith("ORA-20") and len(code) == 9 and code[4:].isdigit()


def classify(codes: Sequence[str], phase: Phase) -> str:
    """Failure class of an Oracle error raised while installing or testing an answer.

    PLSQLBench App. E.2: PLS-00905 (invalid object) -> invalid artifact; PLS-00201 (missing
    entry point), PLS-00306 (wrong arguments), ORA-00904/00942 (unknown column/table) ->
    interface; ORA-20xxx raised by an assertion and other run-time errors -> wrong output;
    call timeouts -> timeout; lost connections -> infrastructure (excluded from metrics).
    """
    code_set = set(codes)
    if code_set & TIMEOUT_CODES:
        return outcomes.TIMEOUT
    if code_set & CONNECTION_CODES:
        return outcomes.INFRASTRUCTURE
    if code_set & UNSAFE_CODES:
        return outcomes.UNSAFE
    if code_set & INTERFACE_CODES:
        return outcomes.INTERFACE
    if code_set & INVALID_CODES:
        return outcomes.INVALID_ARTIFACT
    if any(c.startswith("PLS-") for c in codes):
        return outcomes.INVALID_ARTIFACT  # compile-time errors of the answer's code
    main = primary_code(codes)
    if is_assertion(main):
        return outcomes.WRONG_OUTPUT
    if main is None:
        return outcomes.INVALID_ARTIFACT if phase == "install" else outcomes.WRONG_OUTPUT
    if main.startswith("ORA-009") or main in ("ORA-01756", "ORA-01740", "ORA-00972"):
        return outcomes.INVALID_ARTIFACT  # SQL syntax: ORA-00900 ... ORA-00999
    if phase == "install":
        return outcomes.INVALID_ARTIFACT
    return outcomes.WRONG_OUTPUT


# --------------------------------------------------------------------------- connection strings
@dataclass(frozen=True)
class OracleDsn:
    """What ``oracledb.connect`` needs: user, password, connect string, extra parameters."""

    user: str
    password: str
    dsn: str
    params: Mapping[str, str] = field(default_factory=dict)

    def redacted(self) -> str:
        return f"{self.user}@{self.dsn}"


def parse_dsn(text: str) -> OracleDsn:
    """``user/password@connect_string`` or ``oracle://user:password@host:port/service?k=v``.

    The connect string may be EZConnect (``host:1521/FREEPDB1``), a tnsnames alias (with
    ``TNS_ADMIN`` or ``?config_dir=``) or a full descriptor; query parameters
    (``config_dir``, ``wallet_location``, ``wallet_password`` ...) are passed to
    ``oracledb.connect``, which is how Autonomous Database wallets are given.
    """
    text = text.strip()
    if re.match(r"^oracle(\+\w+)?://", text, re.I):
        url = urllib.parse.urlsplit(text)
        params = dict(urllib.parse.parse_qsl(url.query))
        service = url.path.lstrip("/") or params.pop("service_name", "")
        host = url.hostname or ""
        if not url.username or not host:
            raise UsageError(
                "--plsql-dsn: an oracle:// URL needs user and host (oracle://user:pass@host:1521/service)"
            )
        port = f":{url.port}" if url.port else ""
        dsn = f"{host}{port}/{service}" if service else f"{host}{port}"
        return OracleDsn(
            urllib.parse.unquote(url.username), urllib.parse.unquote(url.password or ""), dsn, params
        )
    credentials, sep, connect = text.rpartition("@")
    if not sep or "/" not in credentials or not connect:
        raise UsageError(
            "--plsql-dsn for oracle: expected user/password@host:port/service or "
            "oracle://user:password@host:port/service"
        )
    user, _, password = credentials.partition("/")
    return OracleDsn(user, password, connect, {})


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def candidate_name(worker: str) -> str:
    """A fresh candidate user name for a worker (``PLSQLB_GW0_1A2B3C``)."""
    tag = re.sub(r"[^A-Za-z0-9]", "", worker).upper()[:20] or "MAIN"
    return f"{USER_PREFIX}{tag}_{secrets.token_hex(3).upper()}"


def new_password() -> str:
    """A password Autonomous Database's rules accept (12-30 chars, upper, lower, digit, no quote)."""
    alphabet = string.ascii_letters + string.digits
    return "Pw9_" + "".join(secrets.choice(alphabet) for _ in range(22))


# --------------------------------------------------------------------------- fixture scripts
_QUALIFIED_CREATE = re.compile(
    r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:(?:NON)?EDITIONABLE\s+)?(?:GLOBAL\s+TEMPORARY\s+|PRIVATE\s+TEMPORARY\s+)?"
    r"(?:UNIQUE\s+|BITMAP\s+)?(?:TABLE|VIEW|MATERIALIZED\s+VIEW|SEQUENCE|TYPE|PACKAGE|PROCEDURE|FUNCTION|"
    r"SYNONYM|INDEX|TRIGGER)\s+(?:BODY\s+)?(\"[^\"]+\"|[A-Za-z][\w$#]*)\s*\.",
    re.I,
)


def _bare(name: str) -> str:
    return name[1:-1] if name.startswith('"') else name.upper()


def fixture_owners(statements: Iterable[Statement]) -> list[str]:
    """Schemas a fixture creates objects in (``CREATE TABLE SHOP.ORDERS`` -> ``SHOP``)."""
    owners: list[str] = []
    for stmt in statements:
        m = _QUALIFIED_CREATE.match(stmt.text)
        if m and _bare(m.group(1)) not in owners:
            owners.append(_bare(m.group(1)))
    return owners


def partition_fixture(script: str) -> tuple[list[str], list[tuple[str | None, Statement]], list[Statement]]:
    """(owners, owner statements with the owner to run them as, candidate-schema statements).

    Statements naming an owner's objects (``SHOP.``) load once per database into that owner;
    the rest create objects in each worker's candidate schema (its task baseline). COMMIT and
    SQL*Plus commands are dropped: the loader commits.
    """
    statements = [
        s for s in split(script, "oracle") if s.kind != "client" and s.first_word not in ("COMMIT",)
    ]
    owners = fixture_owners(statements)
    patterns = {
        o: re.compile(rf"(?<![\w$#\"]){re.escape(o)}\s*\.|\"{re.escape(o)}\"\s*\.", re.I) for o in owners
    }
    owned: list[tuple[str | None, Statement]] = []
    candidate: list[Statement] = []
    for stmt in statements:
        head = stmt.text[:2000]  # where a statement names its target (a 30 KB INSERT need not be read)
        hits = [o for o, p in patterns.items() if p.search(head)]
        if hits:
            owned.append((hits[0], stmt))
        else:
            candidate.append(stmt)
    return owners, owned, candidate


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


def _driver() -> Any:
    try:
        import oracledb
    except ImportError:
        raise UsageError(
            "--plsql-dialect=oracle needs python-oracledb: pip install 'pytest-plsqlbench[oracle]'"
        ) from None
    return oracledb


def _codes_of(exc: BaseException) -> tuple[list[str], str]:
    err = exc.args[0] if exc.args else None
    message = getattr(err, "message", None) or str(exc)
    codes = error_codes(message)
    full = getattr(err, "full_code", None)
    if full and full not in codes:
        codes.insert(0, full)
    return codes, message.strip()


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

    def __init__(self, backend: "OracleBackend") -> None:
        self.backend = backend
        self.conn: Any = None
        self.sid: tuple[int, int] | None = None
        self._nls: dict[str, str] = {}
        self._task_baseline: Snapshot | None = None
        self._out = OutputCapture(self.backend.settings.max_output)
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
        conn.call_timeout = int(self.backend.settings.timeout * 1000)
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
        self._out = OutputCapture(self.backend.settings.max_output, result.lines)
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
                        if n >= MAX_ROWS or self._out.truncated:
                            break
                        self._out.append(",".join(format_cell(v, t) for v, t in zip(row, types)))
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
                    f"statement ran longer than {self.backend.settings.timeout:g}s and was cancelled",
                    codes[0],
                    outcomes.TIMEOUT,
                    stmt.line,
                )
            if set(codes) & CONNECTION_CODES or not self.healthy():
                raise InfrastructureError(f"database connection lost: {message}") from exc
            if set(codes) & PACKAGE_STATE_CODES and not retried:
                # The session held state of a package the answer just replaced; Oracle's
                # documented remedy (and what a fresh SQL*Plus session sees) is to call again.
                return self._run_statement(stmt, phase, capture, retried=True)
            failure = classify(codes, phase)
            if failure == outcomes.INFRASTRUCTURE:
                raise InfrastructureError(f"database error: {message}") from exc
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


# --------------------------------------------------------------------------- backend
class OracleBackend(Backend):
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
        if self.settings.db == "container":
            self.admin_dsn = self._start_container()
        elif self.settings.db == "dsn":
            dsn = self.settings.dsn or os.environ.get("PLSQL_ORACLE_DSN") or os.environ.get("PLSQL_DSN")
            if not dsn:
                raise UsageError("--plsql-db=dsn needs --plsql-dsn (or PLSQL_ORACLE_DSN)")
            self.admin_dsn = parse_dsn(dsn)
        else:
            raise UsageError(
                f"--plsql-db={self.settings.db} is not available for oracle; use container or dsn"
            )
        self.connect_string = self.admin_dsn.dsn
        self.connect_params = dict(self.admin_dsn.params)
        tns = os.environ.get("TNS_ADMIN")
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
                from testcontainers.oracle import OracleDbContainer  # type: ignore[no-redef]
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
        image = os.environ.get("PLSQL_ORACLE_IMAGE", DEFAULT_IMAGE)
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

    # ----------------------------------------------------------------- fixtures
    def _load(self, fixture: Fixture) -> None:
        owners, owned, candidate = partition_fixture(fixture.script)
        if owned:
            with self._database_lock(fixture.key) as status:
                if status == "loaded" and self._missing_users(owners):
                    log.warning(
                        "fixture %s is registered as loaded but its schemas are gone; reloading", fixture.key
                    )
                    status = None
                if status != "loaded":
                    self._load_owners(fixture, owners, owned)
                    status_row = ",".join(owners)
                    self._lock_conn_sql(
                        f"UPDATE {REGISTRY} SET status = 'loaded', owners = :o, "
                        "loaded_at = SYSTIMESTAMP WHERE fixture_key = :k",
                        [status_row, fixture.key],
                    )
        for owner in owners:
            self._grant_read(owner)
        if candidate:
            self._run_as(self.candidate, candidate, fixture.key)
            self._candidate_statements.extend(candidate)
        # The candidate schema as fixtures leave it changed: take its baseline again on next use.
        self._baseline = None

    @contextlib.contextmanager
    def _database_lock(self, key: str) -> Iterator[str | None]:
        """Serialise loading ``key`` across workers sharing the database (a row lock held by
        a connection of its own, so the loader's DDL commits do not release it)."""
        oracledb = _driver()
        conn = self._admin_connect()
        self._lock_conn = conn
        try:
            with conn.cursor() as cur:
                try:
                    cur.execute(f"INSERT INTO {REGISTRY} (fixture_key, status) VALUES (:k, 'new')", [key])
                    conn.commit()
                except oracledb.IntegrityError:
                    conn.rollback()
                cur.execute(
                    f"SELECT status FROM {REGISTRY} WHERE fixture_key = :k FOR UPDATE WAIT {LOCK_WAIT_S}",
                    [key],
                )
                row = cur.fetchone()
            yield row[0] if row else None
            conn.commit()
        except oracledb.Error as exc:
            with contextlib.suppress(Exception):
                conn.rollback()
            raise InfrastructureError(f"fixture {key!r}: registry lock failed: {_codes_of(exc)[1]}") from exc
        except BaseException:
            with contextlib.suppress(Exception):
                conn.rollback()
            raise
        finally:
            self._lock_conn = None
            with contextlib.suppress(Exception):
                conn.close()

    def _lock_conn_sql(self, text: str, params: Sequence[Any]) -> None:
        with self._lock_conn.cursor() as cur:
            cur.execute(text, params)

    def _load_owners(
        self, fixture: Fixture, owners: list[str], owned: list[tuple[str | None, Statement]]
    ) -> None:
        ours = self._harness_owners()
        existing = set(owners) - set(self._missing_users(owners))
        foreign = sorted(existing - ours)
        if foreign:
            raise UsageError(
                f"fixture {fixture.description or fixture.key}: schema(s) {', '.join(foreign)} already exist in the "
                "database and were not created by pytest-plsqlbench; use another database or drop them"
            )
        ts = quote_ident(self.tablespace)
        for owner in owners:
            # Recorded (and committed) before the user exists, so a crash mid-load leaves a
            # schema the next run knows it may drop.
            self._admin_sql(
                f"INSERT INTO {REGISTRY} (fixture_key, status, owners) VALUES (:k, 'owned', :o)",
                [f"owner:{owner}", owner],
                ignore=("ORA-00001",),
            )
            self._admin_sql(
                f"UPDATE {REGISTRY} SET status = 'stale' WHERE fixture_key NOT LIKE 'owner:%' "
                "AND fixture_key <> :k AND INSTR(',' || owners || ',', ',' || :o || ',') > 0",
                [fixture.key, owner],
            )
            self.admin.commit()
            if owner in existing:
                log.info("reloading schema %s (its content changed)", owner)
                self._drop_user(owner)
            self._admin_sql(
                f"CREATE USER {quote_ident(owner)} NO AUTHENTICATION DEFAULT TABLESPACE {ts} "
                f"QUOTA UNLIMITED ON {ts}"
            )
        by_owner: dict[str, list[Statement]] = {}
        for owner, stmt in owned:
            by_owner.setdefault(owner or owners[0], []).append(stmt)
        log.info("loading fixture %s into %s", fixture.key, ", ".join(owners))
        for owner in owners:
            self._run_as(owner, by_owner.get(owner, []), fixture.key)

    def _missing_users(self, names: Sequence[str]) -> list[str]:
        binds = ", ".join(f":{i}" for i in range(len(names)))
        found = {
            r[0]
            for r in self._admin_sql(
                f"SELECT username FROM all_users WHERE username IN ({binds})", list(names)
            )
        }
        return [n for n in names if n not in found]

    def _harness_owners(self) -> set[str]:
        """Schemas pytest-plsqlbench created in this database (it may drop and reload them)."""
        rows = self._admin_sql(f"SELECT owners FROM {REGISTRY} WHERE fixture_key LIKE 'owner:%'")
        return {owner for (owner,) in rows if owner}

    def _run_as(self, schema: str, statements: Sequence[Statement], key: str) -> None:
        """Run fixture statements as the admin with ``schema`` as the current schema."""
        oracledb = _driver()
        self._admin_sql(f"ALTER SESSION SET CURRENT_SCHEMA = {quote_ident(schema)}")
        try:
            with self.admin.cursor() as cur:
                for stmt in statements:
                    try:
                        cur.execute(stmt.text)
                    except oracledb.Error as exc:
                        codes, message = _codes_of(exc)
                        if set(codes) & CONNECTION_CODES:
                            raise InfrastructureError(
                                f"lost the database while loading fixture {key!r}: {message}"
                            ) from exc
                        raise InfrastructureError(
                            f"fixture {key!r} failed to load at script line {stmt.line}: {message.splitlines()[0]}"
                        ) from exc
                    if cur.warning is not None:
                        raise InfrastructureError(
                            f"fixture {key!r}: statement at script line {stmt.line} compiled with errors"
                        )
            self.admin.commit()
        finally:
            self._admin_sql(
                "ALTER SESSION SET CURRENT_SCHEMA = "
                + quote_ident(self.admin_dsn.user.upper() if self.admin_dsn else "SYSTEM"),
                ignore=("ORA-01435", "ORA-02421"),
            )

    def _grant_read(self, owner: str) -> None:
        """SELECT on the owner's tables and views, EXECUTE on its types and program units."""
        rows = self._admin_sql(
            "SELECT object_name, object_type FROM all_objects WHERE owner = :o AND object_type IN "
            "('TABLE', 'VIEW', 'MATERIALIZED VIEW', 'SEQUENCE', 'TYPE', 'PACKAGE', 'FUNCTION', "
            "'PROCEDURE')",
            [owner],
        )
        grantee = quote_ident(self.candidate)
        for name, kind in rows:
            priv = "SELECT" if kind in ("TABLE", "VIEW", "MATERIALIZED VIEW", "SEQUENCE") else "EXECUTE"
            self._admin_sql(
                f"GRANT {priv} ON {quote_ident(owner)}.{quote_ident(name)} TO {grantee}",
                ignore=("ORA-01720", "ORA-04042"),
            )

    def allow_writes(self, schemas: Sequence[str]) -> None:
        """INSERT/UPDATE/DELETE on the schemas' tables for the candidate (ProcArena). Oracle calls
        may COMMIT: the caller restores the clean state after every run (procarena.oracle_restore)."""
        grantee = quote_ident(self.candidate)
        for owner in schemas:
            rows = self._admin_sql(
                "SELECT table_name FROM all_tables WHERE owner = :o AND table_name NOT LIKE 'PA$%'", [owner.upper()]
            )
            for (name,) in rows:
                self._admin_sql(f"GRANT INSERT, UPDATE, DELETE ON {quote_ident(owner.upper())}.{quote_ident(name)} "
                                f"TO {grantee}")

    def baseline_snapshot(self, session: OracleSession) -> Snapshot:
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

"""PostgreSQL / PL/pgSQL backend (psycopg 3).

Per worker: one database the harness owns (in its own embedded server, a container, or a
server given by DSN), an unprivileged candidate role with its own scratch schema
``answers``, and the benchmark fixtures, owned by the harness and read-only to candidates.

Isolation: a task is one transaction (``BEGIN`` ... ``ROLLBACK``); installing an answer and
every unit test run under savepoints; ``DISCARD ALL`` afterwards drops session state that
transactions do not undo (prepared statements, advisory locks, settings, LISTEN). Top-level
transaction control in answers (``COMMIT``, ``END`` ...) is neutralised, and a transaction
that nevertheless ends early is detected and the scratch schema rebuilt.

Containment (``docs/security.md``): the candidate role has no superuser, no role
memberships (so no ``pg_read_server_files``/``pg_execute_server_program``), no CREATE
outside ``answers``, SELECT only on fixtures, no ``pg_terminate_backend``, no reading of the
statement that calls it (``current_query()``, ``pg_stat_activity``; its functions are made
volatile before ``assert`` tests, so none runs while a test is planned); its timeouts are
role defaults, re-asserted after every kept script and backed by a client-side watchdog;
rows are streamed and output capped, so neither a huge result nor a flood of notices can
exhaust the harness's memory. A connection the answer itself ended (its own idle or
transaction timeout) is the answer's timeout; one that really closed for any other reason (read
from the connection, never from an error code) is an infrastructure error the runner retries
once; an error on a live connection, whatever its SQLSTATE, is the answer's. The session
settings the harness depends on are pinned per connection and restored after every script
(``PINNED_SETTINGS``), and every statement is sent alone over the extended protocol.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import re
import secrets
import select
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql as pgsql
from psycopg.types.string import TextLoader
from sqlparse import tokens as T

from .. import outcomes
from ..errors import FixtureError, InfrastructureError, UsageError
from ..outputs import format_row, printable
from ..scripts import Statement, split, tokens
from ..settings import Settings
from ..tasks import Fixture
from .base import Backend, BatchResult, DbError, Execution, OutputCapture, Phase, Session
from .postgres_text import POSTGRES_LEXICON

if TYPE_CHECKING:
    from .pg_server import EmbeddedServer

log = logging.getLogger(__name__)

SCRATCH = "answers"
#: Top-level statements that would end or reshape the task's transaction.
TXN_STARTS = ("BEGIN", "START TRANSACTION", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE", "PREPARE TRANSACTION")
VOID_OID = 2278
MAX_ROWS = 100_000
#: Seconds recover() keeps trying to get the database back.
RECOVERY_S = 20.0
#: Rows fetched per round trip while streaming a result.
ROW_CHUNK = 500

# SQLSTATEs by what they say about an answer (PLSQLBench App. E.2 categories).
_INTERFACE = {"42883", "42P01", "42703", "3F000", "42809", "42725", "42P02", "42704"}
_ARTIFACT = {"42601", "42P13", "42P16", "42804", "0A000", "42P18", "42611", "42P10", "2F005", "42P08"}
_TIMEOUT = {"57014", "55P03", "25P03"}
#: FATALs an unprivileged session can only bring on itself by changing its own settings.
_ANSWER_FATAL = {"25P03", "25P04", "57P05"}
#: Session limits re-asserted (to the role's defaults) after every script whose effects stay.
_LIMIT_SETTINGS = ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout", "idle_session_timeout")
#: Settings whose expiry ends the session (with an ``_ANSWER_FATAL`` error) rather than a statement.
_SESSION_ENDING = ("transaction_timeout", "idle_in_transaction_session_timeout", "idle_session_timeout")
#: The candidate's search path. ``pg_catalog`` is left implicit, which PostgreSQL searches
#: *first* (naming it first would make it the schema unqualified CREATEs go to): on equal
#: signatures a built-in wins, and the event-trigger guard refuses the better-matching
#: signatures that would otherwise outrank it. ``pg_temp`` last: a temporary type or table
#: cannot shadow a fixture's (PostgreSQL searches ``pg_temp`` first unless it is placed
#: explicitly; functions and operators are never looked up there).
SEARCH_PATH = f"{SCRATCH}, public, pg_temp"
#: Session settings the harness depends on (reading results, lexing answers, resolving names):
#: pinned in every candidate connection's startup packet (which outranks role and database
#: defaults) and reset after every script; an answer that changes one changes it for its own
#: script only.
PINNED_SETTINGS = {
    "client_encoding": "UTF8",
    "standard_conforming_strings": "on",
    "backslash_quote": "safe_encoding",
    "DateStyle": "ISO, MDY",
    "IntervalStyle": "postgres",
    "extra_float_digits": "1",
    "bytea_output": "hex",
    "xmloption": "content",
    "search_path": SEARCH_PATH,
    "client_min_messages": "notice",
    "check_function_bodies": "on",
    "default_transaction_read_only": "off",
    "default_transaction_isolation": "read committed",
    "default_transaction_deferrable": "off",
    "transform_null_equals": "off",
    "array_nulls": "on",
    "row_security": "on",
    "idle_session_timeout": "0",
    # Every error a FATAL: the harness's own expected errors (a table the snapshot cannot read)
    # would end the session, and the answer's failure would read as the harness's.
    "exit_on_error": "off",
}
#: Reported by the server after every change (GUC_REPORT) and read by the harness's lexer and
#: driver: restored at once after any statement that changes them.
_REPORTED_PINS = ("client_encoding", "standard_conforming_strings")
#: Functions PUBLIC may run by default but answers must not: ending its own session would pass
#: an answer's failure off as the harness's; the text of the statement running (the test that
#: called the answer, expected values and all) would let an answer return what a test expects --
#: and the session shows it in more than one place: its activity, its open portals (the unnamed
#: portal running the test's block, a cursor the harness streams through) and its prepared
#: statements.
_REVOKED_FUNCTIONS = ("pg_terminate_backend", "current_query", "pg_stat_get_activity",
                      "pg_stat_get_backend_activity", "pg_cursor", "pg_prepared_statement")
#: The cumulative statistics of a table, index or function (``pg_stat_get_tuples_updated(oid)``
#: ...; the ``pg_stat_*_tables`` views read them): a ProcArena candidate's scope, run after gold's
#: on the same database, would read how many rows gold wrote in each table. The backend's own
#: pending counts (``pg_stat_get_xact_*``) stay: the B2 work counter reads them, and they are
#: flushed when a task scope ends (``PostgresSession.end_task``).
_CUMULATIVE_STATS = (r"(p.proname LIKE 'pg\_stat\_get\_%%' AND p.proname NOT LIKE 'pg\_stat\_get\_xact\_%%' "
                     "AND p.pronargs = 1 AND p.proargtypes[0] = 'oid'::regtype)")  # %%: a query with parameters
#: Views over those functions, closed too (a view's functions run with the view owner's rights).
_REVOKED_VIEWS = ("pg_stat_activity", "pg_cursors", "pg_prepared_statements")
#: Disk a candidate's temporary files may use (sorts, hashes, temp tables spilling).
TEMP_FILE_LIMIT = "1GB"
#: What a script must contain to create a custom setting's name (``x.y``), which no ROLLBACK or
#: DISCARD ALL removes (it then reads ``''`` instead of NULL): ``SET`` or ``RESET`` with a dotted
#: name (a statement, a function's SET clause; ``RESET x.y`` makes the name too), ``set_config``, or SQL text built at run time (dynamic
#: ``EXECUTE``, the ``*_to_xml`` and ``ts_stat``/``ts_rewrite`` functions that run a query string,
#: ``U&`` escapes that spell any of these). A task whose scripts matched ends with a new backend.
_MAY_ADD_SETTINGS = re.compile(r"set_config|\b(?:re)?set\b[\s\S]*?\.|execute|u&|xml|ts_stat|ts_rewrite", re.I)
#: A COPY that would switch the connection into the COPY sub-protocol.
_CLIENT_COPY = re.compile(r"\bSTD(?:IN|OUT)\b", re.I)


def classify(sqlstate: str | None, phase: Phase) -> str:
    """Failure class of a PostgreSQL error raised while installing or testing an answer.

    Never ``infrastructure``: PL/pgSQL can raise any SQLSTATE (``XX000``, ``58030``, ``08006``,
    ``57P01``, ``53000`` ...), so an error that arrives on a live connection is the answer's.
    Whether the harness's machinery failed is decided from the connection and the server
    themselves (:meth:`PostgresSession._failed`), not from a code.
    """
    if not sqlstate:
        return outcomes.INVALID_ARTIFACT if phase == "install" else outcomes.WRONG_OUTPUT
    if sqlstate in _TIMEOUT:
        return outcomes.TIMEOUT
    if sqlstate == "42501":  # insufficient_privilege: contained by the role's grants
        return outcomes.UNSAFE
    if sqlstate in _INTERFACE:
        return outcomes.INTERFACE
    if phase == "install":
        return outcomes.INVALID_ARTIFACT
    if sqlstate in _ARTIFACT or sqlstate.startswith("42"):
        return outcomes.INVALID_ARTIFACT
    return outcomes.WRONG_OUTPUT


class SessionLost(InfrastructureError):
    """The candidate's connection really closed (its own state says so) under a statement.

    ``external``: the server process died, or the harness itself terminated the backend
    (:meth:`PostgresBackend.terminate`), so it is the harness's trouble however often it
    repeats. Never the error's code: with ``exit_on_error`` (a setting any role may change)
    every error the answer raises ends its session as a FATAL carrying the code it chose, a
    ``57P01`` "administrator command" included. Otherwise the statement may have brought it on
    (a backend crash, an error made fatal): the runner retries once, and a second loss under the
    same answer is the answer's failure.
    """

    def __init__(self, message: str, *, external: bool, limit_named: bool = False) -> None:
        super().__init__(message)
        self.external = external
        #: Read by the runner: a repeat with the same answer is that answer's failure.
        self.repeats_are_the_answers = not external
        #: ... and its class. A script of the answer named a session time limit, and the close
        #: came without the server's reason: the limit's FATAL can be lost when the server's close
        #: overtakes it (libpq then only says "server closed the connection unexpectedly").
        self.repeat_class = outcomes.TIMEOUT if limit_named and not external else outcomes.WRONG_OUTPUT


class _SessionBroken(InfrastructureError):
    """A harness statement failed on a live connection: the answer left the session unusable."""


class _EndedByAnswer(InfrastructureError):
    """The connection ended by a limit the answer set on its own session (not a harness fault)."""

    def __init__(self, message: str, sqlstate: str | None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def _code_only(text: str) -> str:
    """``text`` without comments and string literals (keyword searches ignore their content)."""
    return " ".join(v for t, v in tokens(text, POSTGRES_LEXICON) if t not in T.String and t not in T.Comment)


def _dsn_with(dsn: str, **params: str) -> str:
    return psycopg.conninfo.make_conninfo(dsn, **params)


#: Event triggers (superuser-owned, so they bind the candidate whatever the safety check says).
#: Tests compare results with ``=``/``IS DISTINCT FROM``, call built-ins and fixture helpers
#: unqualified and cast to fixture types, and PostgreSQL prefers an exact-type function or
#: operator in *any* schema on the search path over pg_catalog's polymorphic one. So the
#: candidate may not create operators, casts, conversions, collations, text search objects or
#: rules (refused when the command starts), and no command of its may end with a routine
#: named like a function of ``pg_catalog`` or ``public`` (CREATE, ``ALTER ... RENAME``,
#: ``ALTER ... SET SCHEMA``, aggregates and procedures alike), a type, domain or table row type
#: named like a type of ``pg_catalog`` or a standalone type of ``public`` (``CREATE TYPE
#: pg_temp.x`` included), a table or view named like one of ``public`` (which tests read
#: unqualified), or a trigger on a table outside its own schemas. Both functions pin
#: their own search_path: nothing the candidate creates changes what they resolve to.
_GUARD_SQL = (
    """CREATE FUNCTION public.plsqlbench_guard_start() RETURNS event_trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $g$
BEGIN
  IF session_user = {role} THEN
    RAISE EXCEPTION 'answers may not %: tests compare with the built-in operators, casts and collations', lower(tg_tag)
      USING ERRCODE = '42501';
  END IF;
END $g$""",
    """CREATE EVENT TRIGGER plsqlbench_guard_start ON ddl_command_start
WHEN TAG IN ('CREATE OPERATOR', 'CREATE OPERATOR CLASS', 'CREATE OPERATOR FAMILY', 'ALTER OPERATOR',
             'ALTER OPERATOR CLASS', 'ALTER OPERATOR FAMILY', 'CREATE CAST', 'CREATE CONVERSION',
             'ALTER CONVERSION', 'CREATE COLLATION', 'ALTER COLLATION', 'CREATE RULE',
             'CREATE TEXT SEARCH CONFIGURATION', 'CREATE TEXT SEARCH DICTIONARY', 'CREATE TEXT SEARCH PARSER',
             'CREATE TEXT SEARCH TEMPLATE', 'ALTER TEXT SEARCH CONFIGURATION', 'ALTER TEXT SEARCH DICTIONARY',
             'CREATE TRANSFORM')
EXECUTE FUNCTION public.plsqlbench_guard_start()""",
    """CREATE FUNCTION public.plsqlbench_guard_end() RETURNS event_trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $g$
DECLARE
  shadow text;
BEGIN
  IF session_user <> {role} THEN
    RETURN;
  END IF;
  -- What the commands made, and what a made type brought along that no command reports (a
  -- range's multirange type and the constructor functions of both, named as the answer says).
  WITH RECURSIVE made(classid, objid) AS (
      SELECT d.classid, d.objid FROM pg_catalog.pg_event_trigger_ddl_commands() d
    UNION
      SELECT d.classid, d.objid FROM pg_catalog.pg_depend d JOIN made m ON d.refclassid = m.classid AND d.refobjid = m.objid
       WHERE d.deptype = 'i' AND m.classid = 'pg_catalog.pg_type'::pg_catalog.regclass
         AND d.classid IN ('pg_catalog.pg_type'::pg_catalog.regclass, 'pg_catalog.pg_proc'::pg_catalog.regclass)
  )
  SELECT pg_catalog.pg_describe_object(c.classid, c.objid, 0) INTO shadow
    FROM made c
   WHERE (c.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND EXISTS (
            SELECT 1 FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_proc b ON b.proname = p.proname AND b.oid <> p.oid
             WHERE p.oid = c.objid
               AND b.pronamespace IN ('pg_catalog'::pg_catalog.regnamespace, 'public'::pg_catalog.regnamespace)))
      OR (c.classid IN ('pg_catalog.pg_type'::pg_catalog.regclass, 'pg_catalog.pg_class'::pg_catalog.regclass) AND EXISTS (
            SELECT 1 FROM pg_catalog.pg_type t JOIN pg_catalog.pg_type b ON b.typname = t.typname AND b.oid <> t.oid
             WHERE t.oid = CASE WHEN c.classid = 'pg_catalog.pg_type'::pg_catalog.regclass THEN c.objid
                                ELSE (SELECT r.reltype FROM pg_catalog.pg_class r WHERE r.oid = c.objid) END
               -- an array type is named after its element type, which is checked itself
               AND t.typcategory OPERATOR(pg_catalog.<>) 'A'
               AND (b.typnamespace = 'pg_catalog'::pg_catalog.regnamespace
                    OR (b.typnamespace = 'public'::pg_catalog.regnamespace
                        AND (b.typrelid = 0 OR EXISTS (SELECT 1 FROM pg_catalog.pg_class r
                                                        WHERE r.oid = b.typrelid AND r.relkind = 'c'))))))
      OR (c.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND EXISTS (
            SELECT 1 FROM pg_catalog.pg_class r JOIN pg_catalog.pg_class b ON b.relname = r.relname AND b.oid <> r.oid
             WHERE r.oid = c.objid AND r.relkind IN ('r', 'v', 'm', 'p', 'f')
               AND b.relnamespace = 'public'::pg_catalog.regnamespace AND b.relkind IN ('r', 'v', 'm', 'p', 'f')))
      OR (c.classid = 'pg_catalog.pg_trigger'::pg_catalog.regclass AND NOT EXISTS (
            SELECT 1 FROM pg_catalog.pg_trigger g JOIN pg_catalog.pg_class r ON r.oid = g.tgrelid
              JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace
             WHERE g.oid = c.objid AND (n.nspname = {scratch} OR n.oid = pg_catalog.pg_my_temp_schema())))
   LIMIT 1;
  IF shadow IS NOT NULL THEN
    RAISE EXCEPTION 'answers may not define %: a built-in, fixture or harness object of that name is what the tests use', shadow
      USING ERRCODE = '42501';
  END IF;
END $g$""",
    """CREATE EVENT TRIGGER plsqlbench_guard_end ON ddl_command_end
EXECUTE FUNCTION public.plsqlbench_guard_end()""",
)


#: Characters of a database message kept when it is received (an answer can raise megabytes).
MAX_MESSAGE = 4000

#: What a savepoint does not undo of an isolated test, undone after its rollback (``_after_script``
#: and, statement by statement, a batch).
_ISOLATED_UNDO = ("DEALLOCATE ALL", "SELECT pg_catalog.pg_advisory_unlock_all()")
#: What undoes an isolated test in a batch, after the test's own sync point: one statement at a
#: time (a pipeline takes no multi-statement string), the savepoint kept for the next test
#: instead of released and taken again.
_AFTER_BATCH_TEST = (b"ROLLBACK TO SAVEPOINT plsql_test", *(undo.encode() for undo in _ISOLATED_UNDO))
#: Whether the candidate can advance a sequence: nothing rolls that back, so a test run again
#: on its own after its batch would see a different value than in a run of its own.
_SEQUENCES_USABLE = (
    "SELECT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'S' "
    "THEN pg_catalog.has_sequence_privilege(c.oid, 'USAGE, UPDATE') ELSE false END)"
)
#: Every function the candidate owns made VOLATILE (``before_assert_tests``). The planner runs
#: an IMMUTABLE function with constant arguments while it plans the expression that calls it,
#: and there ``PG_CONTEXT`` shows the whole expression: ``IF f(5) IS DISTINCT FROM 7`` would
#: hand the answer its expected 7. A volatile function runs only when the expression does,
#: where the context names the test's line, not its text. Same results for the deterministic
#: functions the tests call; run in the candidate's session (its functions are in its
#: uncommitted task), every name schema-qualified.
_VOLATILE_ANSWERS = (
    "DO $seal$ DECLARE r record; BEGIN "
    "FOR r IN SELECT p.oid::pg_catalog.regprocedure AS f FROM pg_catalog.pg_proc p "
    "JOIN pg_catalog.pg_roles o ON o.oid OPERATOR(pg_catalog.=) p.proowner "
    "WHERE o.rolname OPERATOR(pg_catalog.=) CURRENT_USER AND p.prokind OPERATOR(pg_catalog.=) 'f' "
    "AND p.provolatile OPERATOR(pg_catalog.<>) 'v' "
    "LOOP EXECUTE pg_catalog.format('ALTER FUNCTION %s VOLATILE', r.f); END LOOP; END $seal$"
)
#: Bytes of test text sent before the batch's results are read (each send fits the socket's
#: buffers, so the results and notices of the tests already running never pile up unread).
_PIPELINE_CHUNK = 128 * 1024


class _PipelineBroken(Exception):
    """The batch's results did not come back in the shape it was sent in."""


def _wait(pgconn: Any, write: bool = False) -> None:
    """Until the connection's socket is readable (or writable): a wait the GIL is free in
    (``poll`` where there is one: ``select`` refuses descriptors past 1023)."""
    sock = pgconn.socket
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN | (select.POLLOUT if write else 0))
        readable = any(events & (select.POLLIN | select.POLLERR | select.POLLHUP) for _, events in poller.poll())
    else:
        readable = bool(select.select([sock], [sock] if write else [], [])[0])
    if readable:
        pgconn.consume_input()


def _flush(pgconn: Any) -> None:
    """Send all that is queued, reading meanwhile so the server never waits on us to write."""
    while pgconn.flush() == 1:
        _wait(pgconn, write=True)


def _next_result(pgconn: Any) -> Any:
    while pgconn.is_busy():
        _wait(pgconn)
        if pgconn.status != psycopg.pq.ConnStatus.OK:
            break
    return pgconn.get_result()


def _pipeline_result(pgconn: Any) -> Any:
    """The one result of the next statement in the pipeline (and the end of its results)."""
    res = _next_result(pgconn)
    if res is None or res.status == psycopg.pq.ExecStatus.PIPELINE_SYNC or _next_result(pgconn) is not None:
        raise _PipelineBroken
    return res


def _pipeline_sync(pgconn: Any) -> None:
    res = _next_result(pgconn)
    if res is None or res.status != psycopg.pq.ExecStatus.PIPELINE_SYNC:
        raise _PipelineBroken


def _clip_text(text: str, limit: int = MAX_MESSAGE) -> str:
    return text if len(text) <= limit else f"{text[:limit]} ... <{len(text) - limit} more characters>"


def _notice_text(diag: psycopg.errors.Diagnostic, room: int) -> str:
    """The notice's message, decoded only as far as the output cap has room for: a notice of
    hundreds of megabytes costs libpq's copy of it, never a Python string of the same size."""
    info = getattr(diag, "_info", None)
    raw = None
    try:
        raw = info.error_field(psycopg.pq.DiagnosticField.MESSAGE_PRIMARY) if info is not None \
            and not isinstance(info, dict) else None
    except Exception:  # noqa: BLE001 - a psycopg without this internal: decode it all
        raw = None
    if raw is None:
        return (diag.message_primary or "")[: max(room, 0) + 1]
    cut = raw[: 4 * max(room, 0) + 4]  # at most 4 bytes per character
    text = cut.decode(getattr(diag, "_encoding", "utf-8") or "utf-8", "replace")
    return text if len(cut) == len(raw) else text[: max(room, 0) + 1]


def _answer_error(exc: psycopg.Error, stmt: Statement, phase: Phase) -> DbError:
    """A statement's error on a live connection, as the answer's (the one reading of it that a
    test run on its own and a batch share)."""
    sqlstate = getattr(exc, "sqlstate", None)
    return DbError(_clip_text(str(exc).strip()), sqlstate, classify(sqlstate, phase), stmt.line)


def _changed_pins(pgconn: Any) -> list[str]:
    """The reported pinned settings a statement changed, from libpq's copy of what the server said."""
    return [name for name in _REPORTED_PINS
            if pgconn.parameter_status(name.encode()) != PINNED_SETTINGS[name].encode()]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return printable(text.splitlines()[0]) if text else type(exc).__name__  # logged as it is


def _rows_as_server_text(conn: psycopg.Connection[Any]) -> None:
    """Receive every built-in type as PostgreSQL's own text output.

    A row a test selects then reads exactly as ``RAISE NOTICE '%'`` of the same value prints
    (floats in shortest exact form, ``numeric`` with its scale, intervals, arrays ``{1,2}``,
    booleans ``t``/``f``), so gold rows, reference output and an answer's printed lines are
    formatted by one authority instead of by Python's ``str`` of a converted value.
    """
    for info in psycopg.postgres.types:
        conn.adapters.register_loader(info.oid, TextLoader)
        if info.array_oid:
            conn.adapters.register_loader(info.array_oid, TextLoader)


class _Watchdog:
    """Client-side second layer of the statement timeout.

    The candidate can change its own ``statement_timeout``; this thread cancels the running
    statement regardless, and terminates the backend if cancelling does not help. One thread
    per session, armed around each statement (a thread per statement cost more than the
    statements it watched). Cancelling and terminating happen under the lock, and
    :meth:`disarm` takes it: a late cancel can never reach the harness's next statement.
    """

    def __init__(self, session: PostgresSession) -> None:
        self.session = session
        #: Whether the watchdog cancelled the statement of the current arming.
        self.fired = False
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._cancelled = False
        self._stopped = False
        self._thread: threading.Thread | None = None
        #: When the thread wakes next on its own (inf: not before it is notified).
        self._wakes_at = math.inf

    def arm(self, timeout: float) -> None:
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                self._stopped = False
                self._wakes_at = math.inf
                self._thread = threading.Thread(target=self._watch, daemon=True, name="plsql-watchdog")
                self._thread.start()
            self.fired = self._cancelled = False
            self._deadline = time.monotonic() + timeout + 1.0
            if self._deadline < self._wakes_at:
                # Otherwise it wakes before this deadline anyway and waits on for the rest: one
                # wake-up per timeout, not one per statement (a batch arms it for every test).
                self._cond.notify()

    def disarm(self) -> None:
        with self._cond:  # waits for a cancel or terminate in progress
            self._deadline = None

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._deadline = None
            self._cond.notify()

    def _watch(self) -> None:
        with self._cond:
            while not self._stopped:
                deadline = self._deadline
                if deadline is None:
                    self._wakes_at = math.inf
                    self._cond.wait()
                    continue
                left = deadline - time.monotonic()
                if left > 0:
                    self._wakes_at = deadline
                    self._cond.wait(left)
                    continue
                self.fired = True
                if not self._cancelled:
                    self._cancelled = True
                    conn = self.session.conn
                    if conn is not None:
                        try:
                            conn.cancel_safe(timeout=2.0)
                        except Exception:  # noqa: BLE001 - best effort
                            pass
                    self._deadline = time.monotonic() + 3.0
                else:
                    self._deadline = None
                    # The answer's runaway statement: its timeout, not an outside termination.
                    self.session.backend.terminate(self.session.backend_pid, external=False)


class PostgresSession(Session):
    def __init__(self, backend: PostgresBackend) -> None:
        self.backend = backend
        self.conn: psycopg.Connection | None = None
        self.backend_pid: int | None = None
        self._out = OutputCapture(self.backend.settings.database.max_output)
        self._capture = False
        #: Set while a batch runs (``run_batch``), and whether a notice ``run`` would have
        #: captured arrived meanwhile (it cannot be told which test printed it).
        self._batching = False
        self._batch_noticed = False
        #: Batches run and discarded, tests a batch decided and tests it left to ``run``.
        self.batch_counts: collections.Counter[str] = collections.Counter()
        self._in_task = False
        self._broken_isolation = False
        self._savepoint: str | None = None
        #: A task's own ``SET LOCAL`` statement (a judge's search path, e.g. PLForge's Spider
        #: schema), applied again after the pinned settings are reset, until the task ends.
        self.task_setting: str | None = None
        #: A script of this task named a setting whose expiry ends the session (see SessionLost).
        self._limit_named = False
        #: A script of this task may have created a custom setting name (``_MAY_ADD_SETTINGS``).
        self._may_add_settings = False
        self._watchdog = _Watchdog(self)
        self.connect()

    # ----------------------------------------------------------------- connection
    def connect(self) -> None:
        self.close()
        try:
            conn = psycopg.connect(self.backend.candidate_dsn, autocommit=True, prepare_threshold=None,
                                   options=self.backend.pinned_options)
        except psycopg.Error as exc:
            raise InfrastructureError(f"cannot connect as the candidate role: {exc}") from exc
        conn.add_notice_handler(self._on_notice)
        _rows_as_server_text(conn)
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

    # ----------------------------------------------------------------- harness members
    def harness_sql(self, text: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[tuple[Any, ...]]:
        if self.conn is None or self.conn.closed:
            raise InfrastructureError("the candidate connection is closed")
        try:
            cur = self.conn.execute(text, params or None)  # no parameters: a % is no placeholder
            return cur.fetchall() if cur.description else []
        except (psycopg.Error, UnicodeError) as exc:
            raise self._harness_failure(exc) from exc

    def pin_setting(self, statement: str) -> None:
        """A ``SET LOCAL``, applied again after each kept script's reset of the pinned settings
        (``_after_script``) until the task ends."""
        assert self.conn is not None
        self.task_setting = statement
        self.conn.execute(statement)

    def reconnect(self) -> None:
        self.connect()

    @property
    def server_session_id(self) -> int:
        if self.backend_pid is None:
            raise InfrastructureError("the candidate session is not connected")
        return self.backend_pid

    @property
    def connection(self) -> Any:
        return self.conn

    def stop_watchdog(self) -> None:
        self._watchdog.stop()

    def _on_notice(self, diag: psycopg.errors.Diagnostic) -> None:
        # Only what the answer printed (RAISE ...), not server chatter such as
        # "function f() does not exist, skipping".
        if self._batching:
            if "at RAISE" in (diag.context or ""):
                self._batch_noticed = True
            return
        if not self._capture or self._out.truncated or "at RAISE" not in (diag.context or ""):
            return
        self._out.append(_notice_text(diag, self._out.limit - self._out.chars + 1))


    def _lost(self) -> bool:
        """The connection itself is gone (its own state, whatever error code came with it)."""
        conn = self.conn
        return conn is None or conn.closed or conn.broken or conn.pgconn.status != psycopg.pq.ConnStatus.OK

    def _lost_error(self, exc: BaseException, doing: str) -> SessionLost:
        sqlstate = getattr(exc, "sqlstate", None)
        server_died = self.backend.server is not None and not self.backend.server.alive()
        killed = self.backend_pid is not None and self.backend_pid in self.backend.terminated
        if killed:
            self.backend.terminated.discard(self.backend_pid)  # pids are reused: one loss per termination
        external = server_died or killed
        why = "the server process died" if server_died else _clip_text(_one_line(exc))
        return SessionLost(f"database connection lost {doing}: {why}", external=external,
                           limit_named=self._limit_named and sqlstate is None)

    def _exec(self, query: str | pgsql.SQL | pgsql.Composed) -> None:
        """Run a harness statement.

        The connection lost: :class:`SessionLost` (or the answer's own session limit fired).
        A failure on a live connection: the answer left the session unusable (``_SessionBroken``).
        """
        assert self.conn is not None
        try:
            # Bytes: the harness's statements never depend on the client encoding in force.
            self.conn.execute(query.encode() if isinstance(query, str) else query)
        except (psycopg.Error, UnicodeError) as exc:
            raise self._harness_failure(exc) from exc

    def _harness_failure(self, exc: BaseException) -> InfrastructureError:
        """What a harness statement's failure is: the answer's own session limit ended the
        connection, the connection was lost, or (live) the answer left the session unusable."""
        lost = self._lost()
        if lost and getattr(exc, "sqlstate", None) in _ANSWER_FATAL:
            return _EndedByAnswer(f"the answer's own session limit ended its connection: {_clip_text(str(exc).strip())}",
                                  getattr(exc, "sqlstate", None))
        if lost:
            return self._lost_error(exc, "between statements")
        return _SessionBroken(f"harness statement failed: {_clip_text(str(exc).strip())}")

    def _exec_each(self, queries: Sequence[bytes]) -> None:
        """Run harness statements one after another, each alone, in one round trip.

        Pipelined, with a sync point after each: every statement is its own implicit
        transaction, as when each is sent on its own (so ``DISCARD ALL``, which refuses a
        transaction block, may be one of them). A failure raises as :meth:`_exec` does, after all
        were tried; the caller then starts a new connection, whatever state this one is in.
        """
        assert self.conn is not None
        pgconn = self.conn.pgconn
        ok = (psycopg.pq.ExecStatus.COMMAND_OK, psycopg.pq.ExecStatus.TUPLES_OK)
        failed: str | None = None
        try:
            pgconn.enter_pipeline_mode()
            for query in queries:
                pgconn.send_query_params(query, None)
                pgconn.pipeline_sync()
            _flush(pgconn)
            for query in queries:
                res = _pipeline_result(pgconn)
                _pipeline_sync(pgconn)
                if res.status not in ok and failed is None:
                    failed = f"{query.decode()}: {(res.error_message or b'').decode(errors='replace').strip()}"
            pgconn.exit_pipeline_mode()
        except (psycopg.Error, _PipelineBroken) as exc:
            raise self._harness_failure(exc) from exc
        if failed is not None:
            raise _SessionBroken(f"harness statement failed: {_clip_text(failed)}")

    # ----------------------------------------------------------------- task scope
    def begin_task(self) -> None:
        if self.conn is None or self.conn.closed:
            self.connect()
        # _broken_isolation is left as it is: only end_task, after its janitor pass, clears it.
        self._exec("BEGIN")
        self._in_task = True

    def _restart_scope(self) -> None:
        """After the connection died under an answer: a new one in the same scope shape.

        The task's state is lost (``scope_epoch`` tells the runner to install the answers
        again) and the scratch schema is rebuilt at the end of the task.
        """
        in_task = self._in_task
        self.connect()
        self.scope_epoch += 1
        if in_task:
            self._exec("BEGIN")
            self._in_task = True
            self._broken_isolation = True
            if self._savepoint:
                self._exec(f"SAVEPOINT {self._savepoint}")

    def _note_settings(self, script: str) -> None:
        if not self._may_add_settings and _MAY_ADD_SETTINGS.search(script):
            self._may_add_settings = True

    def end_task(self) -> None:
        self._limit_named = False
        fresh, self._may_add_settings = self._may_add_settings, False
        if self.conn is None or self.conn.closed:
            self.connect()
            return
        if fresh:
            # A custom setting's name outlives ROLLBACK and DISCARD ALL: the next task gets a
            # backend that never saw it (closing this one rolls its transaction back).
            self._end_with(self.connect)
            return
        self._end_with(self._reset_connection)

    def _reset_connection(self) -> None:
        assert self.conn is not None
        # DISCARD ALL leaves random()'s generator as the answer seeded it (``setseed``): seeded
        # afresh from a strong source, as a new connection would be, so the next task's random
        # values are neither the last one's choice nor predictable from it.
        seed = secrets.randbelow(2**52) / 2**51 - 1.0
        ending = [b"ROLLBACK", b"DISCARD ALL", f"SELECT pg_catalog.setseed({seed!r})".encode()]
        if self.conn.info.server_version >= 150000:
            # The backend's pending statistics (``pg_stat_get_xact_*``, readable by anyone)
            # outlive a transaction until flushed, at most once a second: the next scope on
            # this connection -- the candidate's, after gold's -- would read how many rows
            # the last one wrote in each table. Flushed when the connection next goes idle.
            ending.append(b"SELECT pg_catalog.pg_stat_force_next_flush()")
        try:
            self._exec_each(ending)
        except InfrastructureError:
            self.connect()

    def _end_with(self, reset: Any) -> None:
        """End the task scope: ``reset`` the connection, then undo what escaped the transaction."""
        reset()
        self._in_task = False
        self.task_setting = None
        if self.backend.restore_role_settings():
            self.connect()  # its defaults were read when it connected
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
        if not self._limit_named:
            lowered = script.lower()
            self._limit_named = any(name in lowered for name in _SESSION_ENDING)
        self._note_settings(script)
        savepoint = "plsql_test" if isolated else "plsql_install"
        self._out = OutputCapture.into(result, self.backend.settings.database.max_output)
        t0 = time.monotonic()
        try:
            self._exec(f"SAVEPOINT {savepoint}")
        except _SessionBroken as exc:  # left so by the previous script (or the role's defaults)
            self._restart_scope()
            result.error = DbError(f"the answer left its session unusable: {exc}", None, classify(None, phase), None)
            return result
        self._savepoint = savepoint
        try:
            for stmt in statements:
                if not self._runnable(stmt, result):
                    continue
                error = self._run_statement(stmt, phase)
                if error is not None:
                    result.error = error
                    break
        except _SessionBroken as exc:
            # A harness statement between the answer's statements failed on a live connection.
            result.error = DbError(f"the answer left its session unusable: {exc}", None, classify(None, phase), None)
        finally:
            self._capture = False
            self._savepoint = None
            result.truncated = self._out.truncated
            try:
                self._after_script(savepoint, keep=not isolated and result.error is None)
            except _EndedByAnswer as exc:
                # A limit the script set on its own session fired right after it (e.g. a 1 ms
                # transaction_timeout): the script's failure, in a fresh scope.
                self._restart_scope()
                if result.error is None:
                    result.error = DbError(str(exc), exc.sqlstate, outcomes.TIMEOUT, None)
            except _SessionBroken as exc:
                # What the script left (a savepoint gone, a setting the harness cannot undo ...)
                # makes the harness's own statements fail: the script's failure, in a fresh scope.
                self._restart_scope()
                if result.error is None:
                    result.error = DbError(f"the answer left its session unusable: {exc}", None,
                                           classify(None, phase), None)
            result.duration_s = time.monotonic() - t0
        return result

    def before_assert_tests(self) -> DbError | None:
        if self.conn is None or self.conn.closed or not self._in_task:
            return None
        try:
            self._exec(f"SAVEPOINT plsql_seal; {_VOLATILE_ANSWERS}; RELEASE SAVEPOINT plsql_seal")
        except _SessionBroken as exc:
            # Fail closed: an answer whose functions stay foldable is not tested.
            try:
                self._exec("ROLLBACK TO SAVEPOINT plsql_seal; RELEASE SAVEPOINT plsql_seal")
            except _SessionBroken:
                self._restart_scope()
            return DbError(f"its functions could not be made volatile for testing: {exc}", None,
                           outcomes.INVALID_ARTIFACT, None)
        return None

    # ----------------------------------------------------------------- batches
    @staticmethod
    def batch_statement(script: str) -> Statement | None:
        """The one ``DO`` statement ``script`` is, if a batch may run it (a ``DO`` block returns
        no rows, and ``run`` would send it as it is)."""
        statements = split(script, "postgres")
        if len(statements) != 1:
            return None
        stmt = statements[0]
        return stmt if stmt.kind != "client" and stmt.first_words(1) == "DO" else None

    def run_batch(self, scripts: Sequence[str]) -> list[BatchResult | None] | None:
        """Run the ``DO`` scripts among ``scripts`` as isolated tests in one round trip.

        Each test is the very statement :meth:`run` sends, sent the same way (alone, over the
        extended protocol, as a top-level statement) and undone the same way; the statements are
        pipelined (libpq pipeline mode, a sync point after each test and after its undo) instead
        of each waiting for the one before. So a test's error is the server's own, and no test
        runs inside another statement: what an answer can see of what encloses it (its session's
        current query, ``PG_CONTEXT``) is its own test's statement, never the batch's others.

        The watchdog is armed per test. The whole batch is discarded (None) when the watchdog
        fired, the candidate can advance a sequence (a test run again would see it advanced), the
        task's time budget is close, or the results are not what was sent; a lost connection
        raises as in ``run``. A failed test's result is None (run it on its own) when a notice
        was printed during the batch (``run`` would have kept it) or the test changed a setting
        the driver reads.
        """
        if self.conn is None or self.conn.closed or not self._in_task:
            return None
        statements = [self.batch_statement(s) for s in scripts]
        chosen = [i for i, stmt in enumerate(statements) if stmt is not None]
        if len(chosen) < 2:
            return None
        for i in chosen:
            self._note_settings(scripts[i])
        timeout = self.backend.settings.database.timeout
        if self.deadline is not None and self.deadline - time.monotonic() < timeout + 2.0:
            return None  # near the task's time budget: test by test, as the budget is kept there
        encoding = self.conn.info.encoding
        try:
            texts = [statements[i].text.encode(encoding) for i in chosen]  # type: ignore[union-attr]
        except UnicodeError:
            return None  # ``run`` reports what the driver cannot send
        try:
            self._exec("SAVEPOINT plsql_test")
        except _SessionBroken:
            return None  # the tests run on their own and meet (and report) the same state
        try:
            usable = self.conn.execute(_SEQUENCES_USABLE.encode()).fetchone()
        except psycopg.Error as exc:
            if self._lost():
                raise self._lost_error(exc, "before a batch of tests") from exc
            usable = None
        if usable != ("f",):  # rows arrive as the server's text (``_rows_as_server_text``)
            try:
                self._after_script("plsql_test", keep=False)
            except (_SessionBroken, _EndedByAnswer):
                self._restart_scope()
            return None
        self.batch_counts["calls"] += 1
        watchdog = self._watchdog
        errors: list[Any] = []
        unsure: set[int] = set()
        durations: list[float] = []
        self._batching, self._batch_noticed = True, False
        try:
            fired, broken = self._pipeline(texts, errors, unsure, durations)
        except psycopg.Error as exc:
            broken, fired = True, watchdog.fired
            if self._lost() and not fired:
                raise self._lost_error(exc, "running a batch of tests") from exc
        finally:
            self._batching = False
        if broken or fired or self._lost():
            # Out of pipeline mode or not, the session is not known to be as ``run`` leaves it.
            self.batch_counts["discarded"] += 1
            self._restart_scope()
            return None
        try:
            self._restore_reported_pins()
            self._after_script("plsql_test", keep=False)
        except (_SessionBroken, _EndedByAnswer):
            self.batch_counts["discarded"] += 1
            self._restart_scope()
            return None
        if self.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            self.batch_counts["discarded"] += 1
            return None
        out: list[BatchResult | None] = [None] * len(scripts)
        for n, i in enumerate(chosen):
            res = errors[n]
            if res is None:
                out[i] = BatchResult(None, durations[n])
            elif not self._batch_noticed and n not in unsure:
                stmt = statements[i]
                assert stmt is not None
                # The error as the driver raises it for the statement run on its own (``_failed``).
                error = psycopg.errors.error_from_result(res, encoding=encoding)
                out[i] = BatchResult(_answer_error(error, stmt, "test"), durations[n])
        decided = sum(r is not None for r in out)
        self.batch_counts["decided"] += decided
        self.batch_counts["alone"] += len(chosen) - decided
        return out

    def _pipeline(self, texts: list[bytes], errors: list[Any], unsure: set[int],
                  durations: list[float]) -> tuple[bool, bool]:
        """Send ``texts`` as tests in pipeline mode and read their results back, in chunks.

        Fills ``errors`` (a failed test's result, None for a pass), ``unsure`` (tests that
        changed a setting the driver reads) and ``durations``; returns whether the watchdog fired
        and whether the results broke the expected shape (then the pipeline is left as it is and
        the caller starts the session again). The connection stays non-blocking and every wait
        is a ``poll`` outside the driver (``_wait``), so the watchdog's thread can cancel meanwhile.
        """
        assert self.conn is not None
        pgconn = self.conn.pgconn
        ES = psycopg.pq.ExecStatus
        watchdog = self._watchdog
        timeout = self.backend.settings.database.timeout
        fired = False
        pgconn.enter_pipeline_mode()
        try:
            sent = 0
            last = time.monotonic()
            while len(errors) < len(texts):
                size = 0
                while sent < len(texts) and (sent == len(errors) or size < _PIPELINE_CHUNK):
                    pgconn.send_query_params(texts[sent], None)
                    pgconn.pipeline_sync()
                    for undo in _AFTER_BATCH_TEST:
                        pgconn.send_query_params(undo, None)
                    pgconn.pipeline_sync()
                    size += len(texts[sent])
                    sent += 1
                _flush(pgconn)
                while len(errors) < sent:
                    budget = timeout
                    if self.deadline is not None:
                        budget = min(timeout, max(self.deadline - time.monotonic() - 1.0, 0.05))
                    watchdog.arm(budget)
                    try:
                        test = _pipeline_result(pgconn)
                        _pipeline_sync(pgconn)
                        if _changed_pins(pgconn):
                            unsure.add(len(errors))
                        undone = [_pipeline_result(pgconn) for _ in _AFTER_BATCH_TEST]
                        _pipeline_sync(pgconn)
                    finally:
                        watchdog.disarm()
                        fired = fired or watchdog.fired
                    if fired or any(r.status not in (ES.COMMAND_OK, ES.TUPLES_OK) for r in undone):
                        return fired, True
                    if test.status == ES.COMMAND_OK:
                        errors.append(None)
                    elif test.status == ES.FATAL_ERROR:
                        errors.append(test)
                    else:
                        return fired, True
                    now = time.monotonic()
                    durations.append(now - last)
                    last = now
            pgconn.exit_pipeline_mode()
        except _PipelineBroken:
            return fired, True
        return fired, False

    def _runnable(self, stmt: Statement, result: Execution) -> bool:
        if stmt.kind == "client":
            result.notes.append(f"skipped client command at line {stmt.line}: {stmt.text[:40]}")
            return False
        words = " ".join(stmt.first_words(2).split())
        if any(words == w or words.startswith(w + " ") for w in TXN_STARTS):
            # Transaction control would end the task's isolation scope.
            result.notes.append(f"ignored transaction control at line {stmt.line}: {words}")
            return False
        return True

    def _run_statement(self, stmt: Statement, phase: Phase) -> DbError | None:
        assert self.conn is not None
        if stmt.first_words(1) == "COPY" and _CLIENT_COPY.search(_code_only(stmt.text)):
            # COPY ... STDIN/STDOUT would leave the connection in the COPY sub-protocol.
            return DbError("COPY to or from the client (STDIN/STDOUT) is not supported; use SQL",
                           None, outcomes.INVALID_ARTIFACT, stmt.line)
        timeout = self.backend.settings.database.timeout
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                return DbError("the task's time budget is used up (--plsql-task-timeout)", None,
                               outcomes.TIMEOUT, stmt.line)
            if left < timeout:
                timeout = max(left - 1.0, 0.05)  # the watchdog adds its one second of grace
        watchdog = self._watchdog
        self._capture = True
        try:
            watchdog.arm(timeout)
            try:
                with self.conn.cursor() as cur:
                    # Always the extended protocol: the server refuses a string holding more than
                    # one statement, so it runs exactly the statement the splitter and the safety
                    # check saw (a splitter/server disagreement is an error, never hidden SQL).
                    self._stream_rows(cur, stmt.text)
            finally:
                watchdog.disarm()
        except psycopg.Error as exc:
            self._restore_reported_pins()
            return self._failed(exc, stmt, phase, watchdog.fired)
        except (UnicodeError, ValueError, OverflowError) as exc:
            # A result the driver cannot read (the answer changed client_encoding mid-statement,
            # a value out of Python's range ...): the answer's failure.
            if self._lost() or self.conn.info.transaction_status == psycopg.pq.TransactionStatus.ACTIVE:
                self._restart_scope()
            return DbError(f"unreadable result: {_clip_text(_one_line(exc))}", None, classify(None, phase), stmt.line)
        finally:
            self._capture = False
        self._restore_reported_pins()
        if self._in_task and self.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            # Something ended our transaction despite the filter; restore the scope shape.
            self._broken_isolation = True
            self._exec("BEGIN")
            if self._savepoint:
                self._exec(f"SAVEPOINT {self._savepoint}")
        return None

    def _restore_reported_pins(self) -> None:
        """Put back at once the pinned settings the lexer and the driver read, if a statement
        changed them: the script's later statements were split with their values, and the
        driver cannot even encode a query in some encodings (``EUC_TW``). Read from libpq's
        own copy of what the server reported, reset below psycopg's encoding layer."""
        pgconn = self.conn.pgconn if self.conn is not None else None
        if pgconn is None or pgconn.status != psycopg.pq.ConnStatus.OK:
            return
        changed = _changed_pins(pgconn)
        if not changed:
            return
        status = pgconn.transaction_status
        if status == psycopg.pq.TransactionStatus.INERROR:
            return  # the harness's ROLLBACK TO SAVEPOINT comes next and restores them
        res = pgconn.exec_("; ".join(f"RESET {name}" for name in changed).encode())
        if res.status != psycopg.pq.ExecStatus.COMMAND_OK:
            raise _SessionBroken(f"could not restore {', '.join(changed)}")

    def _failed(self, exc: psycopg.Error, stmt: Statement, phase: Phase, timed_out: bool) -> DbError:
        """Classify a failed statement; raise InfrastructureError when the harness lost the database."""
        assert self.conn is not None
        sqlstate = getattr(exc, "sqlstate", None)
        lost = self._lost()
        timeout = self.backend.settings.database.timeout
        if timed_out or (lost and sqlstate in _ANSWER_FATAL):
            if lost:
                self._restart_scope()
            budget_cut = self.deadline is not None and time.monotonic() >= self.deadline - 0.5
            why = ("the task's time budget ran out during this statement (--plsql-task-timeout)" if timed_out and budget_cut
                   else f"statement ran longer than {timeout:g}s and was cancelled" if timed_out
                   else f"the answer's own session limit ended its connection: {str(exc).strip()}")
            return DbError(why, sqlstate, outcomes.TIMEOUT, stmt.line)
        if lost:
            raise self._lost_error(exc, f"running script line {stmt.line}") from exc
        if self.conn.info.transaction_status == psycopg.pq.TransactionStatus.ACTIVE:
            # The protocol is mid-command (should not happen after the COPY guard): start over.
            self._restart_scope()
            return DbError(f"the statement left the connection unusable: {exc}", sqlstate,
                           outcomes.INVALID_ARTIFACT, stmt.line)
        return _answer_error(exc, stmt, phase)

    def _stream_rows(self, cur: psycopg.Cursor[Any], text: str) -> None:
        """Run one statement, keeping at most MAX_ROWS rows / max_output characters of its result.

        Rows arrive in chunks and are dropped once the cap is reached, so a huge result costs
        time (bounded by the statement timeout), never the harness's memory.
        """
        assert self.conn is not None
        size = ROW_CHUNK if psycopg.capabilities.has_stream_chunked() else 1
        void: bool | None = None
        try:
            for n, row in enumerate(cur.stream(text, size=size)):
                if void is None:
                    void = all(col.type_code == VOID_OID for col in cur.description or ())
                if not void and not self._out.truncated:
                    if n < MAX_ROWS:
                        self._out.append_row(format_row(row))
                    else:  # said, as the character cap is: a cut result never reads as a whole one
                        self._out.cut(f"<result truncated at {MAX_ROWS} rows>")
        except psycopg.ProgrammingError as exc:
            # stream() reports a statement without a result set (DDL, DO, CALL ...) this way,
            # after reading it to the end.
            idle = self.conn.info.transaction_status != psycopg.pq.TransactionStatus.ACTIVE
            if getattr(exc, "sqlstate", None) is None and idle and "didn't produce a result" in str(exc):
                return
            raise

    def _after_script(self, savepoint: str, keep: bool) -> None:
        if self.conn is None or self.conn.closed:
            return
        status = self.conn.info.transaction_status
        if status == psycopg.pq.TransactionStatus.IDLE:
            self._exec("BEGIN")
            self._broken_isolation = True
            return
        # One round trip (a simple-protocol string of harness statements, stopping at the first
        # that fails, which fails the whole call as before).
        if keep:
            # An answer's SET of its own limits and of the settings the harness reads must not
            # outlive its script (e.g. an idle timeout of 1ms firing between the harness's
            # statements, a client_encoding the driver cannot decode).
            again = f"; {self.task_setting}" if self.task_setting else ""
            self._exec(f"RELEASE SAVEPOINT {savepoint}; {self.backend.setting_reset}{again}")
        else:
            # What a savepoint does not undo must not reach the next test either.
            self._exec("; ".join((f"ROLLBACK TO SAVEPOINT {savepoint}", f"RELEASE SAVEPOINT {savepoint}",
                                  *_ISOLATED_UNDO)))


class PostgresBackend(Backend):
    dialect = "postgres"

    def __init__(self, settings: Settings, worker: str = "main") -> None:
        super().__init__()
        self.settings = settings
        self.worker = worker
        self.server: EmbeddedServer | None = None
        self.container: Any = None  # testcontainers' PostgresContainer (untyped)
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
        #: Backends the harness terminated (``terminate``): their loss is not the answer's.
        self.terminated: set[int] = set()
        #: ``RESET`` of every pinned setting and limit the server knows (after each kept script).
        self.setting_reset = "; ".join(f"RESET {name}" for name in (*PINNED_SETTINGS, *_LIMIT_SETTINGS))
        #: The candidate connection's startup options (see PINNED_SETTINGS).
        self.pinned_options = ""
        #: pg_db_role_setting rows of the candidate and the database as provisioned.
        self._role_settings: list[tuple[Any, ...]] = []
        #: Pristine data directories and their copies (:mod:`.pg_pristine`), made on first use.
        self._pristines: Any = None
        #: The copy the sessions use now (``serve``), and the worker's own server's connection
        #: facts while one does.
        self.copy: Any = None
        self._home: tuple[Any, ...] | None = None

    # ----------------------------------------------------------------- lifecycle
    @property
    def version(self) -> str:
        return self._version

    def start(self) -> None:
        kind = self.settings.database.kind
        try:
            if kind == "embedded":
                from .pg_server import EmbeddedServer

                self.server = EmbeddedServer(self.worker)
                self.admin_dsn = self.server.start()
            elif kind == "container":
                self.admin_dsn = self._start_container()
            elif kind == "dsn":
                assert self.settings.database.dsn
                self.admin_dsn = self.settings.database.dsn
                suffix = f"{self.worker}_{secrets.token_hex(3)}".lower()
                self.dbname = f"plsqlbench_{suffix}"
                self.role = f"plsqlbench_cand_{suffix}"
                self._password = secrets.token_urlsafe(18)
            else:  # pragma: no cover - settings validate this
                raise UsageError(f"unknown --plsql-db {kind!r}")
            self._provision()
        except BaseException:
            self.stop()  # a half-started server or container is not left behind
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
                    raise InfrastructureError(f"cannot connect to PostgreSQL: {_one_line(exc)}") from exc
                time.sleep(0.2)
            except psycopg.Error as exc:  # e.g. a malformed connection string: retrying cannot help
                raise InfrastructureError(f"cannot connect to PostgreSQL: {_one_line(exc)}") from exc

    def _provision(self) -> None:
        server_admin = self._admin_connect(self.admin_dsn)
        try:
            self._version = "PostgreSQL " + str(_scalar(server_admin, "SHOW server_version")).split()[0]
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
        t = self.settings.database.timeout
        for stmt in (
            pgsql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(db),
            pgsql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(db, role),
            pgsql.SQL("REVOKE CREATE ON SCHEMA public FROM PUBLIC"),
            pgsql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(role),
            pgsql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(pgsql.Identifier(SCRATCH), role),
            pgsql.SQL("ALTER ROLE {} IN DATABASE {} SET search_path = {}").format(role, db, pgsql.SQL(SEARCH_PATH)),
            pgsql.SQL("ALTER ROLE {} SET statement_timeout = {}").format(role, pgsql.Literal(f"{int(t * 1000)}ms")),
            pgsql.SQL("ALTER ROLE {} SET lock_timeout = {}").format(role, pgsql.Literal(f"{int(t * 1000)}ms")),
            pgsql.SQL("ALTER ROLE {} SET idle_in_transaction_session_timeout = '30min'").format(role),
            pgsql.SQL("ALTER ROLE {} SET client_min_messages = 'notice'").format(role),
        ):
            self.admin.execute(stmt)
        self._restrict_candidate()
        if self.settings.database.kind == "embedded":
            # A throwaway cluster: no fsync. Commits stay synchronous, so fixtures loaded before
            # the server is killed are still there after its restart.
            for setting in ("fsync = off", "full_page_writes = off"):
                self.admin.execute(f"ALTER SYSTEM SET {setting}")
            self.admin.execute("SELECT pg_reload_conf()")
        params: dict[str, str] = {"user": self.role}
        if self._password:
            params["password"] = self._password
        self.candidate_dsn = _dsn_with(self.db_dsn, **params)

    def _restrict_candidate(self) -> None:
        """What plain grants cannot express; each step needs a superuser (embedded, container).

        With a less privileged ``--plsql-dsn`` user a step is skipped with a warning.
        """
        assert self.admin is not None
        role = pgsql.Identifier(self.role)
        steps = [pgsql.SQL("ALTER ROLE {} SET temp_file_limit = {}").format(role, pgsql.Literal(TEMP_FILE_LIMIT))]
        steps += [pgsql.SQL(sql).format(role=pgsql.Literal(self.role), scratch=pgsql.Literal(SCRATCH)) for sql in _GUARD_SQL]
        for (proc,) in self.admin.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'pg_catalog'::regnamespace "
            "AND (p.proname = ANY(%s) OR " + _CUMULATIVE_STATS + ")", (list(_REVOKED_FUNCTIONS),)
        ).fetchall():
            steps.append(pgsql.SQL("REVOKE EXECUTE ON FUNCTION {} FROM PUBLIC").format(pgsql.SQL(proc)))
        steps += [pgsql.SQL("REVOKE SELECT ON pg_catalog.{} FROM PUBLIC").format(pgsql.Identifier(view))
                  for view in _REVOKED_VIEWS]
        for step in steps:
            try:
                self.admin.execute(step)
            except psycopg.errors.InsufficientPrivilege as exc:
                log.warning("containment step skipped (%s): %s", exc.diag.message_primary, step.as_string(self.admin))
        limits = _LIMIT_SETTINGS + (("transaction_timeout",) if self.admin.info.server_version >= 170000 else ())
        self.setting_reset = "; ".join(f"RESET {name}" for name in (*PINNED_SETTINGS, *limits))
        pins = dict(PINNED_SETTINGS)
        pins["TimeZone"] = str(_scalar(self.admin, "SHOW TimeZone"))
        pins["statement_timeout"] = pins["lock_timeout"] = f"{int(self.settings.database.timeout * 1000)}ms"
        pins["idle_in_transaction_session_timeout"] = "30min"
        if "transaction_timeout" in limits:
            pins["transaction_timeout"] = "0"
        self.pinned_options = " ".join(
            "-c {}={}".format(name, value.replace("\\", "\\\\").replace(" ", "\\ ")) for name, value in pins.items()
        )
        self._role_settings = self._current_role_settings()
        bad = self.admin.execute(
            "SELECT string_agg(r.rolname, ', ') FROM pg_roles r JOIN pg_roles c ON c.rolname = %s "
            "WHERE (r.oid <> c.oid AND pg_has_role(c.oid, r.oid, 'MEMBER')) OR (r.oid = c.oid AND r.rolsuper)",
            (self.role,),
        ).fetchone()
        if bad and bad[0]:
            raise UsageError(f"the candidate role {self.role} must be an unprivileged role, but it is/has {bad[0]}")

    def _current_role_settings(self) -> list[tuple[Any, ...]]:
        assert self.admin is not None
        return self.admin.execute(
            "SELECT s.setdatabase, s.setrole, s.setconfig FROM pg_catalog.pg_db_role_setting s "
            "WHERE s.setrole = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = %s) "
            "OR (s.setrole = 0 AND s.setdatabase = (SELECT oid FROM pg_catalog.pg_database "
            "WHERE datname = pg_catalog.current_database())) ORDER BY 1, 2",
            (self.role,),
        ).fetchall()

    def restore_role_settings(self) -> bool:
        """Put the candidate's role and database defaults back as provisioned (True if they changed).

        An ordinary role may ``ALTER ROLE CURRENT_USER SET ...`` its own defaults, which no event
        trigger sees; inside the task's transaction that is rolled back, and this check (one
        query per task, on the harness's connection) makes sure nothing that escaped it reaches
        the next task's connection.
        """
        assert self.admin is not None
        if self._current_role_settings() == self._role_settings:
            return False
        log.warning("the candidate role's or the database's defaults were changed; restoring them")
        with self.admin.transaction():
            role, db = pgsql.Identifier(self.role), pgsql.Identifier(self.dbname)
            self.admin.execute(pgsql.SQL("ALTER ROLE {} RESET ALL").format(role))
            self.admin.execute(pgsql.SQL("ALTER ROLE {} IN DATABASE {} RESET ALL").format(role, db))
            self.admin.execute(pgsql.SQL("ALTER DATABASE {} RESET ALL").format(db))
            for db_oid, _role_oid, config in self._role_settings:
                for item in config or ():
                    name, _, raw = item.partition("=")
                    # Our own provisioned values; a list setting is written as a list, not one string.
                    value = pgsql.SQL(raw) if name == "search_path" else pgsql.Literal(raw)
                    where = pgsql.SQL(" IN DATABASE {}").format(db) if db_oid else pgsql.SQL("")
                    target = pgsql.SQL("ALTER ROLE {}{} SET {} = {}").format(role, where, pgsql.Identifier(name), value)
                    self.admin.execute(target)
        return True

    @property
    def pristines(self) -> Any:
        """The worker's :class:`.pg_pristine.PristineStore`."""
        if self._pristines is None:
            from .pg_pristine import PristineStore

            self._pristines = PristineStore(self)
        return self._pristines

    def pristine_builder(self, admin_dsn: str) -> PostgresBackend:
        """A backend provisioned as this one (database, candidate role, grants, limits) on the
        server at ``admin_dsn``: what builds a pristine data directory (:mod:`.pg_pristine`)."""
        builder = PostgresBackend(self.settings, self.worker)
        builder.dbname, builder.role = self.dbname, self.role
        builder.admin_dsn = admin_dsn
        try:
            builder._provision()
        except BaseException:
            builder.admin_dsn = ""  # its stop must not drop objects of a server it does not own
            builder.stop()
            raise
        return builder

    def serve(self, copy: Any) -> None:
        """Point the candidate session, the admin connection, the watchdog's terminations and
        recovery at ``copy`` (a :class:`.pg_pristine.Copy`), or back at the worker's own
        server (None). The copy served before is discarded. Called between task scopes."""
        if copy is None and self.copy is None:
            return
        if self._session is not None:
            self._session.close()
        old = self.copy
        if old is not None:
            if self.admin is not None:
                with contextlib.suppress(Exception):
                    self.admin.close()
        else:
            self._home = (self.server, self.admin, self.admin_dsn, self.db_dsn, self.candidate_dsn, self._role_settings)
        if copy is None:
            assert self._home is not None
            (self.server, self.admin, self.admin_dsn, self.db_dsn, self.candidate_dsn,
             self._role_settings) = self._home
            self._home = None
        else:
            self.server, self.admin_dsn = copy.server, copy.admin_dsn
            self.db_dsn, self.candidate_dsn = copy.db_dsn, copy.candidate_dsn
            self._role_settings = list(copy.pristine.role_settings)
            self.admin = self._admin_connect(copy.db_dsn)
        self.copy = copy
        if old is not None:
            self.pristines.discard(old)
        if self._session is not None:
            self._session.connect()

    def stop(self) -> None:
        if self.copy is not None:
            with contextlib.suppress(Exception):
                self.serve(None)
        if self._pristines is not None:
            self._pristines.close()
            self._pristines = None
        if self._session is not None:
            self._session.close()
            self._session.stop_watchdog()
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
    def _load(self, fixture: Fixture) -> None:
        assert self.admin is not None
        role = pgsql.Identifier(self.role)
        line: int | None = None
        try:
            with self.admin.transaction():
                self.admin.execute("SET LOCAL search_path = public")
                for stmt in split(fixture.script, "postgres"):
                    if stmt.kind != "client":
                        line = stmt.line
                        try:
                            self.admin.execute(stmt.text)
                        except psycopg.Error as exc:
                            line = _error_line(stmt.text, stmt.line, exc)
                            raise
                line = None
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
            message = (exc.diag.message_primary or str(exc).strip().splitlines()[0]).strip()
            raise FixtureError(fixture.load_error(line, message)) from exc

    def allow_writes(self, schemas: Sequence[str]) -> None:
        """INSERT/UPDATE/DELETE on the schemas' tables and nextval on their sequences for the
        candidate (ProcArena): every write stays inside the task's transaction, which is rolled back."""
        assert self.admin is not None
        for schema in schemas:
            self.admin.execute(pgsql.SQL("GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {} TO {}").format(
                pgsql.Identifier(schema), pgsql.Identifier(self.role)))
            # nextval on the schema's sequences (not rolled back: each contender's own server,
            # or the judge's restore on a shared one, puts them back).
            self.admin.execute(pgsql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {} TO {}").format(
                pgsql.Identifier(schema), pgsql.Identifier(self.role)))

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

    # ----------------------------------------------------------------- harness members
    @property
    def candidate_schema(self) -> str:
        return SCRATCH

    @property
    def candidate_role(self) -> str:
        return self.role

    def admin_sql(
        self, text: str, params: Sequence[Any] | Mapping[str, Any] = (), *, ignore: Iterable[str] = ()
    ) -> list[tuple[Any, ...]]:
        """``ignore``: SQLSTATEs that give no rows."""
        if self.admin is None:
            raise InfrastructureError("the admin connection is closed")
        try:
            cur = self.admin.execute(text, params or None)  # no parameters: a % is no placeholder
            return cur.fetchall() if cur.description else []
        except psycopg.Error as exc:
            if exc.sqlstate is not None and exc.sqlstate in set(ignore):
                return []
            raise InfrastructureError(f"{_one_line(exc)} (while running: {text[:80]})") from exc

    def admin_commit(self) -> None:
        if self.admin is not None:
            self.admin.commit()

    # ----------------------------------------------------------------- sessions
    def session(self) -> PostgresSession:
        if self._session is None:
            self._session = PostgresSession(self)
        return self._session

    def terminate(self, pid: int | None, *, external: bool = True) -> None:
        """End a backend from the admin side; ``external``: a loss it causes is the harness's
        (``SessionLost.external``), which the backend's own error code can never say."""
        if pid is None:
            return
        if external:
            self.terminated.add(pid)
        try:
            with psycopg.connect(self.db_dsn, autocommit=True, connect_timeout=5) as conn:
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
        """Bring the server (restarting an embedded one that died), the admin and the candidate
        connections back; raise InfrastructureError if that fails for RECOVERY_S seconds.

        Polls rather than deciding once: a killed postmaster can still look alive for a moment
        after its backends are gone, and a server restarting after a backend crash refuses
        connections while it recovers.
        """
        deadline = time.monotonic() + RECOVERY_S
        while True:
            if self.server is not None and not self.server.alive():
                log.warning("the embedded PostgreSQL server died; restarting it")
                self.server.restart()
            if self.alive():
                break
            if self.admin is not None:
                try:
                    self.admin.close()
                except Exception:  # noqa: BLE001
                    pass
                self.admin = None
            try:
                self.admin = psycopg.connect(self.db_dsn, autocommit=True)
                break
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline:
                    raise InfrastructureError(f"cannot reconnect to PostgreSQL: {exc}") from exc
                time.sleep(0.2)
        if self._session is not None:
            self._session.connect()


def _error_line(text: str, first_line: int, exc: psycopg.Error) -> int:
    """The script line of a failed statement's error: PostgreSQL's character position in the
    statement (1-based, when it gives one), else the statement's first line."""
    try:
        position = int(exc.diag.statement_position or 0)
    except (TypeError, ValueError):
        position = 0
    if position <= 0:
        return first_line
    return first_line + text[: position - 1].count("\n")


def _scalar(conn: psycopg.Connection, query: str) -> Any:
    """The one value a harness query (SHOW ...) returns."""
    row = conn.execute(query).fetchone()
    if row is None:
        raise InfrastructureError(f"the server returned no row for {query!r}")
    return row[0]

"""Oracle's bench for B2: the task's tables scaled, every run from the same scaled rows, the
fixture's rows back at the end.

In Oracle a call may COMMIT (and DDL commits), so a transaction cannot hold the scaled state as
on PostgreSQL. Instead, on entering:

1. the fixture state is restored (``PA$`` shadows, :mod:`..oracle_restore`) and the tables are
   grown by the admin (:func:`.scale.ora_scale`: inserts, optimizer statistics, COMMIT);
2. the scaled tables are copied (``PA$$<table>``, :data:`..oracle_restore.SCALED_PREFIX`).

A run (:meth:`OraBench.run`) opens a new candidate connection (session settings a contender
changes -- optimizer parameters, say -- would otherwise carry over into the next contender's run;
PostgreSQL's rollback undoes a SET) and a task scope on it, disables parallel query, installs the contender and runs the calls (both timed; the work counter is read around
the calls, :mod:`.work`), keeps the final state if asked; then -- whatever happened, an error or
a timeout included -- ends the scope (rollback, the janitor drops what the contender created,
package state reset) and puts the scaled rows back from the ``PA$$`` copies. On leaving, the
copies are dropped and the fixture's rows are restored from the ``PA$`` shadows, even after a
failure; an interrupted process leaves rows the next task's restore replaces.

The statement timeout is the candidate connection's call timeout (``--plsql-timeout`` per round
trip, :mod:`...dialects.oracle.session`); a call past it is cancelled, its session ended and a new
one opened. The task's schema must be held by this worker meanwhile: inside a task run the
call-suite judge holds it already; ``hold=True`` (``plsqlbench validate``) takes the hold here.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ... import outcomes
from ...dialects.base import Backend
from ...dialects.oracle import OracleBackend
from .. import state as st
from ..oracle_restore import SCALED_PREFIX, Restorer
from . import scale as sc
from .runs import NotMeasured, Run
from .work import ORA_MEASURE, CounterUnavailable, OraCounter, Work, ora_counter

log = logging.getLogger(__name__)

#: Ignored when the admin reads V$SESSTAT: no such view for it, or no privilege (then no rows).
_NO_ACCESS = ("ORA-00942", "ORA-01031")
#: Rows per executemany when scaling.
BATCH = 5000
#: Session settings of every run (before the counter's first read, so they are not counted).
RUN_SETTINGS = ("ALTER SESSION DISABLE PARALLEL QUERY", "ALTER SESSION DISABLE PARALLEL DML")


class OraBench:
    """The scaled tables of one task on the worker's candidate session (see the module doc)."""

    MEASURE = ORA_MEASURE
    #: Unmeasured rounds first: the runs share the session's caches and the restored tables.
    WARMUP = 2

    def __init__(self, backend: Backend, schema: str, calls: Sequence[str], scale_rows: int,
                 scale: Mapping[str, int] | None = None, seed: int = 0, hold: bool = False) -> None:
        if not isinstance(backend, OracleBackend):  # the admin's bulk inserts and its user name
            raise TypeError(f"OraBench needs an OracleBackend, not {type(backend).__name__}")
        self.backend = backend
        self.owner = schema.upper()
        self.calls = list(calls)
        self.scale_rows = scale_rows
        self.scale = dict(scale or {})
        self.seed = seed
        self.hold = hold
        self.plan: Any = None
        self.counter: OraCounter | None = None
        self.scaled: Restorer | None = None
        self._stack = contextlib.ExitStack()

    @property
    def counter_source(self) -> str:
        return self.counter.source if self.counter else ""

    # ----------------------------------------------------------------- admin SQL
    def _sql(self, text: str, params: Sequence[Any]) -> list:
        return self.backend.admin_sql(text, params)

    def _many(self, text: str, rows: list[list[Any]]) -> None:
        from ...errors import InfrastructureError

        try:
            with self.backend.admin.cursor() as cur:
                for start in range(0, len(rows), BATCH):
                    cur.executemany(text, rows[start:start + BATCH])
        except Exception as exc:  # the driver's error, with the statement
            raise InfrastructureError(f"B2 scaling failed: {str(exc).strip()} (while running: {text[:80]})") from exc

    # ----------------------------------------------------------------- scope
    def __enter__(self) -> OraBench:
        backend = self.backend
        self.session = backend.session()
        admin_user = str((backend.admin_dsn.user if backend.admin_dsn is not None else "") or "the admin user").upper()
        try:  # before anything changes: a missing privilege costs nothing
            self.counter = ora_counter(
                lambda text, params: self.session.harness_sql(text, params),
                lambda text, params: backend.admin_sql(text, params, ignore=_NO_ACCESS),
                lambda: self.session.server_session_id, backend.candidate_role, admin_user)
        except CounterUnavailable as exc:
            raise NotMeasured(str(exc)) from None
        try:
            self.clean = Restorer.for_backend(backend, self.owner)
            if self.hold:
                self._stack.enter_context(self.clean.exclusive(backend))
            self._stack.callback(self._finish)
            self.clean.restore()  # the scaler grows the fixture's rows, whatever an earlier run left
            self.plan = sc.ora_scale(self._sql, self._many, self.owner, self.scale_rows, self.scale, self.seed)
            self.scaled = Restorer(self.owner, self._sql, backend.admin_commit, prefix=SCALED_PREFIX)
            self.scaled.make_shadows()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _finish(self) -> None:
        """Drop the scaled copies and put the fixture's rows back (then its statistics)."""
        try:
            if self.scaled is not None:
                self.scaled.drop_shadows()
        finally:
            self.clean.restore()
        for table in self.clean.order:  # fixture-size optimizer statistics again (best effort)
            try:
                self._sql(sc.ORA_STATS, [self.owner, table])
            except Exception as exc:  # noqa: BLE001 - statistics only change plans, not results
                log.info("B2: statistics of %s.%s not refreshed: %s", self.owner, table, exc)

    # ----------------------------------------------------------------- one run
    def run(self, code: str, keep_state: bool = False) -> Run:
        session = self.session
        assert self.counter is not None and self.scaled is not None
        # A connection of its own: what a contender sets in its session (optimizer parameters,
        # package state, temporary rows) must not slow or speed up the next contender's run.
        session.reconnect()
        session.begin_task()
        try:
            for text in RUN_SETTINGS:
                session.harness_sql(text)
            t0 = time.perf_counter()
            install = session.run(code, isolated=False, phase="install")
            seconds = time.perf_counter() - t0
            raised: list[str | None] = []
            timed_out = install.error is not None and install.error.failure_class == outcomes.TIMEOUT
            work = Work({}, ORA_MEASURE)
            if install.error is None:
                before = self.counter.read()
                t0 = time.perf_counter()
                for call in self.calls:
                    done = session.run(call, isolated=False, phase="test")
                    raised.append(None if done.error is None else (done.error.code or done.error.failure_class))
                    if done.error is not None and done.error.failure_class == outcomes.TIMEOUT:
                        timed_out = True  # the session was replaced: its counts start afresh
                        break
                seconds += time.perf_counter() - t0
                if not timed_out:
                    work = self.counter.read() - before
            state = None
            if keep_state and install.error is None and not timed_out:
                state = st.ora_snapshot(session.connection, [self.owner, self.backend.candidate_schema])
            error = install.error.short() if install.error is not None else None
            return Run(seconds, work, tuple(raised), error, state, timed_out)
        finally:
            try:
                session.end_task()
            finally:
                self.scaled.restore()

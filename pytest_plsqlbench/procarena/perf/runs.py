"""What one run of a B2 bench gives back, shared by every bench (:mod:`.timing`, :mod:`.fresh`,
:mod:`.oracle`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .work import Work


class NotMeasured(Exception):
    """The bench cannot measure on this database (the message says why and what to do)."""


@dataclass
class Run:
    """One contender's run: time, work, what each call raised (None: nothing), and the state."""

    seconds: float
    work: Work
    raised: tuple[str | None, ...] = ()
    install_error: str | None = None
    state: Any = None
    #: A statement ran past the statement timeout: the contender is not run again.
    timed_out: bool = False
    #: Wall-clock seconds of the run (``seconds`` is the bench's clock: CPU time where it can).
    wall_s: float | None = None
    #: A run of the checked contender (the answer) came before this one.
    after_checked: bool = False


def timed_run(session: Any, code: str, calls: Sequence[str], clock: Callable[[], float],
              schemas: Sequence[str], keep_state: bool) -> Run:
    """One contender's timed run on PostgreSQL, inside the session's task scope: install
    ``code``, run ``calls`` until one times out, and read the clock, the work counter and (with
    ``keep_state``) the state. Both benches (a fresh copy per run, or refilled tables) time a run
    through this one function, so what is measured is the same whichever prepared the run."""
    from ... import outcomes
    from .. import state as st
    from .work import Work, pg_counts, pg_dropped_blocks, pg_oid_mark

    before = pg_counts(session.connection)
    first_oid = pg_oid_mark(session.connection)
    t0, c0 = time.perf_counter(), clock()
    install = session.run(code, isolated=False, phase="install")
    raised: list[str | None] = []
    timed_out = install.error is not None and install.error.failure_class == outcomes.TIMEOUT
    if install.error is None:
        for call in calls:
            done = session.run(call, isolated=False, phase="test")
            raised.append(None if done.error is None else (done.error.code or done.error.failure_class))
            if done.error is not None and done.error.failure_class == outcomes.TIMEOUT:
                timed_out = True
                break
    wall = time.perf_counter() - t0
    try:
        seconds = clock() - c0
    except OSError:  # the session had to reconnect (a timeout): that backend is gone
        seconds = wall
    conn = session.connection  # the session's connection now (a timeout may have replaced it)
    work = pg_counts(conn) - before
    if not timed_out:  # a timeout's new connection has neither the counts nor the marks
        dropped = pg_dropped_blocks(conn, first_oid, pg_oid_mark(conn))
        if dropped:
            counts = dict(work.counts)
            counts["buffers"] = counts.get("buffers", 0) + dropped
            counts["dropped_buffers"] = dropped
            work = Work(counts, work.measure)
    state = None
    if keep_state and install.error is None:
        before_state = pg_counts(conn)
        state = st.pg_snapshot(conn, list(schemas))
        if not timed_out:  # the snapshot's reads are the harness's (benches that count a window)
            counts = dict(work.counts)
            counts["state_buffers"] = (pg_counts(conn) - before_state).value
            work = Work(counts, work.measure)
    error = install.error.short() if install.error is not None else None
    return Run(seconds, work, tuple(raised), error, state, timed_out, wall_s=wall)

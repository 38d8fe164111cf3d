"""B2's bench on the embedded server: every run on a server of its own, started from a pristine
copy of the scaled database (:mod:`...dialects.pg_pristine`, issue 28).

Guarantee: each run -- every warm-up and every measured run of every contender -- is the only
thing that ever ran on its server. Its data directory is a byte-for-byte copy of one made once
per task and worker: the fixtures, the task's tables grown to their scale (:mod:`.scale`),
``VACUUM (ANALYZE)``, a clean shutdown. So no run meets a row version, index entry, page,
statistic, sequence value, setting name or transaction id that another run left, and a
contender cannot tell one of its runs from another: the first warm-up run and the fifth
measured one see the same server in the same state. The copies run with autovacuum off and
with ``max_worker_processes = 0`` (written into the scaled pristine): no parallel worker can
start, so every block and CPU second of a run is its backend's (:mod:`.work`, :mod:`.cpu`).

Same interface as :class:`.timing.PgBench` (``run(code, keep_state) -> Run``, ``plan``,
``MEASURE``, ``CLOCK``, ``counter_source``, ``session``); the judge's session is pointed at each
copy (``PostgresBackend.serve``) and back at the worker's own server when the bench closes.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ...dialects.base import Backend
from ...dialects.postgres import PostgresBackend
from .runs import NotMeasured, Run, timed_run
from .work import PG_FLUSHED_ROLLBACK, PG_MEASURE, Work, pg_backend_blocks, pg_backend_setup

log = logging.getLogger(__name__)

#: The scaling plan of each scaled pristine (its build runs once per key and worker).
_PLANS: dict[str, Any] = {}


class PgFreshBench:
    """Each run on a fresh copy of the task's scaled pristine (see the module docstring)."""

    MEASURE = PG_MEASURE
    #: No unmeasured rounds: every run is the first on its server, the same as every other run
    #: (the page cache holds the copied files, each run reads its tables once untimed, ``_warm``).
    WARMUP = 0
    counter_source = "pg_stat_get_backend_io"

    def __init__(self, backend: Backend, schema: str, calls: Sequence[str], scale_rows: int,
                 scale: Mapping[str, int] | None, fixtures: Sequence[Any], seed: int = 0,
                 scratch: str = "answers") -> None:
        if not isinstance(backend, PostgresBackend):  # pristine copies and serve
            raise TypeError(f"PgFreshBench needs a PostgresBackend, not {type(backend).__name__}")
        self.backend = backend
        self.schema = schema
        self.calls = list(calls)
        self.scale_rows = scale_rows
        self.scale = dict(scale or {})
        self.fixtures = list(fixtures)
        self.seed = seed
        self.scratch = scratch
        self.plan: Any = None
        self.clock: Any = None
        self.parallel = ""
        self.session: Any = None
        self._checked_clock = False

    @property
    def CLOCK(self) -> str:  # noqa: N802 - read like MEASURE
        return self.clock.kind if self.clock is not None else "wall"

    def _keys(self) -> tuple[str, str]:
        from ...dialects.pg_pristine import key_of

        parts = [f"{f.key}:{hashlib.sha256(f.script.encode()).hexdigest()[:16]}" for f in self.fixtures]
        base = key_of("b2-fixtures", self.schema, *parts)
        scaled = key_of(base, "b2-scaled", str(self.scale_rows), repr(sorted(self.scale.items())), str(self.seed))
        return base, scaled

    def __enter__(self) -> PgFreshBench:
        from . import scale as sc

        store = self.backend.pristines
        base_key, scaled_key = self._keys()

        def fixtures(builder: Any) -> None:
            builder.ensure_fixtures(self.fixtures)
            builder.allow_writes([self.schema])

        def scaled(conn: Any) -> None:
            with conn.transaction():
                _PLANS[scaled_key] = sc.pg_scale(conn, self.schema, self.scale_rows, self.scale, self.seed,
                                                 analyze=False)  # the store's VACUUM (ANALYZE) follows
            conn.execute("ALTER SYSTEM SET max_worker_processes = 0")
            conn.execute("ALTER SYSTEM SET max_logical_replication_workers = 0")
            for statement in pg_backend_setup(base.role):
                conn.execute(statement)

        base = store.pristine(base_key, fixtures)
        self.pristine = store.derive(base, scaled_key, scaled)
        self.plan = _PLANS.get(scaled_key)
        if self.plan is None:  # pragma: no cover - derive ran its build, which records the plan
            raise NotMeasured("the scaled database was made without its plan")
        self.session = self.backend.session()
        return self

    def __exit__(self, *exc: object) -> None:
        self.backend.serve(None)

    def _warm(self, conn: Any) -> None:
        """Read every task table once, untimed: a new server starts with empty caches, and the
        first reader of a page would pay for the copy into shared buffers. Every contender
        starts as on a database in use (before the window its work is counted over opens)."""
        from psycopg import sql as pgsql

        for name in self.plan.order:
            schema, _, table = name.partition(".")
            conn.execute(pgsql.SQL("SELECT count(*) FROM {}.{}").format(pgsql.Identifier(schema),
                                                                        pgsql.Identifier(table))).fetchone()

    def run(self, code: str, keep_state: bool = False) -> Run:
        from . import cpu

        backend = self.backend
        store = backend.pristines
        setup0 = time.monotonic()
        backend.serve(store.copy(self.pristine))
        # The store prepares the next copy and removes the last one in its background thread:
        # wait for both, so that no copying competes with the run for the machine's caches.
        store._executor().submit(lambda: None).result()
        session = self.session
        session.begin_task()
        try:
            conn = session.connection
            if not self._checked_clock:
                self._checked_clock = True
                probe = cpu.backend_clock(conn.info.backend_pid, lambda: conn.execute(cpu.CHECK_SQL).fetchone())
                self.clock = probe
                if probe.why:
                    log.warning("B2 timing on wall-clock time: %s", probe.why)
                workers = int(conn.execute("SELECT current_setting('max_worker_processes')::int").fetchone()[0])
                self.parallel = ("impossible (max_worker_processes = 0)" if workers == 0 else
                                 "turned off for every run (SET LOCAL max_parallel_workers_per_gather = 0)")
            clock = cpu.cpu_clock(conn.info.backend_pid).read if self.clock.kind == cpu.CPU else time.perf_counter
            self._warm(conn)
            for statement in PG_FLUSHED_ROLLBACK:  # the window of the backend's counts opens
                conn.execute(statement)
            first = pg_backend_blocks(conn)
            conn.execute("BEGIN")
            conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")
            if getattr(session, "deadline", None) is not None:
                session.deadline += time.monotonic() - setup0  # the harness's setup is not the answer's time
            run = timed_run(session, code, self.calls, clock, [self.schema, self.scratch], keep_state)
            if not run.timed_out and session.connection is conn:
                run.work = self._window(conn, first, run.work)
            return run
        finally:
            session.end_task()

    @staticmethod
    def _window(conn: Any, first: tuple[int, int], work: Work) -> Work:
        """``work`` with ``buffers`` counted over the run's whole window: every block the backend
        fetched (its I/O statistics) less the catalogs' and the state snapshot's. Unlike the
        relations' own counts (kept as ``relation_buffers``) this includes relations that a
        subtransaction made and rolled back, whose counts leave with them (:mod:`.work`)."""
        for statement in PG_FLUSHED_ROLLBACK:
            conn.execute(statement)
        last = pg_backend_blocks(conn)
        conn.execute("BEGIN")  # the task scope's transaction again, for end_task to end
        counts = dict(work.counts)
        relations = int(counts.get("buffers", 0))
        window = (last[0] - first[0]) - (last[1] - first[1]) - int(counts.get("state_buffers", 0))
        counts["relation_buffers"] = relations
        counts["buffers"] = max(relations, window)
        return Work(counts, work.measure)

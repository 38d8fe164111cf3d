"""The measurement protocol (paper §5.3; issue 31): every contender timed ``repeats`` times,
each run from the same scaled state, in rotating order.

Contenders are gold (the reference), the degraded input handed to the model (the baseline) and
the candidate. Gold and the candidate take turns to go first in a round (round ``k`` starts with
``k mod 2``); the baseline closes every round (:func:`rounds`). A run is: install
the contender's script, then the whole call suite, timed together (an answer cannot move work
into its installation script), with its work counted (:mod:`.work`). Every run starts from a
state no earlier run touched: on the embedded server a fresh pristine copy of the scaled
database per run (:mod:`.fresh`); on a ``--plsql-dsn`` server tables refilled into fresh files
inside one transaction (:class:`PgBench`); Oracle: the scaled rows put back from copies
(:mod:`.oracle`). The time is the bench's clock: the backend's CPU time where it can be read
(:mod:`.cpu`), wall-clock seconds otherwise (``CLOCK``). A bench whose runs share caches (the
refilled tables, Oracle) has two warm-up rounds before the measured ones (``WARMUP``); a fresh
copy per run needs none. The answer's warm-ups are checked like its measured runs. :func:`bench_for` is the one place that
picks the bench; every bench has the same interface (a context manager with ``run(code,
keep_state) -> Run``, ``plan``, ``MEASURE`` and ``counter_source``).

Reported per contender: the fastest run's time, the median, the noise (slowest run / fastest run)
and the work of its runs (the same number every run: ``work_stable`` says whether it was). The
acceleration is taken from the per-round ratios of gold's and the answer's runs, with an
interval (:func:`paired_ratio` says how and why).
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import comb
from typing import Any

from ...dialects.base import Backend
from ...dialects.postgres import PostgresBackend
from .runs import NotMeasured, Run, timed_run
from .work import PG_MEASURE, Work

GOLD, BASELINE, CANDIDATE = "gold", "baseline", "candidate"
log = logging.getLogger(__name__)


@dataclass
class Measurement:
    label: str
    runs: list[Run] = field(default_factory=list)
    #: The unmeasured warm-up runs (kept for the checked contender, whose warm-ups are checked).
    warmups: list[Run] = field(default_factory=list)
    #: The reference contender's first run of all, state kept: on the scaled tables as scaling
    #: left them, before any other contender's run (see :func:`measure`).
    first_run: Run | None = None
    #: Runs past the planned rounds, while the interval straddled a bin border (see :func:`measure`).
    extra_runs: int = 0

    @property
    def seconds(self) -> list[float]:
        return [r.seconds for r in self.runs]

    @property
    def median_s(self) -> float:
        return statistics.median(self.seconds)

    @property
    def best_s(self) -> float:
        """The fastest run (reported; the ratios are per round, :func:`paired_ratio`)."""
        return min(self.seconds)

    @property
    def noise(self) -> float:
        """Slowest / fastest run (1.0 = perfectly quiet)."""
        fastest = min(self.seconds)
        return max(self.seconds) / fastest if fastest > 0 else float("inf")

    @property
    def work(self) -> Work:
        """The run whose measured count is the median (all equal when the counter is stable)."""
        ordered = sorted(self.runs, key=lambda r: r.work.value)
        return ordered[len(ordered) // 2].work

    @property
    def work_stable(self) -> bool:
        """Every run counted the same ``W`` (the measure; ``tuples`` may vary, see :mod:`.work`)."""
        return len({r.work.value for r in self.runs}) == 1

    def summary(self) -> dict[str, Any]:
        return {
            "seconds": self.best_s,
            "median_s": self.median_s,
            "runs_s": [round(s, 6) for s in self.seconds],
            "noise": self.noise,
            "work": dict(self.work.counts),
            "work_stable": self.work_stable,
        }


#: With fewer than two rounds there is no spread to read: the interval is then the point
#: widened by this factor each way (one run against one run read 0.59-1.69 for gold against
#: itself on a loaded 2-core machine, docs/procarena-b2.md), so a single round never reads
#: "slower" on its noise alone, while an answer 20x slower still does.
NOISE_FLOOR = 2.0
#: Each tail of the acceleration's interval: it covers the median per-round ratio with
#: probability at least ``1 - 2 * TAIL`` (80 %), whatever the noise's distribution (the sign
#: test): 87.5 % at 7 rounds, 82 % at 14, 81 % at 21 (:func:`coverage`).
TAIL = 0.10


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("inf") if a > 0 else 1.0


def _below(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(comb(n, i) for i in range(k + 1)) / 2 ** n


def sign_rank(n: int, tail: float = TAIL) -> int:
    """The rank ``j`` of the interval ``[r(j), r(n+1-j)]`` of ``n`` sorted per-round ratios: the
    largest with ``P(Bin(n, 1/2) < j) <= tail`` (at least 1). The median ratio lies below
    ``r(j)`` only if fewer than ``j`` ratios fall below it, so the interval covers the median with
    probability ``>= 1 - 2 * P(Bin(n, 1/2) < j)`` (:func:`coverage`), for any distribution."""
    j = 1
    while j < (n + 1) // 2 and _below(j, n) <= tail:
        j += 1
    return j


def coverage(n: int) -> float:
    """The acceleration interval's coverage with ``n`` rounds (0 below 2: the noise floor)."""
    return 1.0 - 2.0 * _below(sign_rank(n) - 1, n) if n >= 2 else 0.0


#: Seconds below this count as this (a run of no measurable time), so that every ratio has a log.
_TINY = 1e-9


def paired_ratio(reference: Measurement, other: Measurement) -> tuple[float, tuple[float, float]]:
    """``T_reference / T_other`` from the per-round ratios, and its interval.

    Why per round: the two sides of a ratio run in the same round, one right after the other,
    so whatever the machine does over a measurement -- a neighbour's load that comes and goes, a
    slow phase of the host -- moves both runs of a pair alike and cancels in their ratio. (The
    fastest run of each side did not: measured under a hog, gold's runs took 73-83 ms in the
    first rounds and 86-101 ms in the later ones, and one lucky early run of gold against the
    answer's later runs read 0.92 for gold against itself.) Round ``k`` pairs the ``k``-th run of
    each side (runs are kept in round order; gold and the answer take turns to go first).

    The estimate is the Hodges-Lehmann estimator of the per-round log-ratios (the median of
    their pairwise means): a round slowed by a preemption cannot move it (it tolerates 29 % of
    rounds going astray), and it scatters less than the plain median (gold against itself under
    load, 5 measurements per task: CV 1.0-1.6 % against 1.2-3.1 %). The interval is the sign
    test's, ``[r(j), r(n+1-j)]`` of the sorted ratios (:func:`sign_rank`): it covers the median
    ratio with probability >= 80 % for any noise, and one wild round on either side cannot widen
    it (Wilcoxon's interval, whose ends are pairwise means too, could not hold 7 rounds with one
    wild round inside [0.9, 1.1]). The two aim at the same centre when a round's noise is alike on
    both sides (then the per-round log-ratio is symmetric about it: exactly so for gold against
    itself); the interval is widened to hold the point. With a single round: the point widened by
    :data:`NOISE_FLOOR`. ``paired_ratio(a, b)`` is exactly ``1 / paired_ratio(b, a)``."""
    pairs = list(zip(reference.seconds, other.seconds))
    n = len(pairs)
    if n == 0:
        raise ValueError(f"no round where both {reference.label} and {other.label} ran")
    logs = [math.log(max(a, _TINY) / max(b, _TINY)) for a, b in pairs]
    point = math.exp(statistics.median((logs[i] + logs[j]) / 2 for i in range(n) for j in range(i, n)))
    if n < 2:
        return point, (point / NOISE_FLOOR, point * NOISE_FLOOR)
    ratios = sorted(_ratio(a, b) for a, b in pairs)
    j = sign_rank(n)
    return point, (min(ratios[j - 1], point), max(ratios[n - j], point))


def rotation(labels: Sequence[str], repeats: int) -> list[list[str]]:
    """The order of each round: round k starts with ``labels[k % n]``."""
    n = len(labels)
    return [[labels[(k + i) % n] for i in range(n)] for k in range(repeats)]


def rounds(labels: Sequence[str], repeats: int, last: str | None = None) -> list[list[str]]:
    """The order of each round: :func:`rotation` over ``labels``, except ``last``, which closes
    every round. (The degraded input's runs are long; what they leave on the machine -- a warm
    CPU, written-back memory -- then comes before gold and the answer equally often, instead of
    before the answer in most rounds, as plain rotation of three does.)"""
    if last is None or last not in labels:
        return rotation(labels, repeats)
    rest = [label for label in labels if label != last]
    return [turn + [last] for turn in rotation(rest, repeats)]


def measure(run: Callable[[str, bool], Run], contenders: Mapping[str, str], repeats: int,
            warmup: int = 2, checked: Sequence[str] = (), reference: str | None = None,
            last: str | None = None, settled: Callable[[Mapping[str, Measurement]], bool] | None = None,
            more: Sequence[str] = (), max_more: int = 0) -> dict[str, Measurement]:
    """Time every contender ``repeats`` times in rotating order; ``run(code, keep_state)`` performs
    one run, keeping its final state for the contender's first measured run (without a
    ``reference``), and for every measured run of the ``checked`` contenders (the candidate: an
    answer can tell its runs apart -- statistics counters and row versions outlive the rollback
    between runs -- so each run whose time counts must be shown to leave gold's state, not only
    the first).

    ``warmup`` unmeasured rounds come first: the first runs after scaling meet cold caches, and
    tables and indexes that rolled-back runs have not yet grown -- the planner sees their current
    size, so a plan (and with it the work count) can change over the first runs, then settles.

    ``reference`` (gold) runs first of all and keeps that run's state (``first_run``): what the
    candidate's states are held to was made before any candidate ran. A rollback does not undo
    the physical growth a run leaves (dead row versions, index entries), so the later runs of
    gold and of the degraded input meet whatever the runs before them left; a timeout there must
    not stand in for a check of the candidate's state.

    ``settled``/``more``/``max_more``: after the ``repeats`` rounds, while ``settled(out)`` is
    false (the interval straddles a bin border), up to ``max_more`` further rounds of the
    contenders ``more`` (gold and the answer; their order alternates, and each further round is one
    more pair of :func:`paired_ratio`). The interval narrows as rounds are added,
    until it lies in one bin or the rounds run out ("within noise")."""
    out = {label: Measurement(label) for label in contenders}
    stopped: set[str] = set()  # a contender that hit the statement timeout runs no more

    ran_checked = False

    def once(label: str, first: bool) -> Run:
        nonlocal ran_checked
        result = run(contenders[label], first)
        result.after_checked = ran_checked
        ran_checked = ran_checked or label in checked
        if result.timed_out:
            stopped.add(label)
        return result

    order = list(contenders)
    if reference is not None:
        order.remove(reference)
        order.insert(0, reference)
    if last is not None and last in order:
        order.remove(last)
        order.append(last)
    for _ in range(warmup):
        for label in order:
            if label not in stopped:
                first_of_reference = label == reference and out[label].first_run is None
                warm = once(label, first_of_reference or label in checked)
                if first_of_reference:
                    out[label].first_run = warm
                if label in checked:
                    out[label].warmups.append(warm)
                if warm.timed_out:
                    out[label].runs.append(warm)
    for turn in rounds(order, repeats, last):
        for label in turn:
            if label not in stopped:
                first_of_reference = label == reference and out[label].first_run is None  # no warm-up round
                # With a reference, its first run is the state every check uses: no other
                # contender's first measured run need be read at scale as well.
                keep = label in checked or first_of_reference or (reference is None and not out[label].runs)
                result = once(label, keep)
                out[label].runs.append(result)
                if first_of_reference:
                    out[label].first_run = result
    extra = [label for label in more if label in out]
    if settled is None or not extra:
        return out
    for k in range(max_more):
        if any(label in stopped for label in extra) or settled(out):
            break
        for label in extra if k % 2 == 0 else extra[::-1]:
            out[label].runs.append(once(label, label in checked))
            out[label].extra_runs += 1
    return out


def _pg_bench(backend: Backend, spec: Any, hold: bool, fixtures: Sequence[Any] | None) -> Any:
    b2 = spec.b2
    if fixtures is not None and isinstance(backend, PostgresBackend) and backend.pristines.available:
        from .fresh import PgFreshBench

        return PgFreshBench(backend, spec.schema, spec.calls, b2.scale_rows, b2.scale, fixtures)
    return PgBench(backend, spec.schema, spec.calls, b2.scale_rows, b2.scale)


def _ora_bench(backend: Backend, spec: Any, hold: bool, fixtures: Sequence[Any] | None) -> Any:
    from .oracle import OraBench

    b2 = spec.b2
    return OraBench(backend, spec.schema, spec.calls, b2.scale_rows, b2.scale, hold=hold)


#: The bench of each dialect B2 can time (``bench_for``): the one place that names them.
BENCHES: dict[str, Callable[[Backend, Any, bool, Sequence[Any] | None], Any]] = {
    "postgres": _pg_bench, "oracle": _ora_bench}


def bench_for(backend: Backend, spec: Any, *, hold: bool = False, fixtures: Sequence[Any] | None = None) -> Any:
    """The bench of ``backend``'s dialect for a B2 task (``spec``: its ProcSpec). ``hold``:
    keep the task's schema to this worker (outside a task run, where the call-suite judge does
    not hold it already; only a database workers share needs it). PostgreSQL: on the embedded
    server (with the task's ``fixtures``) every run on a fresh pristine copy
    (:class:`.fresh.PgFreshBench`); on a ``--plsql-dsn`` server one transaction whose tables are
    refilled into fresh files before every run (:class:`PgBench`). Oracle: :class:`.oracle.OraBench`."""
    make = BENCHES.get(backend.dialect)
    if make is None:
        raise NotMeasured(f"B2 timing is not available on {backend.dialect} (it is on {', '.join(sorted(BENCHES))})")
    return make(backend, spec, hold, fixtures)


# --------------------------------------------------------------------------- PostgreSQL
#: Session state that survives ``ROLLBACK TO SAVEPOINT`` and that an answer can write: prepared
#: statements and session-level advisory locks. (Statistics counters survive too, and cannot be
#: reset; every measured run of the candidate is checked against gold instead, :func:`measure`.)
_SESSION_RESET = "DEALLOCATE ALL; SELECT pg_catalog.pg_advisory_unlock_all()"


class PgBench:
    """The scaled database of one task on the worker's candidate session.

    Guarantee: everything -- the generated rows, every contender's procedure and writes -- happens
    inside one transaction that is rolled back when the bench closes; each run starts from the
    savepoint taken right after scaling, on tables refilled into fresh files
    (:func:`.scale.install_refill`): no run meets a row version, index entry or page an earlier
    run left. Time is the backend's CPU time where the harness can read it (:mod:`.cpu`).
    """

    SAVEPOINT = "plsql_b2_scaled"
    MEASURE = PG_MEASURE
    #: Unmeasured rounds first: every run shares the session's caches and the scaled tables.
    WARMUP = 2
    counter_source = "pg_stat_get_xact_blocks_fetched"

    def __init__(self, backend: Backend, schema: str, calls: Sequence[str], scale_rows: int,
                 scale: Mapping[str, int] | None = None, seed: int = 0, scratch: str = "answers") -> None:
        if not isinstance(backend, PostgresBackend):  # the psycopg admin connection (install_analyzer)
            raise TypeError(f"PgBench needs a PostgresBackend, not {type(backend).__name__}")
        self.backend = backend
        self.schema = schema
        self.calls = list(calls)
        self.scale_rows = scale_rows
        self.scale = dict(scale or {})
        self.seed = seed
        self.scratch = scratch
        self.plan: Any = None
        self.clock: Any = None
        self.parallel = ""

    @property
    def CLOCK(self) -> str:  # noqa: N802 - read like MEASURE
        return self.clock.kind if self.clock is not None else "wall"

    def __enter__(self) -> PgBench:
        from . import cpu
        from . import scale as sc

        analyze = self.analyze = sc.install_analyzer(self.backend.admin, self.backend.candidate_role)
        self.session = self.backend.session()
        self.session.begin_task()
        try:
            self.conn = self.session.connection
            try:
                self.plan = sc.pg_scale(self.conn, self.schema, self.scale_rows, self.scale, self.seed, analyze=analyze)
                if not analyze:
                    raise NotMeasured("the harness's account cannot create the B2 helper functions (it must own the "
                                      "task's tables): each run cannot start from fresh copies of them")
                sc.pg_stash(self.conn, self.plan.order)
            finally:
                if analyze:  # the candidate calls them only here, before any answer runs
                    sc.revoke_analyzer(self.backend.admin, self.backend.candidate_role)
            self.conn.execute(f"SAVEPOINT {self.SAVEPOINT}")
            workers = int(self.conn.execute("SELECT current_setting('max_worker_processes')::int").fetchone()[0])
            self.parallel = ("impossible (max_worker_processes = 0)" if workers == 0 else
                             "turned off for every run (SET LOCAL max_parallel_workers_per_gather = 0)")
            self.clock = cpu.backend_clock(self.conn.info.backend_pid,
                                           lambda: self.conn.execute(cpu.CHECK_SQL).fetchone())
            if self.clock.why:
                log.warning("B2 timing on wall-clock time: %s", self.clock.why)
        except BaseException:
            self.session.end_task()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.session.end_task()

    def run(self, code: str, keep_state: bool = False) -> Run:
        from .scale import pg_refill

        conn = self.conn
        try:
            pg_refill(conn)
            conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")
            return timed_run(self.session, code, self.calls, self.clock.read, [self.schema, self.scratch], keep_state)
        finally:
            conn.execute(f"ROLLBACK TO SAVEPOINT {self.SAVEPOINT}")
            # What a rollback leaves of a run in the session: nothing a later run may read back
            # (a cache of the work done, or a count of the runs so far).
            conn.execute(_SESSION_RESET)

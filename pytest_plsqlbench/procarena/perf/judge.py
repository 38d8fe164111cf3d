"""The ``perf`` item of a B2 task (kind ``procarena-b2``): the gate, then the measurement.

It runs after the task's call items, on the same worker (cumulative mode keeps the order):

1. **Gate** -- from gold's states (computed once per worker by the call-suite judge) and the
   candidate's own run of the call suite at fixture size, in a scope of its own: a candidate is
   admitted only when every call leaves gold's state and raises as gold's does. Rejections are
   classed as Figure 4(c) does: compile failure, wrong final state, runtime error.
2. **Measurement** -- the task's tables scaled (:mod:`.scale`) on the dialect's bench
   (:func:`.timing.bench_for`: PostgreSQL on a fresh pristine copy per run, or refilled tables
   in one transaction rolled back; Oracle restored from copies, :mod:`.oracle`); gold, the degraded input and the candidate timed ``repeats`` times in
   rotating order (:mod:`.timing`) while holding the machine-wide measurement lock (:mod:`.quiet`); the
   candidate's final state at scale, after every run (warm-ups included), must still equal gold's (an answer
   that behaves only on the small fixture, or only in some of its runs, is rejected as a wrong
   final state).

The item passes when the candidate is admitted and not slower than gold beyond the interval
(the whole acceleration interval below ``1/min_speedup`` fails it, with the numbers in the
message; its record still counts in the metrics). Its ``score`` is the acceleration
``T_gold / T_cand`` and ``extra["b2"]`` holds the whole record (seconds, noise, work, ratios,
interval, bin, scaled row counts), from which :mod:`.metrics` computes the harmonic means and
the bins. A timeout of gold or the degraded input counts as *not measured* only when it
happened before the answer first ran; after it, it is the answer's failure.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Mapping
from typing import Any

from ... import outcomes
from ...dialects.base import Execution
from ...judges import Judge, JudgeContext
from ...outcomes import Verdict
from ...tasks import UnitTest
from .. import failure_types as ft
from .. import state as st
from . import metrics as bm
from . import progress, quiet, timing

log = logging.getLogger(__name__)

KIND = "procarena-b2"
#: Unmeasured rounds before the measured ones (each contender; the answer's are checked), for a
#: bench that does not say (a bench's ``WARMUP``: none on a fresh copy per run).
WARMUP = 2
CRITERION = ("per-round ratios of the server backend's CPU seconds (wall seconds where unreadable); "
             "work: buffers")
#: Further rounds of gold and the answer, at most this many times the planned ones, while the
#: acceleration interval straddles a bin border (:func:`.timing.measure`): on a busy machine
#: the interval narrows round by round until it lies in one bin; on a quiet one none are needed.
#: Not after a single planned round (``--plsql-b2-repeats=1``, a quick check): its interval is
#: the point widened by :data:`.timing.NOISE_FLOOR`, so that one round never reads "slower" on
#: noise alone; two more runs a side would narrow it to what three runs under load can tell.
MORE_ROUNDS = 2


def _harness_time(session: Any, action: Any) -> None:
    """Run the harness's ``action`` (starting a fresh copy) off the answer's time budget: the
    session's deadline moves by what it took."""
    t0 = time.monotonic()
    try:
        action()
    finally:
        if getattr(session, "deadline", None) is not None:
            session.deadline += time.monotonic() - t0


class PerfJudge(Judge):
    kind = KIND
    mode = "cumulative"

    def __init__(self, repeats: int | None = None) -> None:
        self.repeats = repeats
        self._records: dict[int, tuple[weakref.ref[JudgeContext], dict[str, Any]]] = {}

    def validate(self, test: UnitTest) -> None:
        if test.options.get("b2") is not True:
            raise ValueError(f"unit test {test.id!r}: kind {KIND!r} belongs to B2 tasks (options.b2: true)")

    # ----------------------------------------------------------------- run
    def execute(self, ctx: JudgeContext, turn: int, test: UnitTest, answer: str) -> Execution:
        from ..loader import spec_of

        spec = spec_of(ctx.task)
        assert spec.b2 is not None
        session = ctx.session
        # The runner's scope holds the candidate's calls at fixture size: the gate and the
        # measurement each need a clean start, so that scope ends here and a fresh one is left
        # for the runner to close.
        session.end_task()
        try:
            record = self._gate(ctx, spec, answer)
            if record["rejection"] is None:
                record.update(self._measure(ctx, spec, answer))
        finally:
            session.begin_task()
        self._records = {k: v for k, v in self._records.items() if v[0]() is not None}
        self._records[id(ctx)] = (weakref.ref(ctx), record)
        return Execution()

    def _gate(self, ctx: JudgeContext, spec: Any, answer: str) -> dict[str, Any]:
        from ..judge import CallResult, CallSuiteJudge, _gold_key, access_for, call_problem

        access = access_for(ctx.backend, ctx.task)
        access.prepare()
        cache = ctx.worker_cache.setdefault("procarena-gold", {})
        key = _gold_key(ctx.task)
        if key not in cache:
            cache[key] = CallSuiteJudge()._run_gold(ctx, access)
        gold = cache[key]
        record: dict[str, Any] = {"dialect": ctx.task.dialect, "pattern": spec.b2.pattern, "admitted": False,
                                  "rejection": None, "min_speedup": spec.b2.min_speedup,
                                  "scale_rows": spec.b2.scale_rows, "criterion": CRITERION}
        if gold.error:
            record["rejection"] = "not_measured"
            record["why"] = gold.error
            return record
        session = ctx.session
        # The gate on a fresh copy of the task's database (nothing of the candidate's call items
        # or of gold's run in reach); the measurement and the runner's closing scope on another.
        _harness_time(session, access.fresh_scope)
        session.begin_task()
        try:
            access.begin()
            install = session.run(answer, isolated=False, phase="install")
            if install.error is not None:
                record["rejection"] = "compile"
                record["why"] = f"the answer failed to install: {install.error.short()}"
                return record
            changed = [n for n in st.differing_tables(gold.clean, access.snapshot())
                       if not n.startswith(access.scratch_prefix())]
            if changed:
                record["rejection"] = "compile"
                record["why"] = f"installing the answer changed table(s) {', '.join(changed)}"
                return record
            calls = [t for t in ctx.task.turns[0].tests if t.kind != KIND]
            for n, (test, want) in enumerate(zip(calls, gold.calls), 1):
                done = session.run(test.script or "", isolated=False, phase="test")
                got = CallResult.of(done, access.snapshot())
                problem = call_problem(want, got)
                diffs = st.diff(want.state, got.state)
                if problem is None and not diffs:
                    continue
                ftype = ft.of_call(
                    candidate_error=(got.error.code, got.error.failure_class, got.error.message) if got.error else None,
                    gold_raised=want.raised, candidate=answer, gold=ctx.task.turns[0].reference or "")
                record["rejection"] = bm.gate_rejection([ftype])
                record["why"] = f"call-{n}: " + "\n".join(m for m in [problem, *diffs[:1]] if m)
                return record
        finally:
            session.end_task()
            access.restore()
            _harness_time(session, access.fresh_scope)
        record["admitted"] = True
        return record

    def _measure(self, ctx: JudgeContext, spec: Any, answer: str) -> dict[str, Any]:
        repeats = self.repeats or spec.b2.repeats
        contenders = {timing.GOLD: (timing.GOLD, spec.gold), timing.BASELINE: (timing.BASELINE, spec.b2.degraded),
                      timing.CANDIDATE: (timing.CANDIDATE, answer)}
        spent = 0.0  # the answer's own run time in the measurement
        done, total = [0], len(contenders) * repeats
        budget: float | None = None  # what was left of the task's budget when the measurement began

        def run(contender: tuple[str, str], keep_state: bool) -> timing.Run:
            nonlocal spent, budget
            # The task's time budget is the answer's: it bounds the answer's own runs, by what
            # they have used of it, and never gold's or the degraded input's. (An answer that used
            # the budget up made the next gold run fail at once: "not measured", infrastructure;
            # and counting gold's time against it failed a right answer next to a slow baseline.)
            label, code = contender
            done[0] += 1
            if done[0] == 1 or done[0] % 3 == 0 or done[0] == total:
                progress.progress(f" [perf {done[0]}/{total}]")
            session: Any = getattr(bench, "session", None)
            if not hasattr(session, "deadline"):
                return bench.run(code, keep_state)
            if budget is None and session.deadline is not None:
                budget = session.deadline - time.monotonic()
            deadline = session.deadline
            t0 = time.monotonic()
            session.deadline = t0 + budget - spent if label == timing.CANDIDATE and budget is not None else None
            result: timing.Run | None = None
            try:
                result = bench.run(code, keep_state)
                return result
            finally:
                if label == timing.CANDIDATE:
                    # the run itself, not the harness's setup of it (a fresh copy, the warm-up read)
                    took = result.wall_s if result is not None and result.wall_s is not None else None
                    spent += took if took is not None else time.monotonic() - t0
                session.deadline = deadline

        def settled(got: Mapping[str, timing.Measurement]) -> bool:
            """No more rounds: the interval lies in one bin, a run failed or was not timed, or
            another run of the answer might not fit in what is left of its budget."""
            gold, cand = got[timing.GOLD], got[timing.CANDIDATE]
            if not gold.runs or not cand.runs or any(r.timed_out or r.install_error for r in gold.runs + cand.runs):
                return True
            if budget is not None and budget - spent < 3 * max(r.wall_s or 0.0 for r in cand.runs):
                return True
            _point, (low, high) = timing.paired_ratio(gold, cand)
            return bm.interval_bin(low, high, spec.b2.min_speedup) != "noise"

        started = time.monotonic()
        try:
            fixtures = getattr(getattr(ctx, "task", None), "fixtures", None)
            with timing.bench_for(ctx.backend, spec, fixtures=fixtures) as bench:
                warmup = int(getattr(bench, "WARMUP", WARMUP))
                total += len(contenders) * warmup
                with quiet.measuring() as lock:
                    got = timing.measure(run, contenders, repeats, warmup=warmup,  # type: ignore[arg-type]
                                         checked=(timing.CANDIDATE,), reference=timing.GOLD,
                                         last=timing.BASELINE, settled=settled,
                                         more=(timing.GOLD, timing.CANDIDATE),
                                         max_more=MORE_ROUNDS * repeats if repeats > 1 else 0)
        except timing.NotMeasured as exc:
            return {"admitted": True, "acceleration": None, "why": f"timing not measured: {exc}"}
        gold, cand, base = got[timing.GOLD], got[timing.CANDIDATE], got[timing.BASELINE]
        reference = gold.first_run
        not_measured = {"admitted": True, "acceleration": None, "rejection": "not_measured",
                        "why": "gold or the degraded input ran past the statement timeout at the task's scale "
                               "(--plsql-timeout, or a smaller b2.scale_rows)"}
        if reference is None or reference.timed_out:
            return not_measured  # gold itself, on the scaled tables before anything else ran
        if any(r.timed_out for r in cand.warmups + cand.runs):  # the answer's own limits are its failure
            return {"admitted": False, "rejection": "runtime",
                    "why": "a call ran past the statement timeout, or the task's time budget ran out, at the task's scale"}
        out: dict[str, Any] = {
            "repeats": repeats,
            "clock": getattr(bench, "CLOCK", "wall"),
            "measure": bench.MEASURE,
            "work_source": bench.counter_source,
            "parallel_query": getattr(bench, "parallel", ""),
            "scaled": dict(bench.plan.counts),
            "scale_notes": list(bench.plan.notes),
            "waited_s": round(lock["waited_s"], 3),
            "runs": done[0],
            "runs_per_s": round(done[0] / max(time.monotonic() - started, 1e-9), 3),
            "warmup_rounds": warmup,
            "more_runs": {k: m.extra_runs for k, m in got.items() if m.extra_runs},
            "estimator": "Hodges-Lehmann of per-round ratios",
            "rounds": len(cand.runs),
            "seconds": {k: m.best_s for k, m in got.items()},
            "median_s": {k: m.median_s for k, m in got.items()},
            "runs_s": {k: m.seconds for k, m in got.items()},
            "wall_s": {k: [r.wall_s for r in m.runs] for k, m in got.items()},
            "noise": {k: m.noise for k, m in got.items()},
            "work": {k: dict(m.work.counts) for k, m in got.items()},
            "work_stable": {k: m.work_stable for k, m in got.items()},
        }
        if getattr(bench, "clock", None) is not None and bench.clock.why:
            out["clock_note"] = bench.clock.why
        # Every run of the candidate -- its warm-ups and its measured runs -- against gold's
        # first run, before any timeout of gold's or the degraded input's later runs counts.
        checked = [("warm-up", n, r) for n, r in enumerate(cand.warmups, 1)] + \
                  [("measured", n, r) for n, r in enumerate(cand.runs, 1)]
        wrong = next(((kind, n, r) for kind, n, r in checked
                      if r.state != reference.state or r.raised != reference.raised), None)
        if wrong is not None:
            kind, n, bad = wrong
            diffs = [] if bad.install_error else st.diff(reference.state or {}, bad.state or {})
            problem = (f"the answer failed to install: {bad.install_error}" if bad.install_error
                       else diffs[0] if diffs else "the calls raised differently")
            total = len(cand.warmups) if kind == "warm-up" else len(cand.runs)
            out.update(admitted=False, rejection="wrong_state", same_state_as_gold=False,
                       why=f"at the task's scale, {kind} run {n} of {total}: {problem}")
            return out
        late = [m.label for m in (gold, base) if any(r.timed_out for r in m.runs)]
        if late:
            # Before the answer first ran, gold's and the degraded input's runs were on time: a
            # timeout after it is the answer's doing (each run starts from fresh tables, so only
            # what the answer left outside them could cause it), never "not measured".
            early = [m.label for m in (gold, base)
                     if any(r.timed_out and not r.after_checked for r in m.runs)]
            if early:
                return not_measured
            return {"admitted": False, "rejection": "runtime",
                    "why": f"{' and '.join(late)} ran past the statement timeout after the answer ran, "
                           "and not before it: the answer slowed the runs after its own"}
        out["same_state_as_gold"] = True
        # Every ratio is read from its two sides' per-round ratios (timing.paired_ratio):
        # out["seconds"] (each side's fastest run) is reported, not divided.
        acceleration, interval = timing.paired_ratio(gold, cand)
        ratios = {(timing.GOLD, timing.CANDIDATE): acceleration,
                  (timing.BASELINE, timing.CANDIDATE): timing.paired_ratio(base, cand)[0],
                  (timing.BASELINE, timing.GOLD): timing.paired_ratio(base, gold)[0]}
        out["interval_coverage"] = round(timing.coverage(min(len(gold.runs), len(cand.runs))), 4)
        out.update(bm.task_figures(out["seconds"], {k: m.work.value for k, m in got.items()}, spec.b2.min_speedup,
                                   interval, ratios=ratios))
        return out

    def judge(self, ctx: JudgeContext, turn: int, test: UnitTest, execution: Execution) -> Verdict:
        ref, record = self._records.pop(id(ctx))
        assert ref() is ctx
        rejection = record.get("rejection")
        if rejection == "not_measured":
            return Verdict(turn, test.id, False, outcomes.INFRASTRUCTURE, str(record.get("why")))
        if rejection:
            cls = {"compile": outcomes.INVALID_ARTIFACT, "runtime": outcomes.WRONG_OUTPUT}.get(rejection, outcomes.WRONG_OUTPUT)
            out = Verdict(turn, test.id, False, cls, f"B2 gate: {bm.REJECTION_LABELS[rejection]}: {record.get('why')}",
                          score=0.0)
        elif record.get("acceleration") is None:
            out = Verdict(turn, test.id, True, message=str(record.get("why") or ""))
        else:
            low, high = record["acceleration_interval"]
            text = (f"acceleration {record['acceleration']:.2f} (interval {low:.2f}-{high:.2f}, "
                    f"{record['clock']} time), work ratio {record['work_ratio']:.3f}, bin "
                    f"{bm.BIN_LABELS[record['bin']]}; vs degraded input {record['acceleration_vs_baseline']:.2f} / "
                    f"{record['work_ratio_vs_baseline']:.3f}")
            if record.get("slower"):
                # Slower than gold beyond the interval: a failed item; the metrics still take
                # its ratios (the record stays admitted).
                out = Verdict(turn, test.id, False, outcomes.WRONG_OUTPUT,
                              f"B2: the answer is slower than gold: {text}", score=float(record["acceleration"]))
            else:
                out = Verdict(turn, test.id, True, score=float(record["acceleration"]), message=text)
        out.extra["b2"] = record
        return out


def judges() -> list[Judge]:
    return [PerfJudge()]

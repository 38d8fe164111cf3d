"""The call-suite judge (ProcArena's EX, PLForge's state comparison).

Gold and candidate each start from the same clean state; after the procedure is installed the
task's calls run in order, each kept (a call that raises has its own effects undone, as a
failed ``CALL`` statement does). Item ``call-k`` passes when, after calls 1..k, the candidate's
state equals gold's and both raised or neither did (with the same error code when raised).

:class:`CallSuiteJudge` is the core's cumulative judge of kind ``procarena-state``: gold's states
are computed in :meth:`~CallSuiteJudge.prepare`, once per worker (the backend's judge cache), in a
task scope of their own; the candidate runs in the next one, call k in item ``call-k`` (earlier
calls a ``-k`` deselected still run first). PostgreSQL: gold and the candidate each run on a
server of their own, started from a pristine copy of the task's database (:mod:`..dialects.pg_pristine`):
a rollback leaves row versions, statistics, sizes, sequences and transaction ids behind, and none
of gold's can reach the candidate's server (docs/security.md). Oracle, where calls may COMMIT and
DDL commits: the clean state is restored after every run (:mod:`.oracle_restore`). Each dialect's
part is its adapter's :class:`~.access.Access` (:mod:`.dialects`).
"""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import dataclass, field
from typing import Any

from .. import outcomes
from ..dialects.base import Backend, DbError, Execution
from ..judges import Judge, JudgeContext
from ..outcomes import Verdict
from ..tasks import Task, UnitTest
from . import failure_types as ft
from . import hollow
from . import state as st
from .access import Access
from .dialects import adapter_for

#: The unit-test kind of every call (``call-1`` ... ``call-N``).
KIND = "procarena-state"  # = loader.KIND


@dataclass
class CallResult:
    """What one call did: its error (if any), the state after it, and the rows it returned (a
    CALL's OUT and INOUT parameters, a function's result: ``SELECT f(...)``)."""

    error: DbError | None
    state: st.State
    returned: tuple[str, ...] = ()

    @classmethod
    def of(cls, done: Execution, state: st.State) -> CallResult:
        """The result of the call that produced ``done``; only what the call *returned* counts
        (printed lines are no channel the judge reads), or every line where the session cannot
        tell a returned row from a printed one."""
        lines = done.lines if done.row_lines is None else [done.lines[i] for i in done.row_lines]
        return cls(done.error, state, tuple(lines))

    @property
    def raised(self) -> str | None:
        if self.error is None:
            return None
        return self.error.code or self.error.failure_class


@dataclass
class GoldRun:
    clean: st.State
    calls: list[CallResult] = field(default_factory=list)
    error: str | None = None


def _gold_key(task: Task) -> str:
    turn = task.turns[0]
    parts = [task.id, turn.reference or "", *[t.script or "" for t in turn.tests], *[f.key for f in task.fixtures]]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def access_for(backend: Backend, task: Task) -> Access:
    """The judge's access to ``task``'s schema, from the backend's dialect's adapter."""
    return adapter_for(backend.dialect).access(backend, task)


# --------------------------------------------------------------------------- the judge
def _same_raise(gold: CallResult, cand: CallResult) -> str | None:
    if gold.raised == cand.raised:
        return None
    if gold.raised is None:
        assert cand.error is not None
        return f"the call raised, gold's did not: {cand.error.short()}"
    if cand.raised is None:
        return f"gold's call raised {gold.raised}, the answer's did not"
    assert cand.error is not None
    return f"the call raised {cand.raised}, gold's raised {gold.raised}: {cand.error.short()}"


def _same_return(gold: CallResult, cand: CallResult) -> str | None:
    """Neither raised: the call must return what gold's returned (OUT parameters, a result)."""
    if gold.raised is not None or cand.raised is not None or gold.returned == cand.returned:
        return None
    shown = SHOWN_RETURNED

    def show(rows: tuple[str, ...]) -> str:
        return "nothing" if not rows else "; ".join(rows[:shown]) + (f" (+{len(rows) - shown} more)" if len(rows) > shown else "")

    return f"the call returned {show(cand.returned)}, gold's returned {show(gold.returned)}"


#: Returned rows shown per side in a failure message.
SHOWN_RETURNED = 5


def call_problem(gold: CallResult, cand: CallResult) -> str | None:
    """What differs in how the call ended -- raised, or returned -- (None: the same); the state
    is compared apart (:func:`.state.diff`)."""
    return _same_raise(gold, cand) or _same_return(gold, cand)


@dataclass
class _TaskState:
    """One task's run on the worker: dialect access, gold, the candidate's scope."""

    access: Access
    gold: GoldRun | None = None
    #: The session scope (epoch) the candidate's calls run in; a new one starts the calls over.
    epoch: int | None = None
    install_problem: str | None = None
    #: The candidate's code (for the lexical structure of failure types).
    answer: str = ""
    results: dict[int, CallResult] = field(default_factory=dict)


class CallSuiteJudge(Judge):
    """``kind: procarena-state``: item ``call-k`` runs call k (cumulative) and compares states."""

    kind = KIND
    mode = "cumulative"

    def __init__(self) -> None:
        #: Per task run, keyed by its context's id (contexts are not hashable); ``finish`` drops it.
        self._by_ctx: dict[int, tuple[weakref.ref[JudgeContext], _TaskState]] = {}

    def validate(self, test: UnitTest) -> None:
        if not test.script or not isinstance(test.options.get("call"), int):
            raise ValueError(f"unit test {test.id!r}: kind {KIND!r} needs the call as script and options.call")

    def needs_expectation(self, test: UnitTest) -> bool:
        return True

    def _state(self, ctx: JudgeContext) -> _TaskState:
        ref, state = self._by_ctx[id(ctx)]
        assert ref() is ctx, "a judge context outlived its task run"
        return state

    # ----------------------------------------------------------------- gold
    def prepare(self, ctx: JudgeContext, tests: list) -> None:
        state = _TaskState(access_for(ctx.backend, ctx.task))
        self._by_ctx = {k: v for k, v in self._by_ctx.items() if v[0]() is not None}
        self._by_ctx[id(ctx)] = (weakref.ref(ctx), state)
        state.access.prepare()
        state.access.hold()
        try:
            state.access.restore()  # Oracle: whatever an interrupted run left, the task starts clean
            cache = ctx.worker_cache.setdefault("procarena-gold", {})
            key = _gold_key(ctx.task)
            if key not in cache:
                cache[key] = self._run_gold(ctx, state.access)
            state.gold = cache[key]
            state.access.before_candidate()
        except BaseException:
            state.access.release()
            raise
        if state.gold.error:
            ctx.reference_error = state.gold.error
            return
        hollow_why = hollow.of_gold_run(state.gold, judging(ctx.task))
        if hollow_why:  # the calls judge nothing: left out as the benchmark's failure, and counted
            ctx.reference_error = f"hollow task: {hollow_why}"
            return
        for turn, test in tests:
            n = int(test.options["call"])
            if n <= len(state.gold.calls):
                ctx.expected[(turn.index, test.id)] = state.gold.calls[n - 1]

    def _run_gold(self, ctx: JudgeContext, access: Access) -> GoldRun:
        access.fresh_scope()
        try:
            return self._gold_scope(ctx, access)
        finally:
            access.end_scope()

    def _gold_scope(self, ctx: JudgeContext, access: Access) -> GoldRun:
        session = ctx.session
        session.begin_task()
        try:
            access.begin()
            run = GoldRun(clean=access.snapshot())
            reference = ctx.task.turns[0].reference
            if not reference:
                run.error = "the task has no gold procedure"
                return run
            install = session.run(reference, isolated=False, phase="reference")
            if not install.ok:
                assert install.error is not None
                run.error = f"gold failed to install: {install.error.short()}"
                return run
            for test in ctx.task.turns[0].tests:
                if test.kind != KIND:
                    continue  # B2's perf item
                done = session.run(test.script or "", isolated=False, phase="reference")
                run.calls.append(CallResult.of(done, access.snapshot()))
            return run
        finally:
            session.end_task()
            access.restore()

    # ----------------------------------------------------------------- candidate
    def execute(self, ctx: JudgeContext, turn: int, test: UnitTest, answer: str) -> Execution:
        state = self._state(ctx)
        session = ctx.session
        n = int(test.options["call"])
        state.answer = answer
        if state.epoch != session.scope_epoch or n in state.results or not state.results:
            # A new scope (the first call, or the runner replaying after a restart): set it up and
            # check that installing the answer left the task's data alone.
            self._begin_scope(state, session)
        calls = {int(t.options["call"]): t for t in ctx.task.turns[0].tests if t.kind == KIND}
        for missing in range(1, n):  # calls deselected (-k) still run: call k is judged after 1..k
            if missing not in state.results:
                self._call(state, session, calls[missing].script or "", missing)
        return self._call(state, session, test.script or "", n)

    def _begin_scope(self, state: _TaskState, session: Any) -> None:
        state.epoch = session.scope_epoch
        state.results = {}
        state.access.begin()
        assert state.gold is not None
        now = state.access.snapshot()
        scratch = state.access.scratch_prefix()
        changed = [n for n in st.differing_tables(state.gold.clean, now) if not n.startswith(scratch)]
        state.install_problem = (
            f"installing the answer changed table(s) {', '.join(changed)}: the data may change only "
            "through the calls" if changed else None
        )

    def _call(self, state: _TaskState, session: Any, script: str, n: int) -> Execution:
        done = session.run(script, isolated=False, phase="test")
        state.results[n] = CallResult.of(done, state.access.snapshot())
        return done

    def judge(self, ctx: JudgeContext, turn: int, test: UnitTest, execution: Execution) -> Verdict:
        state = self._state(ctx)
        gold: CallResult = ctx.expected[(turn, test.id)]
        cand = state.results[int(test.options["call"])]
        if state.install_problem:
            out = Verdict(turn, test.id, False, outcomes.INVALID_ARTIFACT, state.install_problem)
            out.extra["failure_type"] = ft.CONTRACT
            return out
        if judging(ctx.task) == "plforge":
            return self._judge_plforge(ctx, turn, test, gold, cand)
        raise_problem = call_problem(gold, cand)
        diffs = st.diff(gold.state, cand.state)
        if raise_problem is None and not diffs:
            return Verdict(turn, test.id, True)
        message = "\n".join(m for m in [raise_problem, *diffs] if m)
        cls, code = outcomes.WRONG_OUTPUT, None
        if cand.error is not None and raise_problem:
            code = cand.error.code
            if cand.error.failure_class not in outcomes.EXCLUDED:
                cls = cand.error.failure_class
        out = Verdict(turn, test.id, False, cls, message, error_code=code)
        out.extra["failure_type"] = ft.of_call(
            candidate_error=(cand.error.code, cand.error.failure_class, cand.error.message) if cand.error else None,
            gold_raised=gold.raised,
            candidate=state.answer, gold=ctx.task.turns[0].reference or "",
        )
        out.extra["differing_tables"] = st.differing_tables(gold.state, cand.state)
        return out

    def _judge_plforge(self, ctx: JudgeContext, turn: int, test: UnitTest, gold: CallResult,
                       cand: CallResult) -> Verdict:
        """PLForge's rule: any exception fails; only the final state (every user table) is compared."""
        if cand.error is not None:
            cls = cand.error.failure_class if cand.error.failure_class not in outcomes.EXCLUDED else outcomes.WRONG_OUTPUT
            out = Verdict(turn, test.id, False, cls, f"the call raised (PLForge: any exception fails): "
                          f"{cand.error.short()}", error_code=cand.error.code)
            out.extra["failure_type"] = ft.of_call(
                candidate_error=(cand.error.code, cand.error.failure_class, cand.error.message), gold_raised=None,
                candidate=self._state(ctx).answer, gold=ctx.task.turns[0].reference or "")
            return out
        last = max(int(t.options["call"]) for t in ctx.task.turns[0].tests if t.kind == KIND)
        diffs = st.diff(gold.state, cand.state) if int(test.options["call"]) == last else []
        if not diffs:
            return Verdict(turn, test.id, True)
        out = Verdict(turn, test.id, False, outcomes.WRONG_OUTPUT, "\n".join(["the final state differs", *diffs]))
        out.extra["failure_type"] = ft.of_call(candidate_error=None, gold_raised=None, candidate=self._state(ctx).answer,
                                               gold=ctx.task.turns[0].reference or "")
        out.extra["differing_tables"] = st.differing_tables(gold.state, cand.state)
        return out

    def finish(self, ctx: JudgeContext) -> None:
        ref, state = self._by_ctx.pop(id(ctx), (None, None))
        if state is None or ref is None or ref() is not ctx:
            return
        try:
            state.access.restore()
        finally:
            state.access.release()


#: Judging modes: ProcArena's (after each call the states and the raised error code must match) and
#: PLForge's (any exception fails; the final state is compared). Task metadata ``judging`` picks one.
JUDGING = ("procarena", "plforge")


def judging(task: Task) -> str:
    return str(task.metadata.get("judging") or "procarena")


def judges() -> list[Judge]:
    return [CallSuiteJudge()]


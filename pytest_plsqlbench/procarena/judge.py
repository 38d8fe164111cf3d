"""The call-suite judge (ProcArena's EX, PLForge's state comparison).

Gold and candidate each start from the same clean state; after the procedure is installed the
task's calls run in order, each kept (a call that raises has its own effects undone, as a
failed ``CALL`` statement does). Item ``call-k`` passes when, after calls 1..k, the candidate's
state equals gold's and both raised or neither did (with the same error code when raised).

Gold's states are computed once per worker (cached on the backend) in a task scope of their
own; the candidate runs in the next one. PostgreSQL: every write happens inside the task's
transaction and is rolled back at the end. Oracle, where calls may COMMIT and DDL commits: the
clean state is restored after every run (:mod:`.oracle_restore`).
"""

from __future__ import annotations

import hashlib
import logging
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Sequence

from .. import outcomes
from ..answers import Answer
from ..dialects.base import Backend, DbError, Execution
from ..errors import InfrastructureError
from ..outcomes import TestOutcome
from ..runner import TaskRun
from ..settings import Settings
from ..tasks import Task, UnitTest
from . import failure_types as ft
from . import state as st

log = logging.getLogger(__name__)

SCRATCH_PG = "answers"


@dataclass
class CallResult:
    """What one call did: its error (if any) and the state after it."""

    error: DbError | None
    state: st.State

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


#: Gold's results per backend (one per worker), keyed by task and content.
_GOLD: "weakref.WeakKeyDictionary[Backend, dict[str, GoldRun]]" = weakref.WeakKeyDictionary()


def _gold_key(task: Task) -> str:
    turn = task.turns[0]
    parts = [task.id, turn.reference or "", *[t.script or "" for t in turn.tests], *[f.key for f in task.fixtures]]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


# --------------------------------------------------------------------------- dialect access
class Access:
    """What the judge needs from a dialect beyond Session.run: write grants, snapshots, restore."""

    def __init__(self, backend: Backend, task: Task) -> None:
        self.backend = backend
        self.task = task
        self.schema = str(task.metadata.get("schema") or task.metadata.get("database"))

    def prepare(self) -> None: ...

    def begin(self) -> None:
        """Right after the session's begin_task: set up the run's scope (e.g. search_path)."""

    def snapshot(self) -> st.State:
        raise NotImplementedError

    def restore(self) -> None:
        """After a run (gold's or the candidate's): bring the database back to the clean state."""

    def hold(self) -> None:
        """Keep the task's tables to this worker for the task (a database workers share)."""

    def release(self) -> None: ...


class PostgresAccess(Access):
    def prepare(self) -> None:
        self.backend.allow_writes([self.schema])  # type: ignore[attr-defined]

    def begin(self) -> None:
        path = self.task.metadata.get("search_path")
        if path:  # PLForge: unqualified table names resolve in the Spider schema
            from psycopg import sql as pgsql

            conn = self.backend.session().conn  # type: ignore[attr-defined]
            conn.execute(pgsql.SQL("SET LOCAL search_path = {}").format(
                pgsql.SQL(", ").join(pgsql.Identifier(s) for s in [SCRATCH_PG, *path, "public"])))

    def snapshot(self) -> st.State:
        conn = self.backend.session().conn  # type: ignore[attr-defined]
        return st.pg_snapshot(conn, [self.schema, SCRATCH_PG])


class OracleAccess(Access):
    def prepare(self) -> None:
        from .oracle_restore import Restorer

        self.backend.allow_writes([self.schema])  # type: ignore[attr-defined]
        self.restorer = Restorer.for_backend(self.backend, self.schema)

    def begin(self) -> None:
        path = self.task.metadata.get("search_path")
        if path:  # PLForge: unqualified table names resolve to the Spider owner's tables
            from .oracle_restore import TABLES_SQL, ora_quote

            session = self.backend.session()
            owner = str(path[0]).upper()
            for (table,) in self.backend._admin_sql(TABLES_SQL, [owner]):  # type: ignore[attr-defined]
                session._sql(f"CREATE OR REPLACE SYNONYM {ora_quote(table)} FOR {ora_quote(owner)}.{ora_quote(table)}")  # type: ignore[attr-defined]

    def snapshot(self) -> st.State:
        session = self.backend.session()
        return st.ora_snapshot(session.conn, [self.schema, self.backend.candidate])  # type: ignore[attr-defined]

    def hold(self) -> None:
        import contextlib

        if getattr(self, "_held", None) is None:
            self._held = contextlib.ExitStack()
            self._held.enter_context(self.restorer.exclusive(self.backend))

    def release(self) -> None:
        held, self._held = getattr(self, "_held", None), None
        if held is not None:
            held.close()

    def restore(self) -> None:
        self.restorer.restore()


def access_for(backend: Backend, task: Task) -> Access:
    return PostgresAccess(backend, task) if backend.dialect == "postgres" else OracleAccess(backend, task)


# --------------------------------------------------------------------------- the run
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


class CallSuiteRun(TaskRun):
    """A TaskRun whose items are the calls of one suite, judged by state (same item interface)."""

    def __init__(self, backend: Backend, task: Task, answers: Sequence["Answer | str | None"], settings: Settings,
                 safety: Any = None) -> None:
        super().__init__(backend, task, answers, settings, safety)
        self.access = access_for(backend, task)
        self.gold: GoldRun | None = None
        self.results: list[CallResult] = []
        self.outcome_cache: dict[int, TestOutcome] = {}
        self.calls = [t.script or "" for t in task.turns[0].tests]
        #: Which tables differed at the first mismatching call (for failure types).
        self.first_mismatch: dict[str, Any] | None = None

    # ----------------------------------------------------------------- lifecycle
    def _start_once(self) -> None:
        self.backend.ensure_fixtures(self.task.fixtures)
        self.access.prepare()
        self.access.hold()
        self.access.restore()  # Oracle: whatever an interrupted run left, the task starts clean
        self.gold = self._gold()
        session = self.backend.session()
        session.begin_task()
        self.access.begin()
        self.installed_upto = 0
        self.results = []
        self.outcome_cache = {}
        self._epoch = session.scope_epoch

    def finish(self) -> None:
        if not self.started:
            return
        try:
            super().finish()
        finally:
            try:
                self.access.restore()
            finally:
                self.access.release()

    def _gold(self) -> GoldRun:
        cache = _GOLD.setdefault(self.backend, {})
        key = _gold_key(self.task)
        if key not in cache:
            cache[key] = self._run_gold()
        return cache[key]

    def _run_gold(self) -> GoldRun:
        session = self.backend.session()
        session.begin_task()
        try:
            self.access.begin()
            run = GoldRun(clean=self.access.snapshot())
            reference = self.task.turns[0].reference
            if not reference:
                run.error = "the task has no gold procedure"
                return run
            install = session.run(reference, isolated=False, phase="reference")
            if not install.ok:
                assert install.error is not None
                run.error = f"gold failed to install: {install.error.short()}"
                return run
            for call in self.calls:
                done = session.run(call, isolated=False, phase="reference")
                if done.error is not None and done.error.failure_class == outcomes.INFRASTRUCTURE:
                    raise InfrastructureError(done.error.message)
                run.calls.append(CallResult(done.error, self.access.snapshot()))
            return run
        finally:
            session.end_task()
            self.access.restore()

    # ----------------------------------------------------------------- candidate
    def _run_install(self, state: Any, index: int, code: str, failure: str) -> None:
        super()._run_install(state, index, code, failure)
        if state.blocked is not None or self.gold is None:
            return
        # Installing must not write the task's data: that would be an answer acting outside its
        # procedure (and could pre-compute the state the calls are judged by).
        now = self.access.snapshot()
        changed = [n for n in st.differing_tables(self.gold.clean, now) if not n.startswith(self._scratch_prefix())]
        if changed:
            state.blocked = TestOutcome(index, "", False, outcomes.INVALID_ARTIFACT,
                                        f"{failure}: installing the answer changed table(s) {', '.join(changed)}")

    def _scratch_prefix(self) -> str:
        if self.backend.dialect == "postgres":
            return SCRATCH_PG + "."
        return str(getattr(self.backend, "candidate", "")).lower() + "."

    def _restart_rollout(self, turn_index: int) -> None:
        # After recovering from an infrastructure error: the calls run again from the clean state.
        self.results, self.outcome_cache = [], {}
        super()._restart_rollout(turn_index)
        self.access.begin()

    def _run_test_once(self, turn_index: int, test: UnitTest) -> TestOutcome:
        if self.backend.session().scope_epoch != self._epoch:
            # The session lost its scope (its connection died under the answer): start over.
            self.finish()
            self.started = True
            self._start_once()
        if self.gold is None or self.gold.error:
            why = self.gold.error if self.gold else "gold was not run"
            return TestOutcome(turn_index, test.id, False, outcomes.INFRASTRUCTURE, why or "gold failed")
        k = int(test.options.get("call") or (self.calls.index(test.script or "") + 1))
        if k in self.outcome_cache:
            return self.outcome_cache[k]
        self.ensure_turn(1)
        turn = self.turns[0]
        if turn.blocked is not None:
            b = turn.blocked
            out = TestOutcome(turn_index, test.id, False, b.failure_class, b.message, error_code=b.error_code)
            if b.failure_class not in outcomes.EXCLUDED:
                out.extra["failure_type"] = ft.of_error(b.error_code, b.failure_class, b.message)
            return out
        session = self.backend.session()
        while len(self.results) < k:
            n = len(self.results) + 1
            done: Execution = session.run(self.calls[n - 1], isolated=False, phase="test")
            self.results.append(CallResult(done.error, self.access.snapshot()))
            self.outcome_cache[n] = self._judge_call(n, f"call-{n}", turn_index, done.notes)
        return self.outcome_cache[k]

    def _judge_call(self, n: int, test_id: str, turn_index: int, notes: list[str]) -> TestOutcome:
        assert self.gold is not None
        gold, cand = self.gold.calls[n - 1], self.results[n - 1]
        raise_problem = _same_raise(gold, cand)
        diffs = st.diff(gold.state, cand.state)
        outcome: TestOutcome
        if raise_problem is None and not diffs:
            outcome = TestOutcome(turn_index, test_id, True)
        else:
            message = "\n".join(m for m in [raise_problem, *diffs] if m)
            if cand.error is not None and raise_problem:
                cls = cand.error.failure_class if cand.error.failure_class != outcomes.INFRASTRUCTURE else outcomes.WRONG_OUTPUT
                code = cand.error.code
            else:
                cls, code = outcomes.WRONG_OUTPUT, None
            outcome = TestOutcome(turn_index, test_id, False, cls, message, error_code=code)
            outcome.extra["failure_type"] = ft.of_call(
                candidate_error=(cand.error.code, cand.error.failure_class, cand.error.message) if cand.error else None,
                gold_raised=gold.raised,
                candidate=self.turns[0].answer.code or "", gold=self.task.turns[0].reference or "",
            )
            outcome.extra["differing_tables"] = ",".join(st.differing_tables(gold.state, cand.state))
            if self.first_mismatch is None:
                self.first_mismatch = {"call": n, "raise": raise_problem, "tables": st.differing_tables(gold.state, cand.state)}
        if notes:
            outcome.extra["notes"] = "; ".join(notes)
        return outcome

    def run_test(self, turn_index: int, test: UnitTest) -> TestOutcome:
        t0 = time.monotonic()
        outcome = super().run_test(turn_index, test)
        outcome.duration_s = time.monotonic() - t0
        return outcome


def is_call_suite(task: Task) -> bool:
    return task.metadata.get("judge") == "procarena"


def evaluate(backend: Backend, task: Task, answer: "Answer | str | None", settings: Settings | None = None) -> list[TestOutcome]:
    """Every call's outcome for one answer (tests, validate)."""
    settings = settings or getattr(backend, "settings", None) or Settings(subsets=())
    run = CallSuiteRun(backend, task, [answer], settings)
    run.start()
    try:
        return [run.run_test(1, t) for t in task.turns[0].tests]
    finally:
        run.finish()

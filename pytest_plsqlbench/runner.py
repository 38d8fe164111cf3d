"""Running one task's answers and unit tests against a backend.

The protocol (PLSQLBench App. C and §3.4):

1. load the task's fixtures (once per worker);
2. let each judge compute what its tests expect before the candidate runs (the reference
   answers' output for Spider2, the gold SQL's rows for Spider; see :mod:`.judges`);
3. in a fresh state, install the candidate's answer for each turn in order (rollout: later
   turns see what earlier turns left) and run each unit test of the turn through its judge,
   in its own savepoint (or, for cumulative judges, in the task's scope, in order);
4. roll everything back.

An answer that fails to install fails every test of its turn with the install error's
class. Infrastructure errors are retried once on a recovered database; if they persist the
test is reported as ``infrastructure`` and left out of the metrics -- unless the backend says
the loss may be the answer's doing and it repeats with the same answer, which is then its
failure. Everything done for an answer counts against its task's time budget
(``--plsql-task-timeout``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from . import outcomes, registry
from .answers import Answer
from .episode import Episode
from .errors import FixtureError, InfrastructureError
from .judges import DEFAULT as DEFAULT_JUDGES
from .judges import Judge, JudgeContext, JudgeRegistry
from .outcomes import Verdict
from .protocols import BackendBase as Backend
from .protocols import Execution
from .settings import Settings
from .tasks import Task, Turn, UnitTest

log = logging.getLogger(__name__)

class SafetyCheck(Protocol):
    """Checks an answer before it runs (``--plsql-safety``; see :mod:`pytest_plsqlbench.safety`).

    Returns why the answer is refused, or None. ``earlier`` holds the conversation's previous
    answers, so objects those created count as the answer's own. In ``mode == "warn"`` a reason
    is reported with the turn's tests instead of refusing the turn.
    """

    mode: str

    def __call__(self, task: Task, turn: int, code: str, earlier: Sequence[str] = ()) -> str | None: ...


def _judged(judge: Judge, ctx: JudgeContext, turn_index: int, test: UnitTest, execution: Execution) -> Verdict:
    """The judge's verdict on what the answer's run produced.

    A judge that raises while comparing that output (which the answer controls: a number no
    decimal context holds, a line no parser expects) fails the test: an error here reported as
    the harness's would leave the task out of the metrics, a wrong answer's way to hide its
    failure. A judge's own ``InfrastructureError`` (it lost the database) stays the harness's.
    """
    try:
        return judge.judge(ctx, turn_index, test, execution)
    except InfrastructureError:
        raise
    except Exception as exc:  # noqa: BLE001 - counted against the answer, with the reason
        log.warning("judge %s raised on %s %s: %r", judge.kind, ctx.task.id, test.id, exc)
        return Verdict(turn_index, test.id, False, outcomes.WRONG_OUTPUT,
                       f"the output could not be judged ({type(exc).__name__}: {exc}); counted as a failure")


def _answers_own(exc: InfrastructureError) -> bool:
    """The backend says a repeat of this error under the same answer is the answer's doing."""
    return bool(getattr(exc, "repeats_are_the_answers", False))


@dataclass
class TurnState:
    answer: Answer
    #: Why the turn's tests fail without running (install error, unsafe, missing answer).
    blocked: Verdict | None = None
    #: What the harness did about the answer while installing it (skipped client commands,
    #: neutralised COMMIT ...), reported with each test of the turn.
    notes: list[str] = field(default_factory=list)
    #: A safety finding reported, not enforced (``--plsql-safety=warn``).
    warning: str | None = None


@dataclass
class TaskReport:
    task: Task
    outcomes: list[Verdict] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.outcomes) and all(o.passed for o in self.outcomes)

    def failures(self) -> list[Verdict]:
        return [o for o in self.outcomes if not o.passed]


class TaskRun:
    """One task's evaluation against one backend; the pytest items drive it test by test."""

    def __init__(
        self,
        backend: Backend,
        task: Task,
        answers: Episode | Sequence[Answer | str | None],
        *,
        safety: SafetyCheck | None = None,
        judges: JudgeRegistry | None = None,
        task_timeout: float = 0.0,
        missing: str = "fail",
        batch: bool = True,
    ) -> None:
        episode = answers if isinstance(answers, Episode) else Episode.of(task, answers)
        if not episode.done:
            raise ValueError(f"task {task.id}: {len(episode.answers)} answers for {len(task.turns)} turns")
        self.backend = backend
        self.task = task
        self.episode = episode
        self.safety = safety
        self.judges = judges if judges is not None else DEFAULT_JUDGES
        for turn in task.turns:
            for test in turn.tests:
                self.judges.check(test)
        self.turns = [TurnState(a) for a in episode.answers]
        self.ctx = JudgeContext(backend, task)
        self.installed_upto = 0
        self._epoch = 0
        #: Tests of cumulative judges already run in this scope, in order (replayed if it restarts).
        self._cumulative: list[tuple[int, UnitTest]] = []
        self.started = False
        #: The task's time budget in seconds (--plsql-task-timeout; 0: none) and what its answer
        #: has used so far.
        self.task_timeout = task_timeout
        self.spent = 0.0
        #: --plsql-missing: "fail" scores a missing answer, "exclude" leaves it out.
        self.missing = missing
        #: Run a turn's ``assert`` tests in one round trip where the session can (``_from_batch``).
        self.batch = batch and task.answer_mode == "install" and not any(
            self.judges[test.kind].mode == "cumulative" for turn in task.turns for test in turn.tests)
        #: Outcomes a batch decided, until their items ask for them; turns already batched.
        self._batched: dict[tuple[int, str], Verdict] = {}
        self._batched_turns: set[int] = set()
        #: The task's answers lost their session twice running one test: a later loss under
        #: them is theirs at once (the next test's first attempt only meets what is left of it).
        self._kills_its_session = False
        #: An empty answer passes every test of the task (known once started): see
        #: :meth:`~pytest_plsqlbench.judges.Judge.empty_answer_passes`.
        self.empty_answer_passes = False

    @property
    def expected(self) -> dict[tuple[int, str], object]:
        return self.ctx.expected

    @property
    def reference_error(self) -> str | None:
        return self.ctx.reference_error

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Load fixtures, capture reference outputs if needed, open the candidate scope."""
        self._with_recovery(self._start_once)
        self.started = True

    def _start_once(self) -> None:
        self.backend.ensure_fixtures(self.task.fixtures)
        self._prepare()
        self.empty_answer_passes = self._empty_answer_passes()
        session = self.backend.session()
        session.begin_task()
        self.installed_upto = 0
        self._cumulative = []
        self._epoch = session.scope_epoch

    def _prepare(self) -> None:
        """Each judge computes its tests' expectations once, before the candidate runs."""
        by_kind: dict[str, list[tuple[Turn, UnitTest]]] = {}
        for turn in self.task.turns:
            for test in turn.tests:
                by_kind.setdefault(test.kind, []).append((turn, test))
        for kind in sorted(by_kind, key=lambda k: self.judges[k].prepare_order):  # stable: ties keep test order
            self.judges[kind].prepare(self.ctx, by_kind[kind])

    def _empty_answer_passes(self) -> bool:
        """Every test of the task passes with an empty answer, as its judge decides (a test no
        judge can decide without the answer keeps the task in)."""
        verdicts = []
        for turn in self.task.turns:
            for test in turn.tests:
                try:
                    verdicts.append(self.judges[test.kind].empty_answer_passes(self.ctx, turn.index, test))
                except Exception as exc:  # noqa: BLE001 - a plugin judge's probe never fails the task
                    log.debug("task %s: empty-answer check of %s failed: %s", self.task.id, test.id, exc)
                    return False
        return bool(verdicts) and all(v is True for v in verdicts)

    def finish(self) -> None:
        if not self.started:
            return
        self.started = False
        try:
            self.backend.session().end_task()
        except InfrastructureError as exc:
            log.warning("task %s: cleanup failed (%s); recovering the database", self.task.id, exc)
            self.backend.recover()
        finally:
            for kind in dict.fromkeys(test.kind for turn in self.task.turns for test in turn.tests):
                self.judges[kind].finish(self.ctx)

    def _with_recovery(self, action: Callable[[], object]) -> object:
        try:
            return action()
        except FixtureError:
            raise  # the data's fault: recovering the database would not help
        except InfrastructureError as first:
            log.warning("task %s: %s; recovering and retrying once", self.task.id, first)
            try:
                self.backend.recover()
                return action()
            except InfrastructureError as second:
                raise InfrastructureError(f"{second} (after one retry on a recovered database)") from second

    # ----------------------------------------------------------------- candidate rollout
    def ensure_turn(self, index: int) -> None:
        while self.installed_upto < index:
            self._install(self.installed_upto + 1)
            self.installed_upto += 1

    def _install(self, index: int) -> None:
        state = self.turns[index - 1]
        answer = state.answer

        def blocked(cls: str, message: str) -> None:
            state.blocked = Verdict(turn=index, test_id="", passed=False, failure_class=cls, message=message)

        if answer.status == "not_generated":
            blocked(outcomes.NOT_GENERATED, f"not generated: {answer.error or 'no answer'}")
            if self.missing == "exclude":
                assert state.blocked is not None
                state.blocked.extra[outcomes.MISSING_EXCLUDED_KEY] = "--plsql-missing=exclude"
            return None
        if answer.status == "error":
            return blocked(outcomes.INFRASTRUCTURE, f"generation failed: {answer.error or 'provider error'}")
        code = answer.code or ""
        if not code.strip():
            why = f"the model gave no answer: {answer.error}" if answer.error else "the answer is empty"
            return blocked(outcomes.INVALID_ARTIFACT, why)
        if "\x00" in code:
            return blocked(outcomes.INVALID_ARTIFACT, "the answer contains NUL bytes")
        try:
            code.encode("utf-8")
        except UnicodeEncodeError:
            return blocked(outcomes.INVALID_ARTIFACT, "the answer is not valid UTF-8")
        if self.safety is not None:
            refusal = self._safety_check(index, code)
            if refusal and self.safety.mode == "warn":
                state.warning = refusal
            elif refusal:
                return blocked(outcomes.UNSAFE, refusal)
        if self.task.answer_mode == "execute":
            return None
        self._run_install(state, index, code, "the answer failed to install")
        return None

    def _run_install(self, state: TurnState, index: int, code: str, failure: str) -> None:
        session = self.backend.session()
        execution = session.run(code, isolated=False, phase="install")
        state.notes = list(execution.notes)
        err = execution.error
        if err is None and any(self.judges[t.kind].error_only for t in self.task.turns[index - 1].tests):
            err = session.before_assert_tests()
            failure = "the answer cannot be tested" if err is not None else failure
        if err is not None:
            state.blocked = Verdict(index, "", False, err.failure_class, f"{failure}: {err.short()}", error_code=err.code)

    def _safety_check(self, index: int, code: str) -> str | None:
        assert self.safety is not None
        earlier = tuple(t.answer.code or "" for t in self.turns[: index - 1])
        return self.safety(self.task, index, code, earlier=earlier)

    def outcomes(self, plan: Iterable[tuple[int, UnitTest]]) -> Iterator[Verdict]:
        """The verdict of each planned test, in plan order, each run when asked for: the one way
        a started task's tests are evaluated, whichever driver asks (pytest's items one by one,
        the look-ahead all at once). Batching is a step inside (:meth:`_from_batch`), not a path.

        Start and finish stay the caller's: a setup error belongs to the task's setup, and the
        look-ahead ends a task's run on its thread. A test that raises ends the generator; the
        caller gets the error and asks :meth:`run_test` for the rest.
        """
        for turn_index, test in plan:
            yield self.run_test(turn_index, test)

    def run_test(self, turn_index: int, test: UnitTest) -> Verdict:
        """Run one unit test (installing earlier turns first); never raises for model faults.

        Everything done for the answer here (installs, reinstalls after a lost session, the
        test, a retry) counts against the task's time budget; once it is used up the remaining
        tests fail as ``timeout`` without running.
        """
        t0 = time.monotonic()
        budget = self.task_timeout
        if budget and self.spent >= budget:
            return Verdict(
                turn_index, test.id, False, outcomes.TIMEOUT,
                f"not run: the answer used up its task's time budget of {budget:g}s (--plsql-task-timeout)",
            )
        try:
            session = self.backend.session()
            session.deadline = t0 + (budget - self.spent) if budget else None
        except InfrastructureError:
            session = None  # the attempts below report it
        try:
            outcome = self._from_batch(turn_index, test)
            if outcome is None:
                outcome = self._run_test_attempts(turn_index, test)
                outcome.duration_s = time.monotonic() - t0
        finally:
            if session is not None:
                session.deadline = None
            self.spent += time.monotonic() - t0
        if self.empty_answer_passes:
            outcome.extra[outcomes.EMPTY_ANSWER_PASSES_KEY] = True
        warning = self.turns[turn_index - 1].warning
        if warning:
            # --plsql-safety=warn: the answer ran; its record says what the check found.
            outcome.extra["safety_warning"] = warning
            outcome.message = "\n".join(m for m in (outcome.message, f"safety warning: {warning}") if m)
        return outcome

    def _run_test_attempts(self, turn_index: int, test: UnitTest) -> Verdict:
        try:
            outcome = self._run_test_once(turn_index, test)
            self._kills_its_session = False  # it met a live session: a later loss starts afresh
        except InfrastructureError as first:
            log.warning("task %s %s: %s; recovering and retrying once", self.task.id, test.id, first)
            try:
                self.backend.recover()
                self._restart_rollout(turn_index)
                outcome = self._run_test_once(turn_index, test)
                outcome.extra["retried"] = str(first)
            except InfrastructureError as second:
                if (_answers_own(first) or self._kills_its_session) and _answers_own(second):
                    self._kills_its_session = True
                    # The session was lost twice running the same answer, and nothing says the
                    # harness or anyone else ended it: the answer's failure (documented class).
                    outcome = Verdict(
                        turn_index, test.id, False, getattr(second, "repeat_class", outcomes.WRONG_OUTPUT),
                        f"the answer's session was lost again when run a second time: {second}",
                    )
                    # The task's next test starts on a live session, as this one's retry did
                    # (else it would meet the closed connection, not the answer).
                    self._recover_quietly(turn_index)
                else:
                    outcome = Verdict(
                        turn_index, test.id, False, outcomes.INFRASTRUCTURE,
                        f"infrastructure error (after one retry): {second}",
                    )
        return outcome

    # ----------------------------------------------------------------- batches
    def _from_batch(self, turn_index: int, test: UnitTest) -> Verdict | None:
        """The test's outcome from a batch of its turn's error-only tests, or None (run it alone).

        Once a turn's answer is installed (its first test ran on its own), the next error-only
        test runs that test and the turn's later error-only tests in one round trip
        (:meth:`Session.run_batch`), each undone as on its own. Every
        outcome the session is not certain of, and the whole batch when anything about it was
        unusual, is left to the ordinary path, so each item's outcome is the one it would have
        had on its own. The batch's time counts against the task's budget.
        """
        stored = self._batched.pop((turn_index, test.id), None)
        if stored is not None or not self.batch or turn_index in self._batched_turns:
            return stored
        state = self.turns[turn_index - 1]
        if (not self._batchable(test) or self.installed_upto < turn_index or state.blocked is not None):
            return None
        session = self.backend.session()
        if session.scope_epoch != self._epoch:
            return None
        self._batched_turns.add(turn_index)
        tests = self.task.turns[turn_index - 1].tests
        start = next(i for i, t in enumerate(tests) if t is test)
        chosen = [t for t in tests[start:] if self._batchable(t)]
        try:
            results = session.run_batch([t.script or "" for t in chosen])
        except InfrastructureError as exc:
            # The batch lost the session: bring it back as a test's retry would, then run each
            # test on its own (the one that lost it will lose it again, and be judged so).
            log.warning("task %s: a batch of tests lost the session (%s); running them one by one",
                        self.task.id, exc)
            self._recover_quietly(turn_index)
            return None
        if results is None:
            return None
        for t, result in zip(chosen, results):
            if result is None:
                continue
            outcome = _judged(self.judges[t.kind], self.ctx, turn_index, t, Execution(error=result.error))
            if state.notes:
                outcome.extra["notes"] = "; ".join(state.notes)
            outcome.duration_s = result.duration_s
            self._batched[(turn_index, t.id)] = outcome
        return self._batched.pop((turn_index, test.id), None)

    def _recover_quietly(self, turn_index: int) -> None:
        """Bring the session back and the rollout up to ``turn_index``; a failure is left for
        the next test to meet and report."""
        try:
            self.backend.recover()
            self._restart_rollout(turn_index)
        except InfrastructureError:
            pass

    def _batchable(self, test: UnitTest) -> bool:
        """A test with a script of its own whose judge needs only whether it raised."""
        return test.script is not None and self.judges[test.kind].error_only

    def _restart_rollout(self, turn_index: int) -> None:
        session = self.backend.session()
        session.begin_task()
        self._epoch = session.scope_epoch
        self.installed_upto = 0
        for state in self.turns:
            state.blocked, state.notes, state.warning = None, [], None
        self.ensure_turn(turn_index)
        self._replay_cumulative()

    def _replay_cumulative(self) -> None:
        """A restarted scope lost what cumulative tests did: run them again, in order."""
        done, self._cumulative = self._cumulative, []
        for turn_index, test in done:
            self.ensure_turn(turn_index)
            if self.turns[turn_index - 1].blocked is None:
                self.judges[test.kind].execute(self.ctx, turn_index, test, self.turns[turn_index - 1].answer.code or "")
            self._cumulative.append((turn_index, test))

    def _reinstall(self) -> None:
        """The session started its scope over (its connection died under an answer or a test):
        install again the turns that had installed, so later tests judge the answer, not its
        absence. Turns that failed to install stay failed, without running again."""
        session = self.backend.session()
        self._epoch = session.scope_epoch
        if self.task.answer_mode != "install":
            return
        for index, state in enumerate(self.turns[: self.installed_upto], 1):
            if state.blocked is None and state.answer.code:
                self._run_install(state, index, state.answer.code, "the answer failed to install again after its session was lost")
        self._replay_cumulative()
        self._epoch = session.scope_epoch

    def _run_test_once(self, turn_index: int, test: UnitTest) -> Verdict:
        if self.backend.session().scope_epoch != self._epoch:
            self._reinstall()
        judge = self.judges[test.kind]
        # A test whose expectation could not be computed judges nothing, whatever the answer
        # (PLSQLBench E.2 leaves reference errors out): check it before the answer's own state.
        if judge.needs_expectation(test) and (turn_index, test.id) not in self.ctx.expected:
            why = self.ctx.reference_error or "no reference output captured"
            outcome = Verdict(turn_index, test.id, False, outcomes.INFRASTRUCTURE, why)
            outcome.extra[outcomes.REFERENCE_FAILED_KEY] = True  # the benchmark's, not the run's (E.2)
            return outcome
        self.ensure_turn(turn_index)
        state = self.turns[turn_index - 1]
        if state.blocked is not None:
            b = state.blocked
            return Verdict(turn_index, test.id, False, b.failure_class, b.message, error_code=b.error_code,
                           extra=dict(b.extra))
        execution = judge.execute(self.ctx, turn_index, test, state.answer.code or "")
        if judge.mode == "cumulative":
            self._cumulative.append((turn_index, test))
        outcome = _judged(judge, self.ctx, turn_index, test, execution)
        notes = [*state.notes, *execution.notes]
        if notes:
            outcome.extra["notes"] = "; ".join(notes)
        return outcome


# --------------------------------------------------------------------------- conveniences


@contextlib.contextmanager
def open_backend(settings: Settings, worker: str = "main") -> Iterator[Backend]:
    """A started backend of the registered dialect ``settings.database.dialect``, for scripts and
    the CLI (``plsqlbench validate``)."""
    backend = registry.active().dialect(settings.database.dialect).make_backend(settings, worker)
    backend.start()
    try:
        yield backend
    finally:
        backend.stop()


def evaluate_task(
    backend: Backend,
    task: Task,
    answers: Sequence[Answer | str | None],
    settings: Settings | None = None,
    safety: SafetyCheck | None = None,
    judges: JudgeRegistry | None = None,
) -> TaskReport:
    """Run every unit test of ``task`` with the given per-turn answers (``settings``: the time
    budget and the missing-answer rule; defaults without)."""
    run = TaskRun(backend, task, answers, safety=safety, judges=judges,
                  task_timeout=settings.database.task_timeout if settings else 0.0,
                  missing=settings.answers.missing if settings else "fail")
    report = TaskReport(task)
    run.start()
    try:
        report.outcomes.extend(run.outcomes((turn.index, test) for turn in task.turns for test in turn.tests))
    finally:
        run.finish()
    return report

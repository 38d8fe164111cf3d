"""Judges: how a unit test of each ``kind`` is decided.

A unit test names its kind (``assert``, ``output``, ``rows``, ``reference`` built in); the
judge registered for that kind decides it. A judge is a small object with four steps, each
with a default, called by :class:`~pytest_plsqlbench.runner.TaskRun`:

1. :meth:`Judge.validate` -- is the test well formed for this kind (collection time);
2. :meth:`Judge.prepare` -- once per task, before the candidate runs, compute what the tests
   expect (the reference's output, the gold SQL's rows, gold procedure states ...) into
   ``ctx.expected``; :attr:`JudgeContext.worker_cache` keeps what is worth keeping across
   tasks of the worker;
3. :meth:`Judge.execute` -- run the test's script through the candidate session, either
   ``isolated`` (in a savepoint: the next test sees nothing of it) or ``cumulative`` (in the
   task's scope: the next test of the task sees its effects; the runner runs the tests of a
   task in order and replays the earlier cumulative tests if the scope had to start over);
4. :meth:`Judge.judge` -- turn what ran into a :class:`~pytest_plsqlbench.outcomes.Verdict`
   with a ``score`` (a float in [0, 1] for pass/fail judges, any number for graded ones) and
   typed ``extra`` values.

Plugins and conftests add judges with the ``pytest_plsql_judges`` hook (see
:mod:`pytest_plsqlbench.hooks`); a judge they return for a built-in kind replaces ours.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from . import kinds, outcomes
from .comparators import compare_output, compare_rows
from .outcomes import Verdict
from .outputs import returned_value
from .protocols import Execution

if TYPE_CHECKING:
    import pytest

    from .protocols import BackendBase as Backend
    from .protocols import SessionBase as Session
    from .tasks import Task, Turn, UnitTest

#: ``isolated``: each test in its own savepoint; ``cumulative``: tests build on each other.
JudgeMode = Literal["isolated", "cumulative"]


@dataclass
class JudgeContext:
    """What a judge may use while deciding one task's tests."""

    backend: Backend
    task: Task
    #: ``(turn, test id)`` -> what the test expects, filled by :meth:`Judge.prepare`.
    expected: dict[tuple[int, str], Any] = field(default_factory=dict)
    #: Why an expectation could not be computed (reported with the tests that lack one).
    reference_error: str | None = None
    #: ``(turn, test id)`` -> whether an empty answer passes the test, where :meth:`Judge.prepare`
    #: ran one (judges whose empty answer must really run, e.g. a test script that runs without it).
    empty_passes: dict[tuple[int, str], bool] = field(default_factory=dict)

    @property
    def session(self) -> Session:
        """The candidate session (an unprivileged role inside the task's isolation scope)."""
        return self.backend.session()

    @property
    def worker_cache(self) -> MutableMapping[str, Any]:
        """A per-worker memo shared by every task run on this backend (e.g. gold states)."""
        return self.backend.judge_cache


def printed(execution: Execution) -> list[str]:
    """What a run printed (DBMS_OUTPUT, RAISE NOTICE), without the rows its queries returned:
    what a test that runs the answer itself compares -- the prompt asks it to print, and a
    query's rows are not printed output (a plain SELECT is not a PL/SQL answer)."""
    if not execution.row_lines:  # none, or a session that does not say
        return list(execution.lines)
    rows = set(execution.row_lines)
    return [line for i, line in enumerate(execution.lines) if i not in rows]


def returned(execution: Execution) -> list[str]:
    """The rows a run's queries returned, each printed line (DBMS_OUTPUT, RAISE NOTICE) kept in
    its place as ``<printed> ...``: a test of what a query returns fails on a value printed."""
    if execution.row_lines is None:  # a session that does not say: every line alike
        return list(execution.lines)
    rows = set(execution.row_lines)
    return [line if i in rows else f"<printed> {line}" for i, line in enumerate(execution.lines)]


#: First words of a statement that only returns rows.
_QUERY_WORDS = frozenset({"SELECT", "WITH", "VALUES", "TABLE"})


def _only_queries(script: str, dialect: str) -> bool:
    from .scripts import split

    try:
        statements = split(script, dialect)
    except Exception:  # noqa: BLE001 - a script the splitter cannot read is judged as written
        return False
    return bool(statements) and all(st.first_words(1) in _QUERY_WORDS for st in statements)


def capture(execution: Execution) -> list[str]:
    """Every line with where it came from, plus the error, so reference and candidate compare
    on all three: a query's row as ``<row> ...``; ``<error CODE>`` for the error; a printed line
    as it is, or behind a ``\\`` when it starts with ``<`` or ``\\`` -- so no printed line can
    pass for a row, for the error marker or for the other's escape (printing ``<error P0001>``
    is not raising P0001, and printing a value is not returning it)."""
    rows = set(execution.row_lines or ())
    lines = []
    for i, line in enumerate(execution.lines):
        if i in rows:
            lines.append(f"<row> {line}")
        elif line.startswith(("<", "\\")):
            lines.append(f"\\{line}")
        else:
            lines.append(line)
    if execution.error is not None:
        lines.append(f"<error {execution.error.code or execution.error.failure_class}>")
    return lines


class Judge:
    """Decides the unit tests of one kind; subclass and register with ``pytest_plsql_judges``."""

    kind: ClassVar[str] = ""
    mode: ClassVar[JudgeMode] = "isolated"
    #: When :meth:`prepare` runs among the task's judges, lowest first (ties: first test's order).
    prepare_order: ClassVar[int] = 100
    #: The verdict depends only on whether the test's script raised, not on what it printed:
    #: such tests may be run in one batch per turn and ahead of pytest on a thread, and the
    #: session checks the installed answer first (``Session.before_assert_tests``).
    error_only: ClassVar[bool] = False

    def validate(self, test: UnitTest) -> None:
        """Raise ``ValueError`` naming the test if it is not well formed for this kind."""

    def needs_expectation(self, test: UnitTest) -> bool:
        """Whether ``test`` is judged against something :meth:`prepare` computes."""
        return False

    def prepare(self, ctx: JudgeContext, tests: list[tuple[Turn, UnitTest]]) -> None:
        """Compute expectations for ``tests`` (this kind's tests of the task) into ``ctx.expected``.

        Runs once per task on the worker, before the candidate's answer is installed; open and
        close your own scope (``ctx.session.begin_task()`` ... ``end_task()``).
        """

    def execute(self, ctx: JudgeContext, turn: int, test: UnitTest, answer: str) -> Execution:
        """Run the test's script (or the answer itself when the test has none)."""
        script = test.script if test.script is not None else answer
        return ctx.session.run(script, isolated=self.mode == "isolated", phase="test")

    def judge(self, ctx: JudgeContext, turn: int, test: UnitTest, execution: Execution) -> Verdict:
        raise NotImplementedError

    def empty_answer_passes(self, ctx: JudgeContext, turn: int, test: UnitTest) -> bool | None:
        """Whether an empty answer passes ``test`` (after :meth:`prepare`); None: not known.

        A task every test of which an empty answer passes is left out by default (it measures
        nothing). Default: what :meth:`prepare` found by running one (``ctx.empty_passes``), else,
        where the answer *is* the test's program (``answer_mode: execute``, no script), the verdict
        on what an empty program does -- print nothing, raise nothing. Other tests are not known.
        """
        if (turn, test.id) in ctx.empty_passes:
            return ctx.empty_passes[(turn, test.id)]
        if test.script is not None or ctx.task.answer_mode != "execute":
            return None
        if self.needs_expectation(test) and (turn, test.id) not in ctx.expected:
            return None
        return self.judge(ctx, turn, test, Execution()).passed

    def finish(self, ctx: JudgeContext) -> None:
        """After the task's scope ended: undo what :meth:`prepare` or the tests did outside it
        (ProcArena on Oracle restores the committed tables here)."""


def _error_outcome(turn: int, test: UnitTest, execution: Execution, actual: list[str]) -> Verdict:
    err = execution.error
    assert err is not None
    return Verdict(
        turn, test.id, False, err.failure_class, err.short(),
        list(test.expected) if test.expected is not None else None, actual, err.code,
    )


#: Prefix of the DETAIL a converted PostgreSQL case raises when it fails: JSON holding the
#: returned value (``actual``, ``actual_chars``) and the accepted ones (``expected``), as the
#: database prints them (convert/postgres.py writes it).
CASE_DETAIL = "plsqlbench-case "
_DETAIL_LINE = "DETAIL:  " + CASE_DETAIL


def case_values(message: str) -> tuple[list[str], str, int] | None:
    """The accepted values, the returned value and its length from a failing case's DETAIL, or
    None when the error is not one (an exception inside the answer, a clipped message)."""
    for line in message.splitlines():
        if line.startswith(_DETAIL_LINE):
            try:
                data = json.loads(line[len(_DETAIL_LINE):])
            except ValueError:
                return None
            if not isinstance(data, dict) or not isinstance(data.get("expected"), list):
                return None
            actual = data.get("actual")
            shown = "NULL" if actual is None else str(actual)
            length = data.get("actual_chars")
            return (["NULL" if e is None else str(e) for e in data["expected"]], shown,
                    int(length) if isinstance(length, int) else len(shown))
    return None


def _accepted(values: list[str]) -> str:
    return values[0] if len(values) == 1 else "one of " + " | ".join(values)


#: The case label a failing MBPP block raises (``ORA-20001: case_2 failed``, ``base_1 failed: got``).
_FAILED_CASE = re.compile(r"^(?:ORA-\d{5}:\s*)?([A-Za-z]\w*) failed\b")


def _case_of(test: UnitTest, message: str) -> tuple[str, list[str]] | None:
    """The call and accepted values of the case that failed: the test's own (a converted case)
    or, for a block of several cases (a published MBPP-PLSQL block), the one its message names."""
    call, literals = test.options.get("call"), test.options.get("expected")
    if isinstance(call, str) and isinstance(literals, list):
        return call, [str(x) for x in literals]
    cases = test.options.get("cases")
    first = message.strip().splitlines()[0] if message.strip() else ""
    named = _FAILED_CASE.match(first)
    if not isinstance(cases, dict) or named is None:
        return None
    case = cases.get(named.group(1))
    if not isinstance(case, dict) or not isinstance(case.get("call"), str) or not isinstance(case.get("expected"), list):
        return None
    return case["call"], [str(x) for x in case["expected"]]


class AssertJudge(Judge):
    """The script runs without raising (MBPP assertion blocks).

    A converted case names its call and accepted values in ``options`` (``call``, ``expected``),
    a published block of several cases each case's (``cases``: label -> call, expected): a
    failure then shows the call, the expected value and what the answer returned, as a user
    would write them, instead of the script's bare exception. The returned value comes from the
    PostgreSQL case's DETAIL or the Oracle block's message (:data:`~.outputs.RETURNED_MARK`);
    whether the test passed is the script's alone."""

    kind = "assert"
    error_only = True

    def judge(self, ctx: JudgeContext, turn: int, test: UnitTest, execution: Execution) -> Verdict:
        if execution.error is None:
            return Verdict(turn, test.id, True)
        err = execution.error
        case = _case_of(test, err.message)
        if case is None:
            return _error_outcome(turn, test, execution, list(execution.lines))
        call, expected = case
        found = case_values(err.message)
        if found is None:
            returned = returned_value(err.message)
            if returned is not None:
                found = (expected, returned[1], returned[2])
        if found is None:  # it raised before a value came back: what it raised
            message = f"{call}: {err.short()}; expected {_accepted(expected)}"
            return Verdict(turn, test.id, False, err.failure_class, message, expected,
                               list(execution.lines), err.code, extra={"call": call})
        expected, actual, length = found
        more = f" ... <{length - len(actual)} more characters>" if length > len(actual) else ""
        message = f"{call} returned {actual}{more}; expected {_accepted(expected)}"
        return Verdict(turn, test.id, False, err.failure_class, message, expected, [actual + more], err.code,
                           extra={"call": call})


class OutputJudge(Judge):
    """Captured output lines equal ``expected`` (subclasses change where expected lines come from
    and how they compare)."""

    kind = "output"

    def validate(self, test: UnitTest) -> None:
        kinds.check_output(test)

    def expected_lines(self, ctx: JudgeContext, turn: int, test: UnitTest) -> list[str]:
        return list(test.expected or ())

    def compare(self, expected: list[str], actual: list[str], test: UnitTest) -> tuple[bool, str]:
        return compare_output(expected, actual)

    def judge(self, ctx: JudgeContext, turn: int, test: UnitTest, execution: Execution) -> Verdict:
        # A test that runs the answer itself compares what it printed; a test whose script only
        # queries (``SELECT f(3)``) what the queries returned (a value the answer prints instead
        # is a line of its own, which no expected row equals); any other script (``CALL p()``)
        # everything, as written in ``expected``.
        if test.script is None:
            actual = printed(execution)
        elif _only_queries(test.script, ctx.task.dialect):
            actual = returned(execution)
        else:
            actual = list(execution.lines)
        if execution.error is not None:
            return _error_outcome(turn, test, execution, actual)
        expected = self.expected_lines(ctx, turn, test)
        ok, why = self.compare(expected, actual, test)
        if ok:
            return Verdict(turn, test.id, True, expected=expected, actual=actual)
        return Verdict(turn, test.id, False, outcomes.WRONG_OUTPUT, why, expected, actual)


class RowsJudge(OutputJudge):
    """Output lines equal the gold rows (given, or the gold SQL's result), up to column order."""

    kind = "rows"
    prepare_order = 10  # after the reference capture, as before judges were pluggable

    def validate(self, test: UnitTest) -> None:
        kinds.check_rows(test)

    def needs_expectation(self, test: UnitTest) -> bool:
        return test.expected is None

    def prepare(self, ctx: JudgeContext, tests: list[tuple[Turn, UnitTest]]) -> None:
        """Expected rows of ``rows`` tests without given rows: the gold SQL's result in this database."""
        wanted = [(turn, test) for turn, test in tests if test.expected is None]
        if not wanted:
            return
        session = ctx.session
        session.begin_task()
        try:
            for turn, test in wanted:
                gold = session.run(str(test.options["gold_sql"]), isolated=True, phase="reference")
                if not gold.ok:
                    assert gold.error is not None
                    ctx.reference_error = f"gold SQL of {test.id} failed: {gold.error.short()}"
                    continue
                ctx.expected[(turn.index, test.id)] = list(gold.lines)
        finally:
            session.end_task()

    def expected_lines(self, ctx: JudgeContext, turn: int, test: UnitTest) -> list[str]:
        return list(test.expected) if test.expected is not None else list(ctx.expected[(turn, test.id)])

    def compare(self, expected: list[str], actual: list[str], test: UnitTest) -> tuple[bool, str]:
        return compare_rows(expected, actual, test.options)


class ReferenceJudge(Judge):
    """Output equals what the reference answer printed for the same script in a clean state (Spider2)."""

    kind = "reference"
    prepare_order = 0

    def needs_expectation(self, test: UnitTest) -> bool:
        return True

    def prepare(self, ctx: JudgeContext, tests: list[tuple[Turn, UnitTest]]) -> None:
        """Run the reference answers turn by turn (later turns see earlier ones), capturing each test."""
        task = ctx.task
        session = ctx.session
        session.begin_task()
        try:
            for turn in task.turns:
                if turn.reference is None:
                    ctx.reference_error = f"turn {turn.index} has no reference answer"
                    return
                install = (
                    session.run(turn.reference, isolated=False, phase="reference")
                    if task.answer_mode == "install"
                    else Execution()
                )
                if not install.ok:
                    assert install.error is not None
                    ctx.reference_error = f"reference answer of turn {turn.index} failed: {install.error.short()}"
                    return
                for test in turn.tests:
                    if test.kind != self.kind:
                        continue
                    script = test.script if test.script is not None else turn.reference
                    ctx.expected[(turn.index, test.id)] = capture(session.run(script, isolated=True, phase="reference"))
        finally:
            session.end_task()
        self._run_empty(ctx, tests)

    def _run_empty(self, ctx: JudgeContext, tests: list[tuple[Turn, UnitTest]]) -> None:
        """An empty answer, really run: each test script in a clean state with no answer installed
        (an empty answer installs nothing, whatever turn); ``ctx.empty_passes`` says which pass."""
        scripted = [(turn, test) for turn, test in tests
                    if test.script is not None and (turn.index, test.id) in ctx.expected]
        if not scripted:
            return
        session = ctx.session
        session.begin_task()
        try:
            for turn, test in scripted:
                got = capture(session.run(str(test.script), isolated=True, phase="reference"))
                ctx.empty_passes[(turn.index, test.id)] = compare_output(ctx.expected[(turn.index, test.id)], got)[0]
        finally:
            session.end_task()

    def judge(self, ctx: JudgeContext, turn: int, test: UnitTest, execution: Execution) -> Verdict:
        actual = capture(execution)
        err = execution.error
        expected = ctx.expected.get((turn, test.id))
        if expected is None:
            return Verdict(turn, test.id, False, outcomes.INFRASTRUCTURE, "no reference output captured")
        ok, why = compare_output(expected, actual)
        if ok:
            return Verdict(turn, test.id, True, expected=expected, actual=actual)
        cls = err.failure_class if err is not None else outcomes.WRONG_OUTPUT
        msg = (f"{err.short()}\n" if err is not None else "") + why
        return Verdict(turn, test.id, False, cls, msg, expected, actual, err.code if err else None)


BUILTIN: tuple[Judge, ...] = (AssertJudge(), OutputJudge(), RowsJudge(), ReferenceJudge())


class JudgeRegistry(Mapping[str, Judge]):
    """Kind -> judge. Built-ins first; judges added later replace a kind's earlier judge."""

    def __init__(self, judges: Iterable[Judge] = BUILTIN) -> None:
        self._by_kind: dict[str, Judge] = {}
        self.add(judges)

    def add(self, judges: Iterable[Judge]) -> JudgeRegistry:
        for judge in judges:
            if not isinstance(judge, Judge) or not judge.kind:
                raise TypeError(f"{judge!r} is not a Judge with a kind")
            self._by_kind[judge.kind] = judge
        return self

    def __getitem__(self, kind: str) -> Judge:
        return self._by_kind[kind]

    def __iter__(self):
        return iter(self._by_kind)

    def __len__(self) -> int:
        return len(self._by_kind)

    def check(self, test: UnitTest) -> None:
        """Raise ``ValueError`` if ``test``'s kind is unknown or the test is malformed for it."""
        judge = self._by_kind.get(test.kind)
        if judge is None:
            raise ValueError(f"unit test {test.id!r}: unknown kind {test.kind!r}; known: {', '.join(self._by_kind)}")
        judge.validate(test)


#: The built-in judges (what a run without plugins uses; scripts and ``evaluate_task`` too).
DEFAULT = JudgeRegistry()


def registry(config: pytest.Config | None = None) -> JudgeRegistry:
    """Built-in judges plus those every plugin returns from ``pytest_plsql_judges``."""
    if config is None:
        return DEFAULT
    found = JudgeRegistry()
    for judges in reversed(config.hook.pytest_plsql_judges(config=config)):  # later plugins (conftests) win
        found.add(judges or ())
    return found

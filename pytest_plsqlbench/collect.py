"""Benchmark tasks as pytest nodes: subset -> task -> one item per unit test.

Node ids are made and read by :mod:`pytest_plsqlbench.nodeids`. Answers come from one
:class:`~pytest_plsqlbench.episode.Episode` per task node; tests are decided by the judges of
:mod:`pytest_plsqlbench.judges`; each item leaves one :class:`~pytest_plsqlbench.results.record.TestOutcome`.

The task node's ``setup`` gets the task's answers and opens its isolation scope; its
``teardown`` rolls it back. pytest calls them around the task's items, so every item of a
task runs inside the task's scope and nothing leaks to the next task.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from . import judges, nodeids, outcomes
from .answers import Answer
from .episode import Episode
from .errors import FixtureError, InfrastructureError, PlsqlBenchError, UsageError
from .lookahead import Lookahead
from .lookahead import enabled_for as lookahead_enabled
from .outcomes import Verdict
from .outputs import around_difference, normalize_lines, printable
from .results.record import (
    MAX_ANSWER_TEXT,
    MAX_PROMPT_TEXT,
    MAX_SCRIPT_TEXT,
    TaskFacts,
    TestOutcome,
    clip_text,
    json_value,
)
from .runner import TaskRun
from .safety import make_checker
from .settings import Settings
from .state import get_settings, worker_id
from .tasks import Task, Turn, UnitTest

log = logging.getLogger(__name__)

HARNESS_KEY = pytest.StashKey["Harness"]()
MAX_RECORD_LINES = 50


scope_of = nodeids.scope_of


def marker_name(text: str) -> str:
    """``text`` as part of a marker name (``My.Set-2`` -> ``my_set_2``): an identifier that
    ``-m`` expressions and ``--strict-markers`` registration both take as is."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_").lower() or "_"


def subset_marker(subset: str) -> str:
    """The marker of a subset's items (``subset_my_set`` for ``My.Set``), whatever characters the
    subset's name has: the one spelling registered and applied."""
    return f"subset_{marker_name(subset)}"


def task_markers(task: Task) -> tuple[str, ...]:
    """Every marker a task's items carry: what :func:`_decorate` applies and the plugin registers
    (so ``--strict-markers`` accepts exactly these)."""
    return ("plsql", subset_marker(task.subset), f"dialect_{task.dialect}",
            "multiturn" if task.multi_turn else "singleturn", *task.markers)


class Harness:
    """Per-process state: the database backend and the answers of the tasks run here."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.backend = None
        self._backend_error: str | None = None
        self.env_sent = False
        self.safety = make_checker(settings.database)
        self.judges = judges.registry(config)
        self._lookahead: Lookahead | None = None
        self._lookahead_decided = False
        self._plans: dict[TaskNode, list[PlsqlItem]] | None = None

    def lookahead(self, session: pytest.Session) -> Lookahead | None:
        """The session's :class:`~pytest_plsqlbench.lookahead.Lookahead`, if this process may use one."""
        if not self._lookahead_decided:
            self._lookahead_decided = True
            if not self.settings.database.no_lookahead and lookahead_enabled(self.config):
                self._lookahead = Lookahead(
                    [(item, item.task_node if isinstance(item, PlsqlItem) else None) for item in session.items],
                    self.judges,
                )
        return self._lookahead

    def plan(self, session: pytest.Session, node: TaskNode) -> list[PlsqlItem]:
        """The node's items in ``session.items`` order: the tests pytest will ask its task for."""
        if self._plans is None:
            self._plans = {}
            for item in session.items:
                if isinstance(item, PlsqlItem):
                    self._plans.setdefault(item.task_node, []).append(item)
        return self._plans.get(node, [])

    def backend_for(self):  # noqa: ANN201 - Backend
        if self._backend_error is not None:
            raise InfrastructureError(self._backend_error)
        if self.backend is None:
            backend = self.config.hook.pytest_plsql_make_backend(config=self.config, settings=self.settings)
            try:
                backend.start()
            except Exception as exc:  # noqa: BLE001 - remembered: every later task fails fast, in one line
                detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                if not isinstance(exc, PlsqlBenchError):
                    log.error("starting the %s database failed", self.settings.database.dialect, exc_info=exc)
                self._backend_error = f"database unavailable: {detail}"
                raise InfrastructureError(self._backend_error) from None
            self.backend = backend
        return self.backend

    def episode(self, task: Task, sample: int) -> Episode:
        """The task's rollout: the generation hook asked for each turn in order, by the Episode a
        plugin returns from ``pytest_plsql_episode`` (an interactive one, say) or a plain one."""

        def ask(task: Task, turn: int, history: tuple, sample: int) -> Answer:
            answer = self.config.hook.pytest_plsql_generate(
                config=self.config, task=task, turn=turn, history=history, sample=sample
            )
            if answer is None:
                answer = Answer(code=None, status="error", error=f"no answer source handles model {self.settings.answer_source!r}")
            return answer

        episode = self.config.hook.pytest_plsql_episode(config=self.config, task=task, sample=sample)
        if episode is None:
            episode = Episode(task, sample)
        episode.play(ask)
        return episode

    def answers(self, task: Task, sample: int) -> list[Answer]:
        return self.episode(task, sample).answers

    def close(self) -> None:
        try:
            if self._lookahead is not None:
                self._lookahead.drain()  # before the backend goes: a job may still be using it
        finally:
            self._stop_backend()

    def _stop_backend(self) -> None:
        if self.backend is not None:
            try:
                self.backend.stop()
            finally:
                self.backend = None


#: The skip reason of a task an empty answer passes (every family: decided by its judges).
LEFT_OUT_EMPTY = (
    f"{outcomes.LEFT_OUT_PREFIX} an answer that does nothing passes every test of this task, so it measures nothing "
    "(--plsql-keep-constant-tasks keeps it)"
)


def keep_constant_tasks(config: pytest.Config) -> bool:
    """``--plsql-keep-constant-tasks`` / ini ``plsql_keep_constant_tasks``: keep the tasks a constant
    or an empty answer passes (left out by default)."""
    given = config.getoption("plsql_keep_constant_tasks", None)
    if given is not None:
        return bool(given)
    try:
        return bool(config.getini("plsql_keep_constant_tasks"))
    except ValueError:  # the option is not registered (a run without the MBPP loader plugin)
        return False


class PlsqlFailure(Exception):
    """A unit test failed; carries the outcome (the model's fault, or excluded infra)."""

    def __init__(self, outcome: Verdict) -> None:
        super().__init__(clip(outcome.message))
        self.outcome = outcome


class SubsetNode(pytest.Collector):
    def __init__(self, *, tasks: Sequence[Task] = (), manifest_path: Path | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.tasks = tasks
        self.manifest_path = manifest_path
        self._children: list[pytest.Item | pytest.Collector] = []

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        return self._children


class TaskNode(pytest.Collector):
    def __init__(self, *, task: Task, sample: int = 0, **kw: Any) -> None:
        super().__init__(**kw)
        self.task = task
        self.sample = sample
        self.run: TaskRun | None = None
        self.answers: list[Answer] = []
        self.reported_task = False
        self.reported_turns: set[int] = set()
        self._children: list[PlsqlItem] = []
        #: Why the task's fixtures could not be loaded (a data error), if so.
        self.fixture_error: str | None = None
        #: Its items' location path, relative to the root (``PlsqlItem.location``).
        self.relpath: str | None = None
        #: The items of :meth:`Harness.plan` not asked for yet, and the run's verdicts for them
        #: (``TaskRun.outcomes``); None once pytest asked out of that order.
        self._plan: Iterator[PlsqlItem] = iter(())
        self._verdicts: Iterator[Verdict] | None = None

    def collect(self) -> Iterable[pytest.Item]:
        return self._children

    def setup(self) -> None:
        harness: Harness = self.config.stash[HARNESS_KEY]
        ahead = harness.lookahead(self.session)
        if ahead is None or not ahead.setup(self):
            self.setup_now()
            assert self.run is not None
            plan = harness.plan(self.session, self)
            self._plan = iter(plan)
            self._verdicts = self.run.outcomes((item.turn.index, item.test) for item in plan)

    def setup_now(self) -> None:
        harness: Harness = self.config.stash[HARNESS_KEY]
        episode = harness.episode(self.task, self.sample)
        self.answers = episode.answers
        backend = harness.backend_for()
        run = TaskRun(backend, self.task, episode, safety=harness.safety, judges=harness.judges,
                      task_timeout=harness.settings.database.task_timeout, missing=harness.settings.answers.missing)
        try:
            run.start()
        except FixtureError as exc:  # the data cannot be loaded: an error of the run, never a skip
            self.fixture_error = str(exc)
            raise
        self.run = run

    def teardown(self) -> None:
        ahead = self.config.stash[HARNESS_KEY].lookahead(self.session)
        try:
            if ahead is not None:
                ahead.teardown(self)
        finally:
            self.finish_run()

    def verdict(self, item: PlsqlItem) -> Verdict:
        """The item's verdict: the run's next one while pytest asks in plan order; else (pytest
        reordered the task's items at run time, or runs one again) the run's for this one test,
        and for the rest of the task -- the same calls either way."""
        run = self.run
        assert run is not None, "task setup did not run"
        if self._verdicts is not None and next(self._plan, None) is item:
            try:
                return next(self._verdicts)
            except BaseException:
                self._verdicts = None  # a generator that raised is done: the rest go one by one
                raise
        self._verdicts = None
        return run.run_test(item.turn.index, item.test)

    def finish_run(self) -> None:
        """End the task's run (its scope rolled back), once."""
        self._plan, self._verdicts = iter(()), None
        if self.run is not None:
            try:
                self.run.finish()
            finally:
                self.run = None


class PlsqlItem(pytest.Item):
    def __init__(self, *, turn: Turn, test: UnitTest, **kw: Any) -> None:
        super().__init__(**kw)
        self.turn = turn
        self.test = test
        self.outcome: Verdict | None = None
        #: Skipped because an empty answer passes its task (:data:`LEFT_OUT_EMPTY`).
        self.left_out = False

    @property
    def task_node(self) -> TaskNode:
        assert isinstance(self.parent, TaskNode)
        return self.parent

    def runtest(self) -> None:
        ahead = self.config.stash[HARNESS_KEY].lookahead(self.session)
        outcome = ahead.outcome(self) if ahead is not None else None
        if outcome is None:
            outcome = self.task_node.verdict(self)
        if outcome.extra.get(outcomes.EMPTY_ANSWER_PASSES_KEY) and not keep_constant_tasks(self.config):
            self.left_out = True
            # Reported at the item (its task), not at this line, as a skip mark's is.
            raise pytest.skip.Exception(LEFT_OUT_EMPTY, _use_item_location=True)
        self.outcome = outcome
        if not self.outcome.passed:
            raise PlsqlFailure(self.outcome)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str | Any:
        if isinstance(excinfo.value, PlsqlFailure):
            return failure_text(excinfo.value.outcome)
        if isinstance(excinfo.value, FixtureError):
            return f"[data error] {excinfo.value}"
        if isinstance(excinfo.value, PlsqlBenchError):
            return f"[{outcomes.INFRASTRUCTURE}] {excinfo.value}"
        return super().repr_failure(excinfo)

    def _repr_failure_py(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        # Setup errors (database unavailable ...) are one line, not a traceback.
        if isinstance(excinfo.value, FixtureError):
            return f"[data error] {excinfo.value}"
        if isinstance(excinfo.value, PlsqlBenchError):
            return f"[{outcomes.INFRASTRUCTURE}] {excinfo.value}"
        return super()._repr_failure_py(excinfo, style=style)

    def reportinfo(self) -> tuple[Path | str, int | None, str]:
        # A line number (not None): pytest's skip/skipif reporting asserts one exists.
        return self.path, 0, self.nodeid

    @functools.cached_property
    def location(self) -> tuple[str, int | None, str]:
        """pytest's ``Item.location`` (from :meth:`reportinfo`), with the path part worked out
        once per task: an item shares its task's path, and MBPP+ has ~100 items a task."""
        node = self.task_node
        if node.path != self.path:
            return super().location
        if node.relpath is None:
            node.relpath = self.session._node_location_to_relpath(Path(os.path.abspath(self.path)))
        return (node.relpath, 0, self.nodeid)


#: Characters of a failure message shown in the terminal report and JUnit (an answer controls it).
MAX_FAILURE_CHARS = 2000


def clip(text: str, limit: int = MAX_FAILURE_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]} ... <{len(text) - limit} more characters>"


def failure_text(outcome: Verdict) -> str:
    """What the terminal, JUnit and ``-rf`` show for a failed test: clipped, whatever the answer printed."""
    # The answer's text: no escape sequence reaches a terminal (the lines below are reprs).
    lines = [clip(printable(f"[{outcome.failure_class}] {outcome.message}".rstrip()))]
    if outcome.expected is not None and outcome.actual is not None and "expected" not in outcome.message:
        exp, act = _paired_lines(normalize_lines(outcome.expected[:6]), normalize_lines(outcome.actual[:6]))
        lines.append(f"expected: {exp[:5]!r}{' ...' if len(outcome.expected) > 5 else ''}")
        lines.append(f"actual:   {act[:5]!r}{' ...' if len(outcome.actual) > 5 else ''}")
    return "\n".join(lines)


def _paired_lines(expected: list[str], actual: list[str], width: int = 200) -> tuple[list[str], list[str]]:
    """The lines cut to ``width``, a pair that differs around its first difference: clipped at
    their start, two long lines differing late would read alike."""
    exp = [clip(x, width) for x in expected]
    act = [clip(x, width) for x in actual]
    for i, (e, a) in enumerate(zip(expected, actual)):
        if e != a:
            exp[i], act[i] = around_difference(e, a, width)
    return exp, act


def build_items(
    config: pytest.Config, session: pytest.Session, tasks_by_subset: dict[str, tuple[Path | None, list[Task]]]
) -> list[pytest.Item]:
    settings = get_settings(config)
    items: list[pytest.Item] = []
    for subset, (manifest_path, tasks) in tasks_by_subset.items():
        snode = SubsetNode.from_parent(session, name=subset, nodeid=subset, tasks=tasks, manifest_path=manifest_path)
        for task in tasks:
            for sample in range(settings.model.samples):
                task_nodeid = nodeids.task_nodeid(subset, task.node_name, sample, settings.model.samples)
                tnode = TaskNode.from_parent(snode, name=task.node_name, nodeid=task_nodeid, task=task, sample=sample)
                _decorate(tnode, task)
                snode._children.append(tnode)
                for turn in task.turns:
                    properties = _properties(task, turn, settings)
                    for test in turn.tests:
                        name = nodeids.item_name(turn.index, test.id, task.multi_turn)
                        item = PlsqlItem.from_parent(tnode, name=name, nodeid=f"{task_nodeid}/{name}", turn=turn, test=test)
                        item.user_properties.extend(properties)
                        tnode._children.append(item)
                        items.append(item)
    return items


def check_kinds(task: Task, registry: judges.JudgeRegistry) -> None:
    """Every test's kind has a judge in this run (plugins may add kinds), and fits it."""
    for turn in task.turns:
        for test in turn.tests:
            try:
                registry.check(test)
            except ValueError as exc:
                raise UsageError(f"subset {task.subset!r}, task {task.id!r}: {exc}") from None


def _decorate(tnode: TaskNode, task: Task) -> None:
    """The task's markers and ``-k`` words, on its node: its items inherit them (``-m``/``-k``,
    ``iter_markers`` and each report's keywords read the node chain), once per task instead of
    once per test."""
    for mark in task_markers(task):
        tnode.add_marker(mark)
    for value in task.metadata.values():
        # Identifiers only (a database, a procedure, a scenario code): ``-k`` matches substrings,
        # so a phrase such as "Performance optimization" would make ``-k 'not perf'`` deselect
        # every item of a B2 task instead of its ``perf`` item.
        if isinstance(value, str) and 0 < len(value) <= 60 and not any(c.isspace() for c in value):
            tnode.extra_keyword_matches.add(value)


def _properties(task: Task, turn: Turn, settings: Settings) -> list[tuple[str, object]]:
    """Each item's JUnit properties (its own list: pytest adds to it)."""
    return [
        ("task_id", task.id),
        ("subset", task.subset),
        ("turn", turn.index),
        ("dialect", task.dialect),
        ("model", settings.answer_source),
    ]


#: Characters kept of one expected/actual line: a returned value a human must read whole.
MAX_RECORD_LINE = 2000


def _clip(lines: list[str] | None) -> list[str] | None:
    if lines is None:
        return None
    n = MAX_RECORD_LINE
    return [line if len(line) <= n else f"{line[:n]} ... <{len(line) - n} more characters>" for line in lines[:MAX_RECORD_LINES]]


def _prompts(task: Task) -> list[str]:
    """Each turn's user message as the model is sent it (the system prompt is in the header)."""
    from .generation.prompts import user_message

    out = []
    for turn in task.turns:
        try:
            text = user_message(task, turn.index)
        except Exception:  # noqa: BLE001 - a task a plugin built oddly still gets its record
            text = turn.prompt
        out.append(clip_text(text, MAX_PROMPT_TEXT) or "")
    return out


def make_record(item: PlsqlItem, phase: str, excinfo: pytest.ExceptionInfo[BaseException] | None) -> TestOutcome:
    """The item's outcome the controller collects (attached to the report; plain values when serialised)."""
    node = item.task_node
    task = node.task
    verdict = item.outcome if phase == "call" else None
    if verdict is None:
        # Setup failed or was skipped, or the item raised something unexpected (the harness's fault).
        message = str(excinfo.value) if excinfo is not None else "not run"
        skipped = excinfo is not None and excinfo.errisinstance(pytest.skip.Exception)
        cls = outcomes.SKIPPED if skipped else outcomes.INFRASTRUCTURE
        verdict = Verdict(item.turn.index, item.test.id, False, cls, message.strip()[:1000])
    facts = None
    if not node.reported_task:
        node.reported_task = True
        facts = TaskFacts(
            # The results file keeps the reason a task cannot run among its facts.
            metadata={**task.metadata, "not_runnable": task.not_runnable} if task.not_runnable else dict(task.metadata),
            markers=list(task.markers),
            n_tests=task.n_tests,
            entry_points=list(task.entry_points),
            prompts=_prompts(task),
        )
    turn = item.turn.index
    answer = None
    if turn not in node.reported_turns and len(node.answers) >= turn:
        node.reported_turns.add(turn)
        ans = node.answers[turn - 1]
        answer = {
            "turn": turn,
            "sample": node.sample,
            "status": ans.status,
            "source": ans.source,
            "cache_key": ans.cache_key,
            "error": ans.error,
            "usage": dict(ans.usage),
            # What ran, exact (never clipped: ``plsqlbench answers export`` re-scores a run from its
            # file), and the reply it was extracted from when that differs (clipped: for reading).
            "code": ans.code,
            **({"raw": clip_text(ans.raw, MAX_ANSWER_TEXT)} if ans.raw and ans.raw.strip() != (ans.code or "").strip() else {}),
        }
    harness: Harness = item.config.stash[HARNESS_KEY]
    env = None
    if not harness.env_sent and harness.backend is not None:
        harness.env_sent = True
        env = {"db_version": harness.backend.version, "worker": worker_id(item.config)}
    return TestOutcome(
        subset=task.subset,
        task_id=task.id,
        node=task.node_name,
        dialect=task.dialect,
        n_turns=len(task.turns),
        turn=item.turn.index,
        test_id=item.test.id,
        sample=node.sample,
        passed=verdict.passed,
        failure_class=verdict.failure_class,
        score=verdict.score,
        message=verdict.message[:2000],
        error_code=verdict.error_code,
        expected=_clip(verdict.expected),
        actual=_clip(verdict.actual),
        duration_s=round(verdict.duration_s, 4),
        worker=worker_id(item.config),
        # e.g. "retried" after an infrastructure error, "safety_warning" under --plsql-safety=warn
        extra={str(k): json_value(v) for k, v in verdict.extra.items()},
        script=clip_text(item.test.script, MAX_SCRIPT_TEXT),
        task=facts,
        answer=answer,
        env=env,
    )

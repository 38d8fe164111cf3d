"""Benchmark tasks as pytest nodes: subset -> task -> one item per unit test.

Node ids are ``subset/task/test`` (``subset/task/turn-2/test`` for multi-turn tasks, with a
``sample-k`` level when several answers per task are scored). Everything before the test
part names the task, which is what the xdist scheduler keeps on one worker.

The task node's ``setup`` gets the task's answers and opens its isolation scope; its
``teardown`` rolls it back. pytest calls them around the task's items, so every item of a
task runs inside the task's scope and nothing leaks to the next task.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

import pytest

from . import outcomes
from .answers import Answer, Exchange
from .generation.prompts import rollout_exchange
from .errors import InfrastructureError, PlsqlBenchError
from .outcomes import TestOutcome
from .outputs import normalize_lines
from .runner import TaskRun
from .safety import make_checker
from .settings import Settings
from .state import get_settings, worker_id
from .tasks import Task, Turn, UnitTest

log = logging.getLogger(__name__)

HARNESS_KEY = pytest.StashKey["Harness"]()
MAX_RECORD_LINES = 50


def scope_of(nodeid: str) -> str:
    """The task part of a benchmark node id (xdist keeps a scope on one worker)."""
    return "/".join(nodeid.split("/")[:2])


def marker_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_").lower() or "_"


class Harness:
    """Per-process state: the database backend and the answers of the tasks run here."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.backend = None
        self._backend_error: str | None = None
        self.env_sent = False
        self.safety = make_checker(settings)

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
                    log.error("starting the %s database failed", self.settings.dialect, exc_info=exc)
                self._backend_error = f"database unavailable: {detail}"
                raise InfrastructureError(self._backend_error) from None
            self.backend = backend
        return self.backend

    def answers(self, task: Task, sample: int) -> list[Answer]:
        """Ask the generation hook for each turn in order, feeding back the task's own answers."""
        history: list[Exchange] = []
        answers: list[Answer] = []
        for turn in task.turns:
            if answers and answers[-1].status != "ok":
                prev = answers[-1]
                answers.append(Answer(code=None, status=prev.status, error=f"turn {turn.index - 1}: {prev.error}", source=prev.source))
                continue
            answer = self.config.hook.pytest_plsql_generate(
                config=self.config, task=task, turn=turn.index, history=tuple(history), sample=sample
            )
            if answer is None:
                answer = Answer(code=None, status="error", error=f"no answer source handles model {self.settings.answer_source!r}")
            answers.append(answer)
            # Built as the prefetcher builds it, or turn 2's cache key would differ.
            history.append(rollout_exchange(turn, answer))
        return answers

    def close(self) -> None:
        if self.backend is not None:
            try:
                self.backend.stop()
            finally:
                self.backend = None


class PlsqlFailure(Exception):
    """A unit test failed; carries the outcome (the model's fault, or excluded infra)."""

    def __init__(self, outcome: TestOutcome) -> None:
        super().__init__(outcome.message)
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

    def collect(self) -> Iterable[pytest.Item]:
        return self._children

    def setup(self) -> None:
        harness: Harness = self.config.stash[HARNESS_KEY]
        self.answers = harness.answers(self.task, self.sample)
        backend = harness.backend_for()
        run_type = TaskRun
        if self.task.metadata.get("judge") == "procarena":  # the call-suite (state) judge
            from .procarena.judge import CallSuiteRun as run_type
        run = run_type(backend, self.task, self.answers, harness.settings, harness.safety)
        run.start()
        self.run = run

    def teardown(self) -> None:
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
        self.outcome: TestOutcome | None = None

    @property
    def task_node(self) -> TaskNode:
        assert isinstance(self.parent, TaskNode)
        return self.parent

    def runtest(self) -> None:
        run = self.task_node.run
        assert run is not None, "task setup did not run"
        self.outcome = run.run_test(self.turn.index, self.test)
        if not self.outcome.passed:
            raise PlsqlFailure(self.outcome)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str | Any:
        if isinstance(excinfo.value, PlsqlFailure):
            return failure_text(excinfo.value.outcome)
        if isinstance(excinfo.value, PlsqlBenchError):
            return f"[{outcomes.INFRASTRUCTURE}] {excinfo.value}"
        return super().repr_failure(excinfo)

    def _repr_failure_py(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        # Setup errors (database unavailable ...) are one line, not a traceback.
        if isinstance(excinfo.value, PlsqlBenchError):
            return f"[{outcomes.INFRASTRUCTURE}] {excinfo.value}"
        return super()._repr_failure_py(excinfo, style=style)

    def reportinfo(self) -> tuple[Path | str, int | None, str]:
        # A line number (not None): pytest's skip/skipif reporting asserts one exists.
        return self.path, 0, self.nodeid


def failure_text(outcome: TestOutcome) -> str:
    lines = [f"[{outcome.failure_class}] {outcome.message}".rstrip()]
    if outcome.expected is not None and outcome.actual is not None and "expected" not in outcome.message:
        exp, act = normalize_lines(outcome.expected), normalize_lines(outcome.actual)
        lines.append(f"expected: {exp[:5]!r}{' ...' if len(exp) > 5 else ''}")
        lines.append(f"actual:   {act[:5]!r}{' ...' if len(act) > 5 else ''}")
    return "\n".join(lines)


def build_items(
    config: pytest.Config, session: pytest.Session, tasks_by_subset: dict[str, tuple[Path | None, list[Task]]]
) -> list[pytest.Item]:
    settings = get_settings(config)
    items: list[pytest.Item] = []
    for subset, (manifest_path, tasks) in tasks_by_subset.items():
        snode = SubsetNode.from_parent(session, name=subset, nodeid=subset, tasks=tasks, manifest_path=manifest_path)
        for task in tasks:
            for sample in range(settings.samples):
                task_nodeid = f"{subset}/{task.node_name}"
                if settings.samples > 1:
                    task_nodeid += f"/sample-{sample + 1}"
                tnode = TaskNode.from_parent(snode, name=task.node_name, nodeid=task_nodeid, task=task, sample=sample)
                snode._children.append(tnode)
                for turn in task.turns:
                    for test in turn.tests:
                        name = f"turn-{turn.index}/{test.id}" if task.multi_turn else test.id
                        item = PlsqlItem.from_parent(tnode, name=name, nodeid=f"{task_nodeid}/{name}", turn=turn, test=test)
                        _decorate(item, task, turn, settings)
                        tnode._children.append(item)
                        items.append(item)
    return items


def _decorate(item: PlsqlItem, task: Task, turn: Turn, settings: Settings) -> None:
    item.add_marker("plsql")
    item.add_marker(f"subset_{marker_name(task.subset)}")
    item.add_marker(f"dialect_{task.dialect}")
    item.add_marker("multiturn" if task.multi_turn else "singleturn")
    for mark in task.markers:
        item.add_marker(mark)
    for value in task.metadata.values():
        if isinstance(value, str) and 0 < len(value) <= 60:
            item.extra_keyword_matches.add(value)
    item.user_properties.extend(
        [
            ("task_id", task.id),
            ("subset", task.subset),
            ("turn", turn.index),
            ("dialect", task.dialect),
            ("model", settings.answer_source),
        ]
    )


def _clip(lines: list[str] | None) -> list[str] | None:
    if lines is None:
        return None
    return [line[:500] for line in lines[:MAX_RECORD_LINES]]


def make_record(item: PlsqlItem, phase: str, excinfo: pytest.ExceptionInfo[BaseException] | None) -> dict[str, Any]:
    """The JSON-able record the controller aggregates (attached to the report)."""
    node = item.task_node
    task = node.task
    outcome = item.outcome if phase == "call" else None
    if outcome is None:
        # Setup failed or was skipped, or the item raised something unexpected (the harness's fault).
        message = str(excinfo.value) if excinfo is not None else "not run"
        skipped = excinfo is not None and excinfo.errisinstance(pytest.skip.Exception)
        cls = outcomes.SKIPPED if skipped else outcomes.INFRASTRUCTURE
        outcome = TestOutcome(item.turn.index, item.test.id, False, cls, message.strip()[:1000])
    rec: dict[str, Any] = {
        "subset": task.subset,
        "task_id": task.id,
        "node": task.node_name,
        "dialect": task.dialect,
        "n_turns": len(task.turns),
        "turn": item.turn.index,
        "test_id": item.test.id,
        "sample": node.sample,
        "passed": outcome.passed,
        "failure_class": outcome.failure_class,
        "message": outcome.message[:2000],
        "error_code": outcome.error_code,
        "expected": _clip(outcome.expected),
        "actual": _clip(outcome.actual),
        "duration_s": round(outcome.duration_s, 4),
        "worker": worker_id(item.config),
    }
    if outcome.extra:
        # e.g. "retried" after an infrastructure error, "safety_warning" under --plsql-safety=warn
        rec["extra"] = {k: str(v)[:1000] for k, v in outcome.extra.items()}
    if not node.reported_task:
        node.reported_task = True
        rec["task"] = {
            "metadata": dict(task.metadata),
            "markers": list(task.markers),
            "n_tests": task.n_tests,
            "entry_points": list(task.entry_points),
        }
    turn = item.turn.index
    if turn not in node.reported_turns and len(node.answers) >= turn:
        node.reported_turns.add(turn)
        ans = node.answers[turn - 1]
        rec["answer"] = {
            "turn": turn,
            "sample": node.sample,
            "status": ans.status,
            "source": ans.source,
            "cache_key": ans.cache_key,
            "error": ans.error,
            "usage": dict(ans.usage),
        }
    harness: Harness = item.config.stash[HARNESS_KEY]
    if not harness.env_sent and harness.backend is not None:
        harness.env_sent = True
        rec["env"] = {"db_version": harness.backend.version, "worker": worker_id(item.config)}
    return rec

"""The two typed records of a run: one test's outcome (:class:`TestOutcome`) and one task's result
(:class:`TaskResult`), the same objects from the worker to the results file and back.

A worker builds a :class:`TestOutcome` once per item (``collect.make_record``); it crosses the
xdist wire as :meth:`TestOutcome.to_wire` and is rebuilt by :meth:`TestOutcome.from_wire`; the
controller groups a task's outcomes into a :class:`TaskResult`, whose :meth:`TaskResult.to_json` is
the task entry of the results file and :meth:`TaskResult.from_json` reads it back. Field names are
the JSON keys; these methods are the only converters, so the file's shape is written down here once.
Figures are never read from a file: :func:`pytest_plsqlbench.results.document.score` derives them
and returns the scored task results (:attr:`TaskResult.figures`) with the document
(:class:`ScoredDocument`), which the summary and every report read (:func:`task_results`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..outcomes import PASSED, SKIPPED

#: Longest text kept for a string in ``extra`` (numbers, booleans and None are kept as they are).
MAX_EXTRA_TEXT = 1000
#: Longest text kept of an answer's code and of the model's raw reply (the audit trail).
MAX_ANSWER_TEXT = 20000
#: Longest text kept of a turn's rendered user prompt (a schema-grounded prompt carries its DDL).
MAX_PROMPT_TEXT = 8000
#: Longest text kept of a unit test's script (the test's input).
MAX_SCRIPT_TEXT = 2000


def clip_text(text: str | None, limit: int) -> str | None:
    """``text`` cut to ``limit`` characters, saying how much was cut (None stays None)."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}\n... [{len(text) - limit} more characters not kept]"


def json_value(value: Any, limit: int = MAX_EXTRA_TEXT) -> Any:
    """A JSON-able copy of an ``extra`` value: numbers stay numbers, text is clipped, lists and
    mappings are converted element by element, anything else becomes its (clipped) text."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, Mapping):
        return {str(k): json_value(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v, limit) for v in value]
    return str(value)[:limit]


@dataclass(frozen=True)
class TaskFacts:
    """What a task's first item says about the task (sent once per task, kept in its entry)."""

    metadata: dict[str, Any] = field(default_factory=dict)
    markers: list[str] = field(default_factory=list)
    n_tests: int | None = None
    entry_points: list[str] = field(default_factory=list)
    #: Each turn's rendered user message (clipped to :data:`MAX_PROMPT_TEXT`).
    prompts: list[str] = field(default_factory=list)


@dataclass(slots=True)
class TestOutcome:
    """One item's outcome, from the worker to the report: its test entry in the results file,
    the item's identity, and the parts a task, a turn or a worker sends once (``task``,
    ``answer``, ``env``: on the wire only, the collector files them with the task).

    Not changed once made (a changed one is a new one: :meth:`skipped`, ``dataclasses.replace``),
    but not ``frozen``: a frozen dataclass's ``__init__`` measured 5-7x slower (2 us -> 10-20 us
    for these 22 fields), and an item under xdist makes two."""

    __test__ = False  # not a pytest test class

    subset: str
    #: None only for an item whose worker crashed before reporting (the collector fills it in).
    task_id: str | None
    node: str
    turn: int
    test_id: str
    passed: bool
    failure_class: str = PASSED
    #: 1.0/0.0 for pass/fail judges, any number for graded ones; None when not judged (skipped, crashed).
    score: float | None = None
    message: str = ""
    error_code: str | None = None
    expected: list[str] | None = None
    actual: list[str] | None = None
    duration_s: float = 0.0
    dialect: str | None = None
    n_turns: int = 1
    sample: int = 0
    worker: str | None = None
    #: Typed facts a judge adds (``retried``, ``safety_warning``, ``notes``, speed ratios ...).
    extra: dict[str, Any] = field(default_factory=dict)
    #: The test's script, its input (clipped to :data:`MAX_SCRIPT_TEXT`); None when it runs the answer.
    script: str | None = None
    task: TaskFacts | None = None
    answer: dict[str, Any] | None = None
    env: dict[str, Any] | None = None

    #: Keys of a test entry in the results file, in order.
    TEST_KEYS = (
        "turn", "test_id", "sample", "passed", "failure_class", "score", "message", "error_code",
        "expected", "actual", "duration_s", "worker", "extra", "script",
    )

    def to_wire(self) -> dict[str, Any]:
        """Plain JSON values (what crosses the xdist wire); empty optional parts left out."""
        # By hand, not asdict(): its deep copy of every value was a measurable part of each item's cost.
        out = {name: getattr(self, name) for name in _WIRE_FIELDS}
        for key in ("expected", "actual"):
            if out[key] is not None:
                out[key] = list(out[key])
        for key in ("answer", "env"):
            if out[key] is not None:
                out[key] = copy.deepcopy(out[key])
        if self.task is not None:
            out["task"] = {f: getattr(self.task, f) for f in _FACT_FIELDS}
        out["extra"] = {str(k): json_value(v) for k, v in self.extra.items()}
        for key in ("task", "answer", "env", "script"):
            if out[key] is None:
                del out[key]
        if not out["extra"]:
            del out["extra"]
        return out

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> TestOutcome:
        """The outcome a worker sent (keys this version does not know are ignored)."""
        kwargs = {k: v for k, v in data.items() if k in _WIRE_NAMES}
        if isinstance(kwargs.get("task"), Mapping):
            kwargs["task"] = TaskFacts(**{k: v for k, v in kwargs["task"].items() if k in _FACT_FIELDS})
        kwargs.setdefault("node", data.get("node") or "")
        return cls(**kwargs)

    def to_json(self) -> dict[str, Any]:
        """The test entry of the results file (:data:`TEST_KEYS`; ``extra`` and ``script`` only when set)."""
        out: dict[str, Any] = {name: getattr(self, name) for name in self.TEST_KEYS}
        for key in ("expected", "actual"):
            if out[key] is not None:
                out[key] = list(out[key])
        if self.extra:
            out["extra"] = {str(k): json_value(v) for k, v in self.extra.items()}
        else:
            del out["extra"]
        if out["script"] is None:
            del out["script"]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], task: TaskResult) -> TestOutcome:
        """A test entry of ``task`` read back (checked by the reader first; absent keys take the
        defaults every reader of version 2 gave them)."""
        values: dict[str, Any] = {"turn": 1, "passed": False}
        values.update((k, data[k]) for k in cls.TEST_KEYS if k in data)
        return cls(subset=task.subset, task_id=task.task_id, node=task.node, n_turns=task.n_turns, **values)

    def skipped(self, reason: str) -> TestOutcome:
        """This item as skipped by a plugin (e.g. a task its data cannot run): neither a failure
        nor a harness error, and not scored."""
        return replace(self, passed=False, failure_class=SKIPPED, score=None, message=reason)


@dataclass(frozen=True)
class TaskResult:
    """One task's result (all samples): identity, facts, answers, its tests' outcomes and, once
    scored (:func:`.document.score`), its figures.

    :meth:`to_json` is the task entry of the results file; an entry read back loses its figures
    (:meth:`from_json`), which are derived again, never trusted; :meth:`scored` reads an entry of
    a document just scored (the collector's, or :func:`.reading.read_document`'s) with them."""

    subset: str
    task_id: str
    node: str = ""
    n_turns: int = 1
    n_tests: int | None = None
    entry_points: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    markers: list[str] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    #: One answer record per (sample, turn), sorted (``document.unique_answers``).
    answers: list[Mapping[str, Any]] = field(default_factory=list)
    tests: tuple[TestOutcome, ...] = ()
    #: The task's figures in the scored document: its family's :meth:`task_figures`, then
    #: ``incomplete`` and ``tests_run``, ``samples`` last when the family gives them; empty until scored.
    figures: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, outcomes: Iterable[TestOutcome], facts: TaskFacts | None, answers: list[Mapping[str, Any]]) -> TaskResult:
        """A task's result from its items' outcomes (at least one, with its task id resolved)."""
        tests = tuple(outcomes)
        first = tests[0]
        facts = facts or TaskFacts()
        return cls(
            subset=first.subset,
            task_id=str(first.task_id),
            node=first.node,
            n_turns=max(int(t.n_turns or 1) for t in tests),
            n_tests=facts.n_tests,
            entry_points=list(facts.entry_points),
            metadata=dict(facts.metadata),
            markers=list(facts.markers),
            prompts=list(facts.prompts),
            answers=answers,
            tests=tests,
        )

    def to_json(self) -> dict[str, Any]:
        """The task entry: identity, facts, answers, tests, then its figures (if scored)."""
        out: dict[str, Any] = {
            "subset": self.subset,
            "task_id": self.task_id,
            "node": self.node,
            "n_turns": self.n_turns,
            "n_tests": self.n_tests,
            "entry_points": list(self.entry_points),
            "metadata": dict(self.metadata),
            "markers": list(self.markers),
            "prompts": list(self.prompts),
            "answers": [dict(a) for a in self.answers],
            "tests": [t.to_json() for t in self.tests],
        }
        out.update(self.figures)
        return out

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> TaskResult:
        """A task entry read back (checked by the reader first); its figures are left behind."""
        task = cls(
            subset=entry["subset"],
            task_id=entry["task_id"],
            **{k: entry[k] for k in _ENTRY_FACTS if entry.get(k) is not None},
        )
        return replace(task, tests=tuple(TestOutcome.from_json(t, task) for t in entry.get("tests", [])))

    @classmethod
    def scored(cls, entry: Mapping[str, Any]) -> TaskResult:
        """A task entry of a scored document, its figures kept: what the reports read."""
        return replace(cls.from_json(entry), figures={k: v for k, v in entry.items() if k not in _ENTRY_KEYS})


@dataclass(frozen=True)
class ResultsFile:
    """What a run saved: its header, per subset what scoring needs without the manifests (paper
    mapping, metric family), and its task results. Figures are never read from here."""

    header: dict[str, Any]
    subset_info: dict[str, dict[str, Any]]
    tasks: tuple[TaskResult, ...]

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ResultsFile:
        """A results document checked by the reader (``reading.check_document``) as types."""
        info = {
            name: {"paper": m.get("paper") or {}, "metric_family": m.get("metric_family")}
            for name, m in doc["subsets"].items()
        }
        return cls(dict(doc["header"]), info, tuple(TaskResult.from_json(t) for t in doc["tasks"]))


class ScoredDocument(dict[str, Any]):
    """A scored results document (:func:`.document.score`): the JSON values written to the file,
    holding its tasks also as the :class:`TaskResult`\\ s (figures included) they were made from,
    so the reports of a run read the records without parsing its entries again."""

    results: tuple[TaskResult, ...]

    def __init__(self, document: Mapping[str, Any], results: tuple[TaskResult, ...]) -> None:
        super().__init__(document)
        self.results = results


def task_results(document: Mapping[str, Any]) -> tuple[TaskResult, ...]:
    """The scored task results of a document: the scorer's own, else (a document built by hand or
    copied) its task entries read back with their figures."""
    if isinstance(document, ScoredDocument):
        return document.results
    return tuple(TaskResult.scored(t) for t in document.get("tasks") or ())


_WIRE_FIELDS = tuple(f.name for f in fields(TestOutcome))
_WIRE_NAMES = frozenset(_WIRE_FIELDS)
_FACT_FIELDS = tuple(f.name for f in fields(TaskFacts))
#: Task entry keys besides identity and tests that a TaskResult keeps (absent or null: the default).
_ENTRY_FACTS = ("node", "n_turns", "n_tests", "entry_points", "metadata", "markers", "prompts", "answers")
#: Keys of a task entry that are not figures.
_ENTRY_KEYS = frozenset({"subset", "task_id", *_ENTRY_FACTS, "tests"})

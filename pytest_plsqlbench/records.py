"""The record of one benchmark item: what a worker sends and the controller scores.

A worker builds an :class:`ItemRecord` when an item finishes (``collect.make_record``) and
attaches its :meth:`~ItemRecord.to_dict` to the report (xdist ships plain JSON values); the
controller reads it back with :meth:`ItemRecord.from_dict`. The results document keeps the
:meth:`~ItemRecord.test_entry` part per test; the first record of a task also carries the task's
facts, the first of a turn its answer, the first of a worker its environment.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .outcomes import PASSED

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


@dataclass
class TaskFacts:
    """What the first record of a task says about it (for the results document)."""

    metadata: dict[str, Any] = field(default_factory=dict)
    markers: list[str] = field(default_factory=list)
    n_tests: int | None = None
    entry_points: list[str] = field(default_factory=list)
    #: Each turn's rendered user message (clipped to :data:`MAX_PROMPT_TEXT`).
    prompts: list[str] = field(default_factory=list)


@dataclass
class ItemRecord:
    """One item's outcome and score, with where it ran."""

    subset: str
    task_id: str | None
    node: str
    turn: int
    test_id: str
    passed: bool
    failure_class: str = PASSED
    #: The item's score: 1.0/0.0 for pass/fail judges; graded judges give any number.
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

    #: Keys of a test entry in the results document, in order.
    TEST_KEYS = (
        "turn", "test_id", "sample", "passed", "failure_class", "score", "message", "error_code",
        "expected", "actual", "duration_s", "worker", "extra", "script",
    )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (what crosses the xdist wire); empty optional parts left out."""
        # By hand, not asdict(): its deep copy of every value was a measurable part of each item's cost.
        out = {name: getattr(self, name) for name in _RECORD_FIELDS}
        for key in ("expected", "actual"):
            if out[key] is not None:
                out[key] = list(out[key])
        for key in ("answer", "env"):
            if out[key] is not None:
                out[key] = copy.deepcopy(out[key])
        if out["task"] is not None:
            out["task"] = asdict(out["task"])
        out["extra"] = {str(k): json_value(v) for k, v in self.extra.items()}
        for key in ("task", "answer", "env", "script"):
            if out[key] is None:
                del out[key]
        if not out["extra"]:
            del out["extra"]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ItemRecord:
        known = _field_names(cls)  # an xdist controller reads one record per item
        kwargs = {k: v for k, v in data.items() if k in known}
        if isinstance(kwargs.get("task"), Mapping):
            facts = _field_names(TaskFacts)
            kwargs["task"] = TaskFacts(**{k: v for k, v in kwargs["task"].items() if k in facts})
        kwargs.setdefault("node", data.get("node") or "")
        return cls(**kwargs)

    def test_entry(self) -> dict[str, Any]:
        """The per-test part kept in the results document's task entry."""
        data = self.to_dict()
        return {k: data[k] for k in self.TEST_KEYS if k in data}


_RECORD_FIELDS = tuple(f.name for f in fields(ItemRecord))


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def _field_names(cls: type) -> frozenset[str]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in fields(cls))
    return names

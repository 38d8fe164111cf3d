"""Scores by difficulty, reasoning type and PL/SQL construct (the paper's App. D annotations).

Labels come from a task's metadata when its loader provides them (``difficulty``,
``reasoning_types``, ``plsql_constructs`` ...), else from its markers (``difficulty_advanced``,
``reasoning_aggregation``, ``construct_function``). Labels are multi-valued like Table 8: a task
with three reasoning types counts in each of the three rows. A dimension with many labels pools
those of fewer than :data:`MIN_TASKS_PER_ROW` tasks into one "other" row (each task once).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..results.record import TaskResult
from .stats import mean


@dataclass(frozen=True)
class Dimension:
    key: str
    title: str
    #: metadata fields read, in order; a string or a list of strings.
    fields: tuple[str, ...]
    #: marker prefix used when metadata has none of the fields.
    marker_prefix: str

    @property
    def heading(self) -> str:
        """``By difficulty``, ``By PL/SQL construct``: an acronym keeps its capitals."""
        first = self.title.split(" ", 1)[0]
        return f"By {self.title if first.isupper() else self.title[0].lower() + self.title[1:]}"


#: A label with fewer tasks than this is pooled with the other small ones when the dimension
#: has more than :data:`MAX_SINGLE_ROWS` labels: a row of one or two tasks says little.
MIN_TASKS_PER_ROW = 3
MAX_SINGLE_ROWS = 8


DIMENSIONS = (
    Dimension("difficulty", "Difficulty", ("difficulty", "level"), "difficulty_"),
    Dimension(
        "reasoning", "Reasoning type", ("reasoning_types", "reasoning_type", "reasoning"), "reasoning_"
    ),
    Dimension("construct", "PL/SQL construct", ("plsql_constructs", "constructs", "construct"), "construct_"),
)


def labels(task: TaskResult, dim: Dimension) -> list[str]:
    """The task's labels in one dimension (empty when it has none)."""
    meta = task.metadata
    for name in dim.fields:
        value = meta.get(name)
        if isinstance(value, str) and value.strip():
            return [value.strip()]
        if isinstance(value, (list, tuple)):
            found = [str(v).strip() for v in value if str(v).strip()]
            if found:
                return list(dict.fromkeys(found))
    return [
        m[len(dim.marker_prefix) :].replace("_", " ")
        for m in task.markers
        if m.startswith(dim.marker_prefix)
    ]


def breakdown(tasks: Iterable[TaskResult], dim: Dimension) -> list[dict[str, Any]]:
    """Rows ``{label, tasks, mean_test_pass, suite_pass}`` over judged tasks, most tasks first."""
    groups: dict[str, list[TaskResult]] = {}
    for task in tasks:
        if task.figures.get("excluded") or task.figures.get("test_pass") is None:
            continue
        for label in labels(task, dim):
            groups.setdefault(label, []).append(task)
    rows: list[dict[str, Any]] = [
        {
            "label": label,
            "tasks": len(members),
            "mean_test_pass": mean([t.figures["test_pass"] for t in members]),
            "suite_pass": mean([t.figures["suite_pass"] for t in members]),
        }
        for label, members in groups.items()
    ]
    rows.sort(key=lambda r: (-r["tasks"], r["label"].lower()))
    small = [r for r in rows if r["tasks"] < MIN_TASKS_PER_ROW]
    if len(rows) <= MAX_SINGLE_ROWS or len(small) < 2:
        return rows
    # Pool the small labels: each task once, however many of the small labels it has.
    pooled: dict[int, TaskResult] = {}
    for r in small:
        for task in groups[r["label"]]:
            pooled[id(task)] = task
    members = list(pooled.values())
    names = sorted((r["label"] for r in small), key=str.lower)
    other = {
        "label": f"other ({len(names)} labels of < {MIN_TASKS_PER_ROW} tasks each: {', '.join(names)})",
        "tasks": len(members),
        "mean_test_pass": mean([t.figures["test_pass"] for t in members]),
        "suite_pass": mean([t.figures["suite_pass"] for t in members]),
        "pooled": names,
    }
    return [r for r in rows if r["tasks"] >= MIN_TASKS_PER_ROW] + [other]


def all_breakdowns(tasks: Iterable[TaskResult]) -> list[tuple[Dimension, list[dict[str, Any]]]]:
    """Every dimension that has at least one labelled task."""
    tasks = list(tasks)
    out = []
    for dim in DIMENSIONS:
        rows = breakdown(tasks, dim)
        if rows:
            out.append((dim, rows))
    return out

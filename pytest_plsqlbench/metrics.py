"""PLSQLBench's metrics (App. C), computed from per-test outcomes.

Partial credit is computed within a task (or episode) first, then averaged over tasks, so
every task weighs the same whatever its number of tests:

* single-turn task i:  TestPass_i = p_i / n_i;  SuitePass_i = [p_i == n_i]
* episode e (multi-turn): EpisodeTestPass_e = sum_t p_et / sum_t n_et;
  TurnSolved_et = [p_et == n_et];  TurnSuitePass_e = mean_t TurnSolved_et;
  EpisodePass_e = [all turns solved]
* a subset: Mean Test Pass@1 = mean of TestPass / EpisodeTestPass over its tasks;
  Suite Pass@1 = mean of SuitePass (an episode counts as a suite when every test passed);
  Turn Suite Pass@1 and Episode Pass@1 = means over its multi-turn tasks.

Tests whose outcome says nothing about the model (infrastructure errors, answers never
generated) are left out. A task with a turn left without any judgeable test is left out
entirely and listed, never scored 0.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .outcomes import EXCLUDED, FAILURE_CLASSES, PASSED


@dataclass
class TaskScore:
    subset: str
    task_id: str
    n_turns: int
    #: turn -> (passed, total) over judged tests.
    per_turn: dict[int, tuple[int, int]]
    excluded_reason: str | None = None

    @property
    def multi_turn(self) -> bool:
        return self.n_turns > 1

    @property
    def excluded(self) -> bool:
        return self.excluded_reason is not None

    @property
    def passed(self) -> int:
        return sum(p for p, _ in self.per_turn.values())

    @property
    def total(self) -> int:
        return sum(n for _, n in self.per_turn.values())

    @property
    def test_pass(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def suite_pass(self) -> float:
        return 1.0 if self.total and self.passed == self.total else 0.0

    @property
    def turn_suite_pass(self) -> float:
        solved = sum(1 for p, n in self.per_turn.values() if n and p == n)
        return solved / len(self.per_turn) if self.per_turn else 0.0

    @property
    def episode_pass(self) -> float:
        return 1.0 if self.per_turn and all(n and p == n for p, n in self.per_turn.values()) else 0.0


def score_task(subset: str, task_id: str, n_turns: int, tests: Iterable[Mapping[str, Any]]) -> TaskScore:
    """Score one task from its test records (``turn``, ``passed``, ``failure_class``)."""
    judged: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    seen_turns: set[int] = set()
    excluded_classes: Counter[str] = Counter()
    for rec in tests:
        turn = int(rec.get("turn", 1))
        seen_turns.add(turn)
        cls = rec.get("failure_class", PASSED)
        if cls in EXCLUDED:
            excluded_classes[cls] += 1
            continue
        judged[turn][1] += 1
        if rec.get("passed"):
            judged[turn][0] += 1
    per_turn = {t: (judged[t][0], judged[t][1]) for t in sorted(judged)}
    reason = None
    missing = sorted(t for t in seen_turns if t not in judged)
    if not per_turn or missing:
        what = ", ".join(f"{n} {c.replace('_', ' ')}" for c, n in excluded_classes.most_common())
        reason = f"no judgeable test in turn(s) {', '.join(map(str, missing))}" if per_turn else "no judgeable test"
        reason += f" ({what})" if what else ""
    return TaskScore(subset, task_id, n_turns, per_turn, reason)


@dataclass
class SubsetMetrics:
    subset: str
    tasks: int = 0
    tests: int = 0
    multi_turn_tasks: int = 0
    mean_test_pass: float | None = None
    suite_pass: float | None = None
    turn_suite_pass: float | None = None
    episode_pass: float | None = None
    excluded_tasks: list[str] = field(default_factory=list)
    failure_classes: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks,
            "tests": self.tests,
            "multi_turn_tasks": self.multi_turn_tasks,
            "mean_test_pass": self.mean_test_pass,
            "suite_pass": self.suite_pass,
            "turn_suite_pass": self.turn_suite_pass,
            "episode_pass": self.episode_pass,
            "excluded_tasks": list(self.excluded_tasks),
            "failure_classes": dict(self.failure_classes),
        }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def aggregate(scores: Iterable[TaskScore], failure_counts: Mapping[str, Counter[str]] | None = None) -> dict[str, SubsetMetrics]:
    """Per-subset metrics, in the order subsets first appear."""
    by_subset: dict[str, list[TaskScore]] = {}
    for score in scores:
        by_subset.setdefault(score.subset, []).append(score)
    out: dict[str, SubsetMetrics] = {}
    for subset, items in by_subset.items():
        kept = [s for s in items if not s.excluded]
        multi = [s for s in kept if s.multi_turn]
        m = SubsetMetrics(
            subset=subset,
            tasks=len(kept),
            tests=sum(s.total for s in kept),
            multi_turn_tasks=len(multi),
            mean_test_pass=_mean([s.test_pass for s in kept]),
            suite_pass=_mean([s.suite_pass for s in kept]),
            turn_suite_pass=_mean([s.turn_suite_pass for s in multi]),
            episode_pass=_mean([s.episode_pass for s in multi]),
            excluded_tasks=sorted(s.task_id for s in items if s.excluded),
        )
        counts = (failure_counts or {}).get(subset, Counter())
        m.failure_classes = {c: counts.get(c, 0) for c in FAILURE_CLASSES}
        out[subset] = m
    return out

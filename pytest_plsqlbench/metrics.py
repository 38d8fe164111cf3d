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

With ``--plsql-samples N`` a task has N scored samples. Its Pass@1 metrics are the means over
its samples (the expected score of one sample), so it still weighs as one task; pass@k uses
c = the samples that pass the task's full suite (every test of every turn).

Tests whose outcome says nothing about the model (infrastructure errors, answers never
generated) are left out. A sample with a turn left without any judgeable test is left out
entirely, and a task none of whose samples is judgeable is listed as excluded, never scored 0.

Failure classes are counted twice: per unit test, and per *analysis unit* -- one task turn of
one sample, as in the paper's error analysis (App. E.2/§4.4) -- where a failed unit gets the
class of the earliest stage that failed (see :data:`UNIT_PRIORITY`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .outcomes import (
    EXCLUDED,
    FAILURE_CLASSES,
    INFRASTRUCTURE,
    INTERFACE,
    INVALID_ARTIFACT,
    MISSING_EXCLUDED_KEY,
    NOT_GENERATED,
    PASSED,
    SKIPPED,
    TIMEOUT,
    UNSAFE,
    WRONG_OUTPUT,
)
from .reporting.stats import bootstrap_cis, mean, pass_at_k

if TYPE_CHECKING:  # types only: results.record's package imports this module
    from .results.record import TestOutcome

#: Skipped items (e.g. a task its data cannot run, "not runnable") are left out like excluded ones,
#: but listed apart, never as failures.
#: Metrics-internal class of a ``not_generated`` test left out under --plsql-missing=exclude.
MISSING_EXCLUDED = "not_generated_excluded"
NOT_JUDGED = (*EXCLUDED, SKIPPED, MISSING_EXCLUDED)

#: Metrics that get confidence intervals (the headline numbers of Tables 2, 9 and 10).
HEADLINE = ("mean_test_pass", "suite_pass", "turn_suite_pass", "episode_pass")
#: A failed analysis unit is classed by the earliest stage that failed: refused before running,
#: does not compile, does not match the interface, ran too long, ran but answered wrong.
UNIT_PRIORITY = (NOT_GENERATED, UNSAFE, INVALID_ARTIFACT, INTERFACE, TIMEOUT, WRONG_OUTPUT)


def judged_class(failure_class: str, extra: Mapping[str, Any] | None) -> str:
    """A test's class for the metrics (a not-generated test is excluded only by choice)."""
    if failure_class == NOT_GENERATED and (extra or {}).get(MISSING_EXCLUDED_KEY):
        return MISSING_EXCLUDED
    return failure_class


@dataclass
class TaskScore:
    """One sample of one task, scored."""

    subset: str
    task_id: str
    n_turns: int
    #: turn -> (passed, total) over judged tests.
    per_turn: dict[int, tuple[int, int]]
    excluded_reason: str | None = None
    sample: int = 0
    #: Every test of the sample was skipped (not excluded for a harness problem).
    skipped: bool = False
    #: Tests left out of this sample's scores (infrastructure, excluded missing answers).
    n_excluded: int = 0
    #: Some test had no answer and was left out by --plsql-missing=exclude.
    missing_excluded: bool = False

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


def score_task(subset: str, task_id: str, n_turns: int, tests: Iterable[TestOutcome], sample: int = 0) -> TaskScore:
    """Score one sample of a task from its tests' outcomes (``turn``, ``passed``, ``failure_class``)."""
    judged: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    seen_turns: set[int] = set()
    excluded_classes: Counter[str] = Counter()
    skip_reason = ""
    for rec in tests:
        turn = int(rec.turn)
        seen_turns.add(turn)
        cls = judged_class(rec.failure_class, rec.extra)
        if cls in NOT_JUDGED:
            excluded_classes[cls] += 1
            if cls == SKIPPED and not skip_reason:
                skip_reason = str(rec.message or "")
            continue
        judged[turn][1] += 1
        if rec.passed:
            judged[turn][0] += 1
    per_turn = {t: (judged[t][0], judged[t][1]) for t in sorted(judged)}
    reason = None
    missing = sorted(t for t in seen_turns if t not in judged)
    skipped = bool(seen_turns) and set(excluded_classes) == {SKIPPED} and not per_turn
    if skipped:
        reason = f"skipped: {skip_reason}" if skip_reason else "skipped"
    elif not per_turn or missing:
        what = ", ".join(f"{n} {c.replace('_', ' ')}" for c, n in excluded_classes.most_common())
        reason = (
            f"no judgeable test in turn(s) {', '.join(map(str, missing))}"
            if per_turn
            else "no judgeable test"
        )
        reason += f" ({what})" if what else ""
    n_excluded = sum(n for c, n in excluded_classes.items() if c != SKIPPED)
    return TaskScore(subset, task_id, n_turns, per_turn, reason, sample, skipped, n_excluded,
                     MISSING_EXCLUDED in excluded_classes)


@dataclass
class TaskScores:
    """A task over all its samples; Pass@1 metrics are means over the judged samples."""

    subset: str
    task_id: str
    n_turns: int
    samples: list[TaskScore]
    #: Only some of the task's tests ran (``-k``, ``-m``, ``-x``, ``--lf``, ``--deselect``): its
    #: scores cover the tests that ran.
    incomplete: bool = False

    @property
    def kept(self) -> list[TaskScore]:
        return [s for s in self.samples if not s.excluded]

    @property
    def multi_turn(self) -> bool:
        return self.n_turns > 1

    @property
    def excluded(self) -> bool:
        return not self.kept

    @property
    def skipped(self) -> bool:
        """Every sample was skipped: listed as skipped, not as excluded."""
        return bool(self.samples) and all(s.skipped for s in self.samples)

    @property
    def excluded_reason(self) -> str | None:
        if self.kept:
            return None
        reasons = list(dict.fromkeys(s.excluded_reason for s in self.samples if s.excluded_reason))
        return "; ".join(reasons) or "no judgeable test"

    @property
    def n(self) -> int:
        """Judged samples (pass@k's n)."""
        return len(self.kept)

    @property
    def c(self) -> int:
        """Judged samples passing every test of every turn (pass@k's c)."""
        return sum(1 for s in self.kept if s.suite_pass == 1.0)

    @property
    def tests(self) -> int:
        """Judged unit tests of one sample (the largest, should exclusions differ by sample)."""
        return max((s.total for s in self.kept), default=0)

    def _mean(self, attr: str) -> float | None:
        return mean([getattr(s, attr) for s in self.kept])

    @property
    def test_pass(self) -> float | None:
        return self._mean("test_pass")

    @property
    def suite_pass(self) -> float | None:
        return self._mean("suite_pass")

    @property
    def turn_suite_pass(self) -> float | None:
        return self._mean("turn_suite_pass") if self.multi_turn else None

    @property
    def episode_pass(self) -> float | None:
        return self._mean("episode_pass") if self.multi_turn else None

    def pass_at(self, k: int) -> float | None:
        return pass_at_k(self.n, self.c, k) if 1 <= k <= self.n else None

    def as_dict(self) -> dict[str, Any]:
        """Per-task figures for the results document."""
        return {
            "test_pass": self.test_pass,
            "suite_pass": self.suite_pass,
            "turn_suite_pass": self.turn_suite_pass,
            "episode_pass": self.episode_pass,
            "excluded": self.excluded_reason,
            "n_samples": self.n,
            "n_passing_samples": self.c,
        }


def score_samples(subset: str, task_id: str, n_turns: int, tests: Iterable[TestOutcome]) -> TaskScores:
    """Score a task whose tests may belong to several samples (``sample`` field)."""
    by_sample: dict[int, list[TestOutcome]] = defaultdict(list)
    for rec in tests:
        by_sample[int(rec.sample or 0)].append(rec)
    samples = [
        score_task(subset, task_id, n_turns, recs, sample) for sample, recs in sorted(by_sample.items())
    ]
    return TaskScores(subset, task_id, n_turns, samples)


def unit_failures(tests: Iterable[TestOutcome]) -> Counter[str]:
    """Failed analysis units (sample x turn) by class, as in the paper's error analysis.

    A unit with a judged failing test gets the class of its earliest failing stage
    (:data:`UNIT_PRIORITY`); a unit whose tests were all excluded counts under its excluded
    class (infrastructure before not generated), so units the model was never judged on show.
    """
    units: dict[tuple[int, int], set[str]] = defaultdict(set)
    for rec in tests:
        units[(int(rec.sample or 0), int(rec.turn))].add(judged_class(rec.failure_class, rec.extra))
    out: Counter[str] = Counter()
    for classes in units.values():
        cls = unit_class(classes)
        if cls is not None:
            out[cls] += 1
    return out


def unit_class(classes: Iterable[str]) -> str | None:
    """The class of a unit (sample x turn) whose tests have ``classes``: its earliest failing stage
    (:data:`UNIT_PRIORITY`), else infrastructure when nothing of it was judged; None if it passed."""
    found = set(classes)
    for cls in UNIT_PRIORITY:
        if cls in found:
            return cls
    if INFRASTRUCTURE in found and found <= set(NOT_JUDGED):
        return INFRASTRUCTURE
    return None


def failed_tests(tests: Iterable[TestOutcome]) -> Counter[str]:
    """Failed unit tests by class (skipped tests are not failures)."""
    return Counter(r.failure_class for r in tests if r.failure_class not in (PASSED, SKIPPED))


@dataclass
class SubsetMetrics:
    subset: str
    tasks: int = 0
    tests: int = 0
    multi_turn_tasks: int = 0
    samples: int = 1
    mean_test_pass: float | None = None
    suite_pass: float | None = None
    turn_suite_pass: float | None = None
    episode_pass: float | None = None
    #: metric -> (low, high), 95% percentile bootstrap over tasks.
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: k -> unbiased pass@k (k <= the fewest judged samples of any task).
    pass_at_k: dict[int, float] = field(default_factory=dict)
    excluded_tasks: list[str] = field(default_factory=list)
    #: tasks every test of which was skipped (e.g. not runnable with the data at hand).
    skipped_tasks: list[str] = field(default_factory=list)
    #: scored tasks of which only some tests ran; they stay in the metrics, scored on what ran.
    incomplete_tasks: list[str] = field(default_factory=list)
    #: Tasks scored on fewer than all of their tests because some were excluded (infrastructure).
    partly_excluded_tasks: list[str] = field(default_factory=list)
    #: Tasks without an answer left out by --plsql-missing=exclude: the run is not comparable.
    missing_excluded_tasks: list[str] = field(default_factory=list)
    #: failed unit tests by class.
    failure_classes: dict[str, int] = field(default_factory=dict)
    #: failed analysis units (task turns of a sample) by class, as in the paper's §4.4.
    failure_units: dict[str, int] = field(default_factory=dict)
    #: judged analysis units (task turns of a sample).
    units: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks,
            "tests": self.tests,
            "multi_turn_tasks": self.multi_turn_tasks,
            "samples": self.samples,
            "mean_test_pass": self.mean_test_pass,
            "suite_pass": self.suite_pass,
            "turn_suite_pass": self.turn_suite_pass,
            "episode_pass": self.episode_pass,
            "ci": {k: list(v) for k, v in self.ci.items()},
            "pass_at_k": {str(k): v for k, v in self.pass_at_k.items()},
            "excluded_tasks": list(self.excluded_tasks),
            "skipped_tasks": list(self.skipped_tasks),
            "incomplete_tasks": list(self.incomplete_tasks),
            "partly_excluded_tasks": list(self.partly_excluded_tasks),
            "missing_excluded_tasks": list(self.missing_excluded_tasks),
            "units": self.units,
            "failure_classes": dict(self.failure_classes),
            "failure_units": dict(self.failure_units),
        }


def subset_metrics(
    subset: str,
    results: Sequence[TaskScores],
    failure_tests: Mapping[str, int] | None = None,
    failure_units: Mapping[str, int] | None = None,
    units: int = 0,
    bootstrap: bool = True,
) -> SubsetMetrics:
    """One subset's metrics; ``results`` in any order (they are sorted by task id first)."""
    ordered = sorted(results, key=lambda r: r.task_id)
    kept = [r for r in ordered if not r.excluded]
    multi = [r for r in kept if r.multi_turn]
    m = SubsetMetrics(
        subset=subset,
        tasks=len(kept),
        tests=sum(r.tests for r in kept),
        multi_turn_tasks=len(multi),
        samples=max((len(r.samples) for r in ordered), default=1),
        mean_test_pass=mean([r.test_pass for r in kept]),  # type: ignore[misc]
        suite_pass=mean([r.suite_pass for r in kept]),  # type: ignore[misc]
        turn_suite_pass=mean([r.turn_suite_pass for r in multi]),  # type: ignore[misc]
        episode_pass=mean([r.episode_pass for r in multi]),  # type: ignore[misc]
        excluded_tasks=[r.task_id for r in ordered if r.excluded and not r.skipped],
        skipped_tasks=[r.task_id for r in ordered if r.skipped],
        incomplete_tasks=[r.task_id for r in kept if r.incomplete],
        partly_excluded_tasks=[r.task_id for r in kept if any(s.n_excluded for s in r.kept)],
        missing_excluded_tasks=[r.task_id for r in ordered if any(s.missing_excluded for s in r.samples)],
        units=units,
    )
    if bootstrap and kept:
        # Two pairs, each resampled over the tasks its metrics average: Mean Test / Suite Pass over
        # all judged tasks, Turn Suite / Episode Pass over the multi-turn ones (docs/reporting.md).
        cis = bootstrap_cis(
            {"mean_test_pass": [r.test_pass for r in kept], "suite_pass": [r.suite_pass for r in kept]}  # type: ignore[misc]
        )
        if multi:
            cis.update(
                bootstrap_cis(
                    {
                        "turn_suite_pass": [r.turn_suite_pass for r in multi],  # type: ignore[misc]
                        "episode_pass": [r.episode_pass for r in multi],  # type: ignore[misc]
                    }
                )
            )
        m.ci = cis
    if kept:
        n_min = min(r.n for r in kept)
        m.pass_at_k = {k: mean([r.pass_at(k) for r in kept]) for k in range(1, n_min + 1)}  # type: ignore[misc]
    m.failure_classes = {c: int((failure_tests or {}).get(c, 0)) for c in FAILURE_CLASSES}
    m.failure_units = {c: int((failure_units or {}).get(c, 0)) for c in FAILURE_CLASSES}
    return m


"""App. C metrics, pass@k and bootstrap intervals, on hand-made outcomes (no database)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import pytest

from pytest_plsqlbench.metrics import (
    TaskScores,
    score_samples,
    score_task,
    subset_metrics,
    unit_failures,
)
from pytest_plsqlbench.reporting.stats import bootstrap_cis, pass_at_k
from pytest_plsqlbench.results.record import TestOutcome


def typed(*tests: dict[str, Any]) -> list[TestOutcome]:
    """Tests' outcomes from their test entries (the metrics read typed outcomes)."""
    return [TestOutcome("s", "t", "t", **t) for t in tests]


def records(*turns: list[bool], sample: int = 0, cls: str = "wrong_output") -> list[TestOutcome]:
    """Tests' outcomes: one list of pass/fail per turn."""
    return typed(*(
        {
            "turn": t,
            "test_id": f"t{i}",
            "sample": sample,
            "passed": ok,
            "failure_class": "passed" if ok else cls,
        }
        for t, outcomes in enumerate(turns, 1)
        for i, ok in enumerate(outcomes)
    ))


def result(task_id: str, *turns: list[bool], subset: str = "s") -> TaskScores:
    return score_samples(subset, task_id, len(turns), records(*turns))


# --------------------------------------------------------------------------- the paper's worked examples
def test_two_tasks_at_two_thirds_and_one_third_give_mean_test_pass_one_half() -> None:
    m = subset_metrics("s", [result("a", [True, True, False]), result("b", [True, False, False])])
    assert m.mean_test_pass == pytest.approx(1 / 2)
    assert m.suite_pass == 0.0
    assert m.tasks == 2 and m.tests == 6


def test_three_turn_episode_solving_two_turns_and_five_of_six_tests() -> None:
    episode = result("e", [True, True], [True, True], [True, False])
    assert episode.episode_pass == 0.0
    assert episode.turn_suite_pass == pytest.approx(2 / 3)
    assert episode.test_pass == pytest.approx(5 / 6)
    m = subset_metrics("s", [episode])
    assert (m.episode_pass, m.turn_suite_pass, m.mean_test_pass) == (
        0.0,
        pytest.approx(2 / 3),
        pytest.approx(5 / 6),
    )
    assert m.multi_turn_tasks == 1


def test_episode_test_pass_pools_tests_over_turns_not_turn_means() -> None:
    # Turn 1: 1/1, turn 2: 1/3 -> pooled 2/4 = 0.5 (mean of turn rates would be 2/3).
    assert result("e", [True], [True, False, False]).test_pass == pytest.approx(0.5)


def test_each_task_weighs_the_same_whatever_its_test_count() -> None:
    m = subset_metrics("s", [result("big", [True] * 9 + [False]), result("small", [False])])
    assert m.mean_test_pass == pytest.approx((0.9 + 0.0) / 2)  # not 9/11


# --------------------------------------------------------------------------- exclusions
def test_excluded_tests_are_left_out_and_empty_tasks_listed_not_scored_zero() -> None:
    partial = score_samples(
        "s",
        "p",
        1,
        records([True, False])
        + typed({"turn": 1, "test_id": "x", "sample": 0, "passed": False, "failure_class": "infrastructure"}),
    )
    gone = score_samples(
        "s",
        "g",
        1,
        typed({"turn": 1, "test_id": "x", "sample": 0, "passed": False, "failure_class": "not_generated",
               "extra": {"missing_excluded": "--plsql-missing=exclude"}}),
    )
    m = subset_metrics("s", [partial, gone])
    assert partial.test_pass == pytest.approx(0.5)
    assert m.tasks == 1 and m.excluded_tasks == ["g"] and m.mean_test_pass == pytest.approx(0.5)
    assert "not generated" in (gone.excluded_reason or "")


def test_a_sample_with_an_unjudged_turn_is_dropped_and_the_task_kept_on_its_other_samples() -> None:
    recs = records([True], [True], sample=0) + typed(
        {"turn": 1, "test_id": "t0", "sample": 1, "passed": True, "failure_class": "passed"},
        {"turn": 2, "test_id": "t0", "sample": 1, "passed": False, "failure_class": "infrastructure"},
    )
    task = score_samples("s", "e", 2, recs)
    assert task.n == 1 and task.episode_pass == 1.0 and not task.excluded


# --------------------------------------------------------------------------- samples and pass@k
def test_samples_of_a_task_count_as_one_task_with_mean_pass_at_1() -> None:
    recs = (
        records([True, True], sample=0) + records([True, False], sample=1) + records([False, False], sample=2)
    )
    task = score_samples("s", "a", 1, recs)
    assert len(task.samples) == 3 and (task.n, task.c) == (3, 1)
    assert task.test_pass == pytest.approx((1 + 0.5 + 0) / 3)
    assert task.suite_pass == pytest.approx(1 / 3)
    m = subset_metrics("s", [task, result("b", [True])])
    assert m.tasks == 2 and m.samples == 3
    assert m.tests == 2 + 1  # tests of one sample, not of all three
    assert m.pass_at_k == {1: pytest.approx((1 / 3 + 1) / 2)}  # b has one sample: k stops at 1


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, Fraction(2, 5)),
        (5, 2, 2, 1 - Fraction(3, 10)),  # C(3,2)/C(5,2) = 3/10
        (5, 2, 3, 1 - Fraction(1, 10)),  # C(3,3)/C(5,3) = 1/10
        (5, 2, 4, Fraction(1)),  # n - c < k: some pick always passes
        (3, 1, 2, Fraction(2, 3)),  # C(2,2)/C(3,2) = 1/3
        (10, 0, 5, Fraction(0)),
        (10, 10, 1, Fraction(1)),
        (20, 3, 10, 1 - Fraction(math.comb(17, 10), math.comb(20, 10))),
    ],
)
def test_pass_at_k_matches_the_closed_form(n: int, c: int, k: int, expected: Fraction) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(float(expected), abs=1e-12)


@pytest.mark.parametrize(("n", "c"), [(4, 1), (6, 2), (7, 3), (8, 5)])
def test_pass_at_k_is_the_chance_that_some_pick_of_k_samples_passes(n: int, c: int) -> None:
    """Independent check: enumerate every k-subset of n samples with c passing ones."""
    samples = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        picks = list(itertools.combinations(range(n), k))
        share = sum(any(samples[i] for i in pick) for pick in picks) / len(picks)
        assert pass_at_k(n, c, k) == pytest.approx(share, abs=1e-12)


def test_pass_at_k_rejects_impossible_arguments() -> None:
    for n, c, k in ((3, 4, 1), (3, 1, 0), (3, 1, 4)):
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)


# --------------------------------------------------------------------------- bootstrap intervals
def _width(values: list[float]) -> float:
    low, high = bootstrap_cis({"m": values})["m"]
    return high - low


def test_confidence_intervals_shrink_with_more_tasks() -> None:
    def tasks(n: int) -> list[float]:
        return [float(i % 2) for i in range(n)]  # mean 0.5, variance 0.25

    widths = [_width(tasks(n)) for n in (10, 40, 160, 640)]
    assert widths == sorted(widths, reverse=True)
    # Roughly 1/sqrt(n): x16 tasks -> about a quarter of the width.
    assert 0.15 < widths[3] / widths[1] < 0.4
    # 95% of a normal with sd sqrt(0.25/640): half-width ~ 1.96 * 0.0198 = 0.0387.
    assert widths[3] == pytest.approx(2 * 1.96 * math.sqrt(0.25 / 640), rel=0.2)


def test_intervals_contain_the_mean_and_are_reproducible() -> None:
    values = [0.0, 0.25, 0.5, 1.0, 1.0, 0.75, 0.0, 1.0]
    low, high = bootstrap_cis({"m": values})["m"]
    assert low <= sum(values) / len(values) <= high
    assert bootstrap_cis({"m": values}) == bootstrap_cis({"m": values})
    assert bootstrap_cis({"m": [1.0] * 5})["m"] == (1.0, 1.0)
    assert bootstrap_cis({}) == {}


def test_subset_intervals_do_not_depend_on_task_order() -> None:
    tasks = [result(f"t{i}", [i % 3 == 0, i % 2 == 0]) for i in range(12)]
    assert subset_metrics("s", tasks).ci == subset_metrics("s", list(reversed(tasks))).ci
    assert set(subset_metrics("s", tasks).ci) == {"mean_test_pass", "suite_pass"}


def test_a_mixed_subset_resamples_multi_turn_metrics_over_its_multi_turn_tasks() -> None:
    """docs/reporting.md: Mean Test/Suite Pass resample all tasks together; Turn Suite/Episode
    Pass resample the multi-turn tasks together, in their own resamples (same seed)."""
    single = [result(f"a{i}", [i % 2 == 0, True]) for i in range(6)]
    multi = [result(f"b{i}", [True, i % 3 == 0], [i % 2 == 1]) for i in range(5)]
    ci = subset_metrics("s", single + multi).ci
    kept = sorted(single + multi, key=lambda r: r.task_id)
    assert {k: ci[k] for k in ("mean_test_pass", "suite_pass")} == bootstrap_cis(
        {"mean_test_pass": [r.test_pass for r in kept], "suite_pass": [r.suite_pass for r in kept]}
    )
    assert {k: ci[k] for k in ("turn_suite_pass", "episode_pass")} == bootstrap_cis(
        {"turn_suite_pass": [r.turn_suite_pass for r in multi], "episode_pass": [r.episode_pass for r in multi]}
    )


# --------------------------------------------------------------------------- failure units (§4.4)
def test_a_failed_turn_is_one_unit_classed_by_its_earliest_failing_stage() -> None:
    recs = records([False, True], cls="wrong_output") + typed(
        {"turn": 1, "test_id": "x", "sample": 0, "passed": False, "failure_class": "invalid_artifact"},
        {"turn": 2, "test_id": "y", "sample": 0, "passed": False, "failure_class": "timeout"},
        {"turn": 2, "test_id": "z", "sample": 0, "passed": False, "failure_class": "wrong_output"},
        {"turn": 3, "test_id": "w", "sample": 0, "passed": True, "failure_class": "passed"},
        {"turn": 4, "test_id": "v", "sample": 0, "passed": False, "failure_class": "not_generated"},
    )
    assert unit_failures(recs) == {"invalid_artifact": 1, "timeout": 1, "not_generated": 1}


def test_score_task_keeps_per_turn_counts() -> None:
    s = score_task("s", "t", 2, records([True, False], [True]))
    assert s.per_turn == {1: (1, 2), 2: (1, 1)} and not s.excluded


def test_skipped_tasks_are_listed_apart_and_never_failures() -> None:
    skipped = typed(
        {
            "turn": 1,
            "test_id": "t",
            "sample": 0,
            "passed": False,
            "failure_class": "skipped",
            "message": "not runnable: no schema",
        }
    )
    task = score_samples("s", "k", 1, skipped)
    assert task.skipped and task.excluded and task.excluded_reason == "skipped: not runnable: no schema"
    m = subset_metrics("s", [task, result("a", [True])])
    assert m.skipped_tasks == ["k"] and m.excluded_tasks == [] and m.tasks == 1
    assert unit_failures(skipped) == {}

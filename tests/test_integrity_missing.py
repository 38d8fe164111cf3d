"""Tasks without an answer are failures by default (issue 10, item 5): a file holding only the
answers a model got right no longer scores 100 %. ``--plsql-missing=exclude`` leaves them out,
and the summary and the leaderboard then refuse to call the run comparable."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_plsqlbench.errors import UsageError
from pytest_plsqlbench.metrics import score_task, unit_failures
from pytest_plsqlbench.reporting.leaderboard import noncomparable_reasons
from pytest_plsqlbench.results.record import TestOutcome
from pytest_plsqlbench.summary import summary_lines

from integrity_subset import run_plugin, write_subset

RIGHT = "CREATE FUNCTION twice(x int) RETURNS int LANGUAGE sql AS 'SELECT 2 * x';"


def subset(pytester: pytest.Pytester):  # noqa: ANN201
    tests = [{"id": f"c{n}", "kind": "output", "script": f"SELECT twice({n});", "expected": [str(2 * n)]} for n in (1, 2)]
    tasks = {f"t{i}": {"entry_points": ["twice"], "tests": tests} for i in range(1, 6)}
    # Only the one answer the "model" got right is in the file.
    return write_subset(pytester.path, "partial", tasks, {"t1": RIGHT})


def test_missing_answers_fail_by_default(pytester: pytest.Pytester) -> None:
    folder, answers = subset(pytester)
    doc, result = run_plugin(pytester, folder, "partial", answers)
    m = doc["subsets"]["partial"]
    assert m["tasks"] == 5 and m["excluded_tasks"] == [] and m["missing_excluded_tasks"] == []
    assert m["suite_pass"] == pytest.approx(0.2)
    assert m["failure_units"]["not_generated"] == 4
    classes = {x["failure_class"] for t in doc["tasks"] if t["task_id"] != "t1" for x in t["tests"]}
    assert classes == {"not_generated"}
    result.assert_outcomes(passed=2, failed=8)
    assert "NOT COMPARABLE" not in result.stdout.str()


def test_exclude_is_explicit_and_marks_the_run_not_comparable(pytester: pytest.Pytester) -> None:
    folder, answers = subset(pytester)
    doc, result = run_plugin(pytester, folder, "partial", answers, "--plsql-missing=exclude")
    m = doc["subsets"]["partial"]
    assert m["tasks"] == 1 and m["suite_pass"] == 1.0
    assert m["missing_excluded_tasks"] == ["t2", "t3", "t4", "t5"]
    result.stdout.fnmatch_lines(["*NOT COMPARABLE: 4 task(s) without an answer left out*--plsql-missing=exclude*"])
    reasons = noncomparable_reasons(doc)
    assert any("without an answer were left out" in r for r in reasons)
    from pytest_plsqlbench.reporting.leaderboard import entry

    with pytest.raises(UsageError):
        entry(doc, "m")


def test_metrics_read_the_choice_from_the_records() -> None:
    fail = TestOutcome("s", "t", "t", 1, "x", False, "not_generated")
    excl = dataclasses.replace(fail, extra={"missing_excluded": "--plsql-missing=exclude"})
    assert score_task("s", "t", 1, [fail]).suite_pass == 0.0 and not score_task("s", "t", 1, [fail]).excluded
    assert score_task("s", "t", 1, [excl]).excluded and score_task("s", "t", 1, [excl]).missing_excluded
    assert unit_failures([fail]) == {"not_generated": 1}
    assert unit_failures([excl]) == {}


def test_a_task_that_lost_tests_to_exclusion_is_named() -> None:
    recs = [TestOutcome("s", "lossy", "lossy", 1, "a", True, "passed"),
            TestOutcome("s", "lossy", "lossy", 1, "b", False, "infrastructure")]
    score = score_task("s", "lossy", 1, recs)
    assert score.n_excluded == 1 and not score.excluded
    doc = {"subsets": {"s": {"tasks": 1, "partly_excluded_tasks": ["lossy"], "failure_units": {}}}, "failure_units": {}}
    assert any("lossy" in line and "without some of their tests" in line for line in summary_lines(doc, verbose=-1))
    assert any("lossy" in line for line in summary_lines(doc))

"""Every task answer has a total time budget (issue 10, item 5): installs, reinstalls after a lost
session and all tests count against ``--plsql-task-timeout``; once it is used up the remaining
tests fail as ``timeout`` without running."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from pytest_plsqlbench.dialects.postgres import PostgresBackend
from pytest_plsqlbench.runner import evaluate_task
from pytest_plsqlbench.tasks import Task, Turn, UnitTest

from embedded import started_backend
from integrity_subset import run_plugin, write_subset

TIMEOUT = 2.0
BUDGET = 3.0


@pytest.fixture(scope="module")
def backend() -> Iterator[PostgresBackend]:
    with started_backend("integrity-budget", timeout=TIMEOUT, task_timeout=BUDGET) as b:
        yield b


def task(n_tests: int, script: str = "SELECT f();") -> Task:
    tests = tuple(UnitTest(f"t{i}", "output", script, ("1",)) for i in range(n_tests))
    return Task(id="slow", subset="i", dialect="postgres", turns=(Turn(1, "p", tests),), entry_points=("f",))


def run(backend: PostgresBackend, t: Task, answer: str) -> tuple[list[tuple[bool, str, str]], float]:
    t0 = time.monotonic()
    report = evaluate_task(backend, t, [answer], settings=backend.settings)
    return [(o.passed, o.failure_class, o.message) for o in report.outcomes], time.monotonic() - t0


def test_many_statements_each_under_the_timeout_are_cut_at_the_budget(backend: PostgresBackend) -> None:
    """The issue's 15 x pg_sleep(1.8) at a 2 s statement timeout: one install, cut at the budget."""
    answer = "SELECT pg_sleep(0.9);\n" * 15 + "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1';"
    outcomes, elapsed = run(backend, task(5), answer)
    assert {cls for _, cls, _ in outcomes} == {"timeout"}
    assert any("time budget" in msg for _, _, msg in outcomes)
    # a bound, not a speed target: far below the 15 statements' 13.5 s
    assert elapsed < BUDGET + 2 * TIMEOUT + 4


def test_slow_tests_use_up_the_budget_and_the_rest_do_not_run(backend: PostgresBackend) -> None:
    answer = "CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.7); RETURN 1; END $$;"
    outcomes, elapsed = run(backend, task(20), answer)
    passed = [p for p, _, _ in outcomes if p]
    assert 1 <= len(passed) <= 5
    not_run = [msg for p, cls, msg in outcomes if not p]
    assert not_run and all("time budget" in msg for msg in not_run)
    assert all(cls == "timeout" for p, cls, _ in outcomes if not p)
    assert elapsed < BUDGET + TIMEOUT + 4


def test_reinstalls_after_the_answer_ends_its_session_count_against_the_budget(backend: PostgresBackend) -> None:
    """An answer that ends its own session in every test has its slow install re-run before each
    test: bounded by the budget, not by the number of tests."""
    answer = ("SELECT pg_sleep(0.8);\n"
              "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1';")
    # transaction_timeout fires whatever the harness's speed (an idle timeout of 1ms needed a slow client)
    script = "SET transaction_timeout = '1ms'; SELECT pg_sleep(0.01); SELECT f();"
    outcomes, elapsed = run(backend, task(40, script), answer)
    assert any("time budget" in msg for _, _, msg in outcomes)
    assert elapsed < BUDGET + TIMEOUT + 6


def test_a_fast_answer_is_not_affected(backend: PostgresBackend) -> None:
    outcomes, _ = run(backend, task(30), "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1';")
    assert all(p for p, _, _ in outcomes), outcomes


def test_task_timeout_option_through_the_plugin(pytester: pytest.Pytester) -> None:
    tests = [{"id": f"t{i}", "kind": "output", "script": "SELECT f();", "expected": ["1"]} for i in range(12)]
    answer = "CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.6); RETURN 1; END $$;"
    folder, answers = write_subset(pytester.path, "budget", {"slow": {"entry_points": ["f"], "tests": tests}}, {"slow": answer})
    doc, result = run_plugin(pytester, folder, "budget", answers, "--plsql-task-timeout=2")
    recs = doc["tasks"][0]["tests"]
    assert any(r["passed"] for r in recs)
    assert sum(r["failure_class"] == "timeout" for r in recs) >= 6
    bad = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--subset", "budget", "--plsql-tasks", str(folder),
                                        f"--plsql-answers={answers}", "--plsql-task-timeout=-1")
    assert "--plsql-task-timeout must not be negative" in bad.stderr.str() + bad.stdout.str()

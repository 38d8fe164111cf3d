"""Failure text is clipped everywhere it is shown, and the harness's memory stays bounded whatever
an answer prints (issue 10, item 6)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pytest_plsqlbench.collect import MAX_FAILURE_CHARS, failure_text
from pytest_plsqlbench.outcomes import Verdict

from integrity_subset import run_plugin, write_subset

BIG = 2_000_000


def test_failure_text_is_clipped() -> None:
    outcome = Verdict(1, "t", False, "wrong_output", "x" * BIG, ["e" * BIG] * 50, ["a" * BIG] * 50)
    text = failure_text(outcome)
    assert len(text) < MAX_FAILURE_CHARS + 3000
    assert "more characters" in text


def test_failure_text_keeps_a_late_difference_of_long_lines_in_view() -> None:
    expected, actual = "0123456789" * 60 + "EXPECTED-TAIL", "0123456789" * 60 + "ACTUAL-TAIL"
    outcome = Verdict(1, "t", False, "wrong_output", "1 line differs", ["same", expected], ["same", actual])
    text = failure_text(outcome)
    assert "EXPECTED-TAIL" in text and "ACTUAL-TAIL" in text, text
    assert len(text) < 1200 and "'same'" in text


def test_megabyte_errors_and_notices_stay_small_in_terminal_junit_and_results(pytester: pytest.Pytester) -> None:
    """The issue's 2 MB RAISE EXCEPTION made a 216 MB terminal log and JUnit file."""
    raise_big = ("CREATE FUNCTION f(x int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN "
                 f"RAISE NOTICE '%', repeat('n', {BIG}); RAISE EXCEPTION '%', repeat('e', {BIG}); END $$;")
    tests = [{"id": f"t{i}", "kind": "output", "script": f"SELECT f({i});", "expected": [str(i)]} for i in range(20)]
    folder, answers = write_subset(pytester.path, "loud", {"loud": {"entry_points": ["f"], "tests": tests}}, {"loud": raise_big})
    junit = pytester.path / "junit.xml"
    doc, result = run_plugin(pytester, folder, "loud", answers, f"--junitxml={junit}", "-rf")
    recs = doc["tasks"][0]["tests"]
    assert all(r["failure_class"] == "wrong_output" for r in recs)
    terminal = result.stdout.str() + result.stderr.str()
    assert len(terminal) < 20 * 10_000, len(terminal)
    assert junit.stat().st_size < 20 * 10_000, junit.stat().st_size
    assert len(json.dumps(doc)) < 20 * 10_000
    assert "e" * 1000 in terminal  # what is shown is the answer's text, clipped


MEMORY_SCRIPT = """
import json, resource, sys
from pytest_plsqlbench.dialects.postgres import PostgresBackend
from pytest_plsqlbench.runner import evaluate_task
from pytest_plsqlbench.settings import Settings
from pytest_plsqlbench.tasks import Task, Turn, UnitTest

n_tests, size = int(sys.argv[1]), int(sys.argv[2])
answer = ("CREATE FUNCTION loud() RETURNS int LANGUAGE plpgsql AS $$ BEGIN "
          f"RAISE NOTICE '%', repeat('n', {size}); RAISE EXCEPTION '%', repeat('e', {size}); END $$;")
tests = tuple(UnitTest(f"t{i}", "output", "SELECT loud();", ("1",)) for i in range(n_tests))
task = Task(id="loud", subset="m", dialect="postgres", turns=(Turn(1, "p", tests),), entry_points=("loud",))
b = PostgresBackend(Settings.of(subsets=(), timeout=20, max_output=10_000), worker="memory-out")
b.start()
try:
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = evaluate_task(b, task, [answer])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kept = sum(len(m) for o in report.outcomes for m in [o.message, *(o.actual or [])])
    print(json.dumps({"growth_kb": peak - base, "kept": kept, "classes": sorted({o.failure_class for o in report.outcomes})}))
finally:
    b.stop()
"""


def measure(n_tests: int, size: int) -> dict:
    done = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(n_tests), str(size)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_harness_memory_does_not_grow_with_what_answers_print() -> None:
    """In fresh interpreters: 8 tests each printing and raising 40 MB grow the harness's peak
    about as much as one does (one message at a time, in libpq), and what is kept is capped."""
    one = measure(1, 40_000_000)
    many = measure(8, 40_000_000)
    assert one["classes"] == many["classes"] == ["wrong_output"]
    assert many["kept"] <= 8 * (10_000 + 5_000)
    # bounded by one message (libpq's buffer and result), not by the number of messages
    assert many["growth_kb"] < one["growth_kb"] + 100_000, (one, many)
    assert many["growth_kb"] < 600_000, many

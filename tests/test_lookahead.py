"""The look-ahead (``pytest_plsqlbench/lookahead.py``): without xdist, the next ``assert`` task runs
on a thread while this one's items report -- and no outcome moves because of it.

``tests/test_pinned_outcomes.py`` pins every outcome of smoke, MBPP+, MBPP and Spider (run
with the look-ahead on, the default) to snapshots taken before it existed. Here: that it
really runs ahead, that a run with it and one without give the same records, also when pytest
runs a task's items out of order or stops early, and that an error met ahead is raised where
pytest would have met it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minisubset import DOUBLE_REF_PG, conversation_task, double_task, write_answers, write_subset

#: Records, from inside the pytest run, which thread ran each test of each task.
THREADS_CONFTEST = '''
import json, threading
import pytest_plsqlbench.runner as runner

SEEN = []
_run_test = runner.TaskRun.run_test

def run_test(self, turn_index, test):
    SEEN.append([self.task.id, test.id, threading.current_thread().name])
    return _run_test(self, turn_index, test)

runner.TaskRun.run_test = run_test

def pytest_unconfigure(config):
    with open("threads.json", "w") as f:
        json.dump(SEEN, f)
'''

#: Interleaves two tasks' items (t1_a case-1, t2_b case-1, t1_a case-2, ...): pytest then sets
#: each task up several times, each time for one item.
INTERLEAVE_CONFTEST = '''
import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    first = [i for i in items if "/t1_a/" in i.nodeid]
    second = [i for i in items if "/t2_b/" in i.nodeid]
    rest = [i for i in items if i not in first and i not in second]
    mixed = [x for pair in zip(first, second) for x in pair]
    items[:] = mixed + rest
'''

WRONG_CASE2 = ("CREATE FUNCTION double_it(x integer) RETURNS integer LANGUAGE sql "
               "AS 'SELECT CASE WHEN x = 2 THEN 5 ELSE x * 2 END';")
#: Ends its own session at its second test: recovery runs on whichever thread runs the task.
KILLS_ITSELF = ("CREATE FUNCTION double_it(x integer) RETURNS integer LANGUAGE plpgsql AS $$ BEGIN "
                "IF x = 2 THEN PERFORM pg_terminate_backend(pg_backend_pid()); END IF; RETURN x * 2; END $$;")


@pytest.fixture
def tasks(pytester: pytest.Pytester) -> Path:
    # File order is task order: two assert tasks, a multi-turn output task (not looked ahead),
    # then three more assert tasks.
    return write_subset(pytester.path, "mini", {
        "t1_a": double_task("t1_a"), "t2_b": double_task("t2_b"), "t3_conv": conversation_task("t3_conv"),
        "t4_c": double_task("t4_c"), "t5_d": double_task("t5_d"), "t6_e": double_task("t6_e"),
    })


@pytest.fixture
def answers(pytester: pytest.Pytester) -> Path:
    rows = [{"task_id": t, "answer": DOUBLE_REF_PG} for t in ("t1_a", "t4_c")]
    rows += [{"task_id": "t2_b", "answer": WRONG_CASE2}, {"task_id": "t5_d", "answer": KILLS_ITSELF},
             {"task_id": "t6_e", "answer": "CREATE FUNCTION double_it( broken"}]
    rows += [{"task_id": "t3_conv", "turn": t, "answer": (
        "CREATE OR REPLACE PROCEDURE greet(n integer) LANGUAGE plpgsql AS $$ BEGIN "
        f"RAISE NOTICE 'hello % %', {t}, n; END $$;")} for t in (1, 2, 3)]
    return write_answers(pytester.path / "answers.jsonl", rows)


def _run(pytester: pytest.Pytester, tasks: Path, answers: Path, *extra: str) -> tuple[pytest.RunResult, dict]:
    out = pytester.path / f"results{len(list(pytester.path.glob('results*.json')))}.json"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--subset", "mini", "--plsql-tasks", str(tasks), "--plsql-missing=fail",
        f"--plsql-answers={answers}", f"--plsql-results={out}", "--plsql-timeout=5", *extra,
    )
    return result, json.loads(out.read_text())


def _outcomes(doc: dict) -> dict[str, list]:
    return {
        f"{task['task_id']}/t{t.get('turn', 1)}/{t['test_id']}": [t["passed"], t["failure_class"], t.get("error_code")]
        for task in doc["tasks"] for t in task["tests"]
    }


def test_the_next_assert_task_runs_on_the_thread_and_outcomes_do_not_move(
    pytester: pytest.Pytester, tasks: Path, answers: Path
) -> None:
    pytester.makeconftest(THREADS_CONFTEST)
    ahead, doc_ahead = _run(pytester, tasks, answers)
    threads_ahead = json.loads((pytester.path / "threads.json").read_text())
    inline, doc_inline = _run(pytester, tasks, answers, "--plsql-no-lookahead")
    threads_inline = json.loads((pytester.path / "threads.json").read_text())

    by_task: dict[str, set[str]] = {}
    for task_id, _test, thread in threads_ahead:
        by_task.setdefault(task_id, set()).add(thread)
    # The first assert task runs inline (nothing to overlap yet); the next one ahead; the
    # output task as before, in its items; the assert task after it inline again, then ahead.
    assert by_task == {
        "t1_a": {"MainThread"}, "t2_b": {"plsqlbench-lookahead"}, "t3_conv": {"MainThread"},
        "t4_c": {"MainThread"}, "t5_d": {"plsqlbench-lookahead"}, "t6_e": {"plsqlbench-lookahead"},
    }
    assert {thread for _, _, thread in threads_inline} == {"MainThread"}
    # The same tests ran, in the same order.
    assert [row[:2] for row in threads_ahead] == [row[:2] for row in threads_inline]

    got = _outcomes(doc_ahead)
    assert got == _outcomes(doc_inline)
    assert got["t1_a/t1/case-2"][:2] == [True, "passed"]
    assert got["t2_b/t1/case-2"][:2] == [False, "wrong_output"]
    assert got["t2_b/t1/case-3"][:2] == [True, "passed"]
    assert got["t6_e/t1/case-1"][0] is False
    assert doc_ahead["subsets"] == doc_inline["subsets"]
    assert ahead.ret == inline.ret == pytest.ExitCode.TESTS_FAILED
    for result in (ahead, inline):
        assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_items_run_out_of_task_order_give_the_same_records(
    pytester: pytest.Pytester, tasks: Path, answers: Path
) -> None:
    pytester.makeconftest(INTERLEAVE_CONFTEST)
    _, ahead = _run(pytester, tasks, answers)
    _, inline = _run(pytester, tasks, answers, "--plsql-no-lookahead")
    assert _outcomes(ahead) == _outcomes(inline)
    assert _outcomes(ahead)["t2_b/t1/case-2"][:2] == [False, "wrong_output"]
    assert len(_outcomes(ahead)) == 3 + 3 + 6 + 3 + 3 + 3


def test_stopping_early_ends_the_task_run_ahead(pytester: pytest.Pytester, tasks: Path) -> None:
    """``-x`` stops at t1_a's failure while t2_b already ran ahead on the thread: the run ends
    cleanly (that task's scope ended, the server stopped), and nothing after the stop is reported."""
    pytester.makeconftest(THREADS_CONFTEST)
    answers = write_answers(pytester.path / "wrong-first.jsonl", [
        {"task_id": "t1_a", "answer": WRONG_CASE2}, {"task_id": "t2_b", "answer": DOUBLE_REF_PG}])
    result, doc = _run(pytester, tasks, answers, "-x")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 failed, 1 passed*"])
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "ending the unused run" not in output
    threads = json.loads((pytester.path / "threads.json").read_text())
    assert ["t2_b", "case-1", "plsqlbench-lookahead"] in threads  # it had run ahead
    assert {task["task_id"] for task in doc["tasks"]} == {"t1_a"}


def test_a_setup_error_met_ahead_is_raised_by_the_task_it_belongs_to(
    pytester: pytest.Pytester, tasks: Path, answers: Path
) -> None:
    """t2_b's fixtures cannot load (a data error): met on the thread while t1_a reports, it
    skips t2_b's items with the loader's reason, as it does without the look-ahead."""
    (tasks / "fixtures" / "oops").mkdir(parents=True)
    (tasks / "fixtures" / "oops" / "postgres.sql").write_text("CREATE TABLE oops (;\n")
    broken = (tasks / "mini" / "t2_b.yaml").read_text().replace(
        "entry_points: [double_it]", "entry_points: [double_it]\nfixtures: [oops]"
    )
    (tasks / "mini" / "t2_b.yaml").write_text(broken)
    ahead, doc_ahead = _run(pytester, tasks, answers)
    inline, doc_inline = _run(pytester, tasks, answers, "--plsql-no-lookahead")
    assert _outcomes(doc_ahead) == _outcomes(doc_inline)
    skipped = [t for task in doc_ahead["tasks"] if task["task_id"] == "t2_b" for t in task["tests"]]
    assert [t["failure_class"] for t in skipped] == ["skipped"] * 3
    for result in (ahead, inline):
        result.stdout.fnmatch_lines(["*3 skipped*"])
        assert "Traceback" not in result.stdout.str() + result.stderr.str()

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
    fails t2_b's items with the loader's reason (file, line, the database's message), as it does
    without the look-ahead: an error, never a skip."""
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
    assert [t["failure_class"] for t in skipped] == ["infrastructure"] * 3
    assert all("oops/postgres.sql:1: fixture 'oops' failed to load: syntax error" in t["message"] for t in skipped)
    for result in (ahead, inline):
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        result.stdout.fnmatch_lines(["*3 error*"])
        assert "Traceback" not in result.stdout.str() + result.stderr.str()


SKIP_AND_PLAIN_CONFTEST = """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if "/t2_b/" in item.nodeid:
            item.add_marker(pytest.mark.skip(reason="skipped on purpose"))
    plain = [i for i in items if "test_plain" in i.nodeid]
    rest = [i for i in items if i not in plain]
    at = next(n for n, i in enumerate(rest) if "/t4_c/" in i.nodeid) + 1
    items[:] = rest[:at] + plain + rest[at:]  # a plain test between t4_c's first and second items
""" + THREADS_CONFTEST


def test_skipped_tasks_and_plain_tests_in_between_keep_it_on_and_the_records_the_same(
    pytester: pytest.Pytester, tasks: Path, answers: Path
) -> None:
    """A task pytest skips before setting it up (a skip mark, a task the data cannot run) and a
    plain test between one task's items do not turn the look-ahead off, and change no record."""
    pytester.makeconftest(SKIP_AND_PLAIN_CONFTEST)
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    ahead, doc_ahead = _run(pytester, tasks, answers, "test_plain.py")
    threads_ahead = json.loads((pytester.path / "threads.json").read_text())
    _, doc_inline = _run(pytester, tasks, answers, "test_plain.py", "--plsql-no-lookahead")
    assert _outcomes(doc_ahead) == _outcomes(doc_inline)
    assert {t["failure_class"] for task in doc_ahead["tasks"] if task["task_id"] == "t2_b" for t in task["tests"]} == {"skipped"}
    ran = {}
    for task_id, test_id, thread in threads_ahead:
        ran.setdefault(task_id, []).append((test_id, thread))
    assert "t2_b" not in ran  # skipped: never run ahead
    # t4_c is split by the plain test: two blocks, each run once; t5_d still runs ahead.
    assert [test for test, _ in ran["t4_c"]] == ["case-1", "case-2", "case-3"]
    assert {thread for _, thread in ran["t5_d"]} == {"plsqlbench-lookahead"}
    assert "Traceback" not in ahead.stdout.str() + ahead.stderr.str()


def test_a_per_test_timeout_turns_it_off(pytester: pytest.Pytester, tasks: Path, answers: Path) -> None:
    """pytest-timeout times each item; a block does a whole task's work in one item's setup or
    on a thread no signal reaches, so with ``--timeout`` every task runs in its own items."""
    pytester.makeconftest(THREADS_CONFTEST)
    _run(pytester, tasks, answers, "--timeout=120")
    threads = json.loads((pytester.path / "threads.json").read_text())
    assert {thread for _, _, thread in threads} == {"MainThread"}


#: Raises in the main thread while it waits for t2_b, whose answer is still running on the
#: thread (its tests sleep): what Ctrl-C or a raising signal handler does there.
INTERRUPT_CONFTEST = '''
import threading, time
import pytest_plsqlbench.lookahead as lookahead

class Interrupted(Exception):
    pass

_setup = lookahead.Lookahead.setup

def setup(self, node):
    if node.name == "t2_b":
        block = next(b for b in self.blocks if b.node is node)
        class Raising(threading.Event):
            def wait(self, timeout=None):
                time.sleep(0.3)
                raise Interrupted("interrupted while waiting")
        ready = block.ready
        block.ready = Raising()
        if ready.is_set():
            block.ready.set()
    return _setup(self, node)

lookahead.Lookahead.setup = setup
''' + THREADS_CONFTEST.replace("SEEN.append([self.task.id, test.id, threading.current_thread().name])",
                               "SEEN.append([self.task.id, test.id, threading.current_thread().name, 'start'])\n"
                               "    try:\n        return _run_test(self, turn_index, test)\n"
                               "    finally:\n        SEEN.append([self.task.id, test.id, threading.current_thread().name, 'end'])")


def test_an_interrupt_while_waiting_for_the_thread_never_shares_the_connection(
    pytester: pytest.Pytester, tasks: Path
) -> None:
    pytester.makeconftest(INTERRUPT_CONFTEST)
    slow = ("CREATE FUNCTION double_it(x integer) RETURNS integer LANGUAGE plpgsql AS $$ BEGIN "
            "PERFORM pg_sleep(0.4); RETURN x * 2; END $$;")
    answers = write_answers(pytester.path / "slow.jsonl", [
        {"task_id": "t1_a", "answer": DOUBLE_REF_PG}, {"task_id": "t2_b", "answer": slow},
        {"task_id": "t4_c", "answer": DOUBLE_REF_PG}])
    result, doc = _run(pytester, tasks, answers, "-k", "t1_a or t2_b or t4_c")
    assert "Traceback" not in result.stderr.str()
    events = json.loads((pytester.path / "threads.json").read_text())
    # Never two threads inside run_test at once: every start is followed by its own end.
    running = None
    for task_id, test_id, thread, what in events:
        if what == "start":
            assert running is None, f"{task_id}/{test_id} on {thread} while {running} runs"
            running = (task_id, test_id, thread)
        else:
            assert running == (task_id, test_id, thread)
            running = None
    got = _outcomes(doc)
    assert got["t4_c/t1/case-3"][:2] == [True, "passed"]
    assert all(not v[0] for k, v in got.items() if k.startswith("t2_b/"))  # its setup was interrupted


def test_a_task_runs_ahead_when_every_judge_is_error_only_and_it_can_run() -> None:
    """Eligibility asks each test's judge (``Judge.error_only``), not the test's kind name."""
    from types import SimpleNamespace

    from pytest_plsqlbench.judges import DEFAULT, AssertJudge, JudgeRegistry
    from pytest_plsqlbench.lookahead import eligible
    from pytest_plsqlbench.tasks import Task, Turn, UnitTest

    class Raised(AssertJudge):
        kind = "raised"

    class Printed(AssertJudge):
        kind = "printed"
        error_only = False

    judges = JudgeRegistry([*DEFAULT.values(), Raised(), Printed()])

    def node(*kinds: str, not_runnable: str | None = None) -> SimpleNamespace:
        tests = tuple(UnitTest(f"t{n}", kind, "SELECT 1") for n, kind in enumerate(kinds))
        return SimpleNamespace(task=Task("t", "s", "postgres", (Turn(1, "p", tests),), not_runnable=not_runnable))

    assert eligible(node("assert", "raised"), judges)  # type: ignore[arg-type]
    assert not eligible(node("assert", "printed"), judges)  # type: ignore[arg-type]
    assert not eligible(node("assert", not_runnable="no data"), judges)  # type: ignore[arg-type]

"""``infrastructure`` only when the harness's machinery failed (issue 10, item 1).

An answer can raise any SQLSTATE; none of them may exclude its failure from the metrics. Whether
the connection really closed is read from the connection itself, and a loss that repeats under
the same answer (and that nobody outside ended) is the answer's failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_plsqlbench import outcomes
from pytest_plsqlbench.dialects.base import Backend, Execution, Session
from pytest_plsqlbench.dialects.postgres import PostgresBackend, SessionLost
from pytest_plsqlbench.runner import TaskRun, evaluate_task
from pytest_plsqlbench.tasks import Task, Turn, UnitTest

from embedded import started_backend
from integrity_subset import run_plugin, write_subset

#: Codes PL/pgSQL can raise that the old classification called infrastructure.
HARNESS_LOOKING = ("XX000", "XX001", "58000", "58030", "08006", "08000", "57P01", "57P02", "57P03", "53000", "53100", "53300")


@pytest.fixture(scope="module")
def backend() -> Iterator[PostgresBackend]:
    with started_backend("integrity-infra", timeout=2.0) as b:
        yield b


def clamp_task() -> Task:
    tests = tuple(
        UnitTest(f"t{x}", "output", f"SELECT clamp_value({x});", (str(min(max(x, 0), 10)),)) for x in (-5, 3, 15)
    )
    return Task(id="clamp", subset="i", dialect="postgres", turns=(Turn(1, "p", tests),), entry_points=("clamp_value",))


def raising_clamp(code: str) -> str:
    """Right inside the range, and raises ``code`` on the inputs it gets wrong."""
    return (f"CREATE FUNCTION clamp_value(x int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN "
            f"IF x BETWEEN 0 AND 10 THEN RETURN x; END IF; "
            f"RAISE EXCEPTION 'harness trouble, honest' USING ERRCODE = '{code}'; END $$;")


@pytest.mark.parametrize("code", HARNESS_LOOKING)
def test_a_raised_sqlstate_is_the_answers_failure(backend: PostgresBackend, code: str) -> None:
    report = evaluate_task(backend, clamp_task(), [raising_clamp(code)])
    got = {o.test_id: (o.passed, o.failure_class) for o in report.outcomes}
    assert got == {"t-5": (False, "wrong_output"), "t3": (True, "passed"), "t15": (False, "wrong_output")}


def fatal_clamp(code: str) -> str:
    """Right inside the range; outside it, makes its error end the session (``exit_on_error``,
    named so the safety check cannot see it) with a code that looks like an outside kill."""
    return (f"CREATE FUNCTION clamp_value(x int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN "
            f"IF x BETWEEN 0 AND 10 THEN RETURN x; END IF; "
            f"PERFORM set_config('exit_' || 'on_error', 'on', true); "
            f"RAISE EXCEPTION 'terminating connection due to administrator command' USING ERRCODE = '{code}'; END $$;")


@pytest.mark.parametrize("code", ("57P01", "57P02", "57P03", "08006", "XX000"))
def test_an_error_the_answer_makes_fatal_is_its_failure_whatever_its_code(backend: PostgresBackend, code: str) -> None:
    """A FATAL with ``57P01`` is what an outside ``pg_terminate_backend`` sends, and what any
    answer can send too: a loss is only the harness's when the harness knows it caused it."""
    report = evaluate_task(backend, clamp_task(), [fatal_clamp(code)])
    got = {o.test_id: (o.passed, o.failure_class) for o in report.outcomes}
    assert got == {"t-5": (False, "wrong_output"), "t3": (True, "passed"), "t15": (False, "wrong_output")}, report
    assert all("lost again" in o.message for o in report.outcomes if not o.passed)


def test_an_install_that_ends_its_session_fails_every_test(backend: PostgresBackend) -> None:
    """The install itself ends the session (an error made fatal): every test of the task meets a
    lost session, the first one twice; none is left out as infrastructure."""
    answer = ("DO $$ BEGIN PERFORM set_config('exit_' || 'on_error', 'on', false); "
              "RAISE EXCEPTION 'bye' USING ERRCODE = '57P01'; END $$;\n" + raising_clamp("P0001"))
    report = evaluate_task(backend, clamp_task(), [answer])
    assert [(o.passed, o.failure_class) for o in report.outcomes] == [(False, "wrong_output")] * 3, report
    assert evaluate_task(backend, clamp_task(), [raising_clamp("P0001")]).outcomes[1].passed  # the next task is fine


def test_a_backend_the_harness_terminated_is_the_harnesss_loss(backend: PostgresBackend) -> None:
    """The other side: a backend terminated from the admin side on both attempts (what
    ``PostgresBackend.terminate`` does) is infrastructure, never the answer's failure."""
    task = clamp_task()
    run = TaskRun(backend, task, [raising_clamp("P0001")])
    run.start()
    session = backend.session()
    real_run = session.run

    def killed_run(script: str, **kwargs):  # type: ignore[no-untyped-def]
        if "clamp_value(3)" in script:
            backend.terminate(session.backend_pid)
        return real_run(script, **kwargs)

    session.run = killed_run  # type: ignore[method-assign]
    try:
        outcome = run.run_test(1, task.turns[0].tests[1])
    finally:
        del session.run
        run.finish()
    assert (outcome.passed, outcome.failure_class) == (False, "infrastructure"), outcome


@pytest.mark.parametrize("code", ("XX000", "08006", "57P01", "58030"))
def test_an_install_raising_a_harness_looking_code_fails_its_tests(backend: PostgresBackend, code: str) -> None:
    answer = f"DO $$ BEGIN RAISE EXCEPTION 'oops' USING ERRCODE = '{code}'; END $$;\n" + raising_clamp("P0001")
    report = evaluate_task(backend, clamp_task(), [answer])
    assert {o.failure_class for o in report.outcomes} == {"invalid_artifact"}


def test_a_session_the_answer_breaks_is_its_failure_and_the_next_task_is_clean(backend: PostgresBackend) -> None:
    """A harness statement failing on a live connection is what the answer left, not infrastructure;
    the message never says the connection was lost when it was not."""
    session = backend.session()
    session.begin_task()
    # Run a script whose harness epilogue cannot work: its own savepoint is released behind its back.
    real = session._after_script

    def broken(savepoint: str, keep: bool) -> None:
        session._exec(f"RELEASE SAVEPOINT {savepoint}")
        real(savepoint, keep)

    session._after_script = broken  # type: ignore[method-assign]
    try:
        result = session.run("SELECT 1", isolated=True, phase="test")
    finally:
        del session._after_script
        session.end_task()
    assert result.error is not None
    assert result.error.failure_class == "wrong_output"
    assert "connection lost" not in result.error.message
    assert "savepoint" in result.error.message
    report = evaluate_task(backend, clamp_task(), [raising_clamp("P0001")])
    assert [o.passed for o in report.outcomes] == [False, True, False]


# --------------------------------------------------------------------------- the retry rule
class _LosingSession(Session):
    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors

    def begin_task(self) -> None: ...

    def end_task(self) -> None: ...

    def run(self, script: str, *, isolated: bool, phase: str) -> Execution:  # type: ignore[override]
        if phase == "test" and self.errors:
            raise self.errors.pop(0)
        return Execution(lines=["1"])


class _FakeBackend(Backend):
    dialect = "postgres"

    def __init__(self, errors: list[Exception]) -> None:
        super().__init__()
        self._session = _LosingSession(errors)
        self.recovered = 0

    def start(self) -> None: ...

    def stop(self) -> None: ...

    @property
    def version(self) -> str:
        return "fake"

    def _load(self, fixture) -> None: ...  # type: ignore[no-untyped-def]

    def session(self) -> Session:
        return self._session

    def recover(self) -> None:
        self.recovered += 1


@pytest.mark.parametrize(
    ("errors", "expected"),
    [
        # Lost once (a killed server): retried, judged.
        ([SessionLost("lost", external=False)], "passed"),
        # Lost again under the same answer, nobody outside ended it: the answer's failure.
        ([SessionLost("lost", external=False), SessionLost("lost", external=False)], "wrong_output"),
        # Ended from outside both times (57P01 FATAL, or the server died): the harness's trouble.
        ([SessionLost("lost", external=True), SessionLost("lost", external=True)], "infrastructure"),
        ([SessionLost("lost", external=False), SessionLost("lost", external=True)], "infrastructure"),
        # The answer named a session-ending limit and the server's reason did not arrive: its timeout.
        ([SessionLost("lost", external=False, limit_named=True)] * 2, "timeout"),
        ([SessionLost("lost", external=True, limit_named=True)] * 2, "infrastructure"),
    ],
)
def test_retried_loss_that_repeats_with_the_same_answer_is_the_answers(errors: list[Exception], expected: str) -> None:
    task = Task(id="t", subset="s", dialect="postgres", turns=(Turn(1, "p", (UnitTest("x", "output", "SELECT 1", ("1",)),)),))
    backend = _FakeBackend(list(errors))
    run = TaskRun(backend, task, ["SELECT 1;"])
    run.start()
    outcome = run.run_test(1, task.turns[0].tests[0])
    assert ("passed" if outcome.passed else outcome.failure_class) == expected, outcome


@pytest.mark.parametrize(("install", "expected"), [
    ("SET transaction_timeout = '0';\nSELECT 1;", "timeout"),
    ("DO $$ BEGIN PERFORM set_config('IDLE_SESSION_TIMEOUT', '0', false); END $$;", "timeout"),
    ("SELECT 1;", "wrong_output"),
    # Named in a test's script, not the answer's, it counts the same (any script of the task).
    (None, "timeout"),
])
def test_a_close_without_a_reason_after_the_answer_named_a_session_limit_is_its_timeout(
    backend: PostgresBackend, install: str | None, expected: str
) -> None:
    """A 1 ms ``transaction_timeout`` ends the session with a FATAL error, and the server's close
    can overtake that error: libpq then reports no SQLSTATE. Closed here from the client's side,
    so the error surely carries none."""
    import os
    import socket

    session = backend.session()
    session.begin_task()
    try:
        result = session.run(install or "SELECT current_setting('transaction_timeout');", isolated=install is not None,
                             phase="install" if install else "test")
        assert result.error is None, result.error
        with socket.socket(fileno=os.dup(session.conn.pgconn.socket)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
        with pytest.raises(SessionLost) as lost:
            session.run("SELECT 2;", isolated=True, phase="test")
        assert lost.value.repeats_are_the_answers
        assert lost.value.repeat_class == expected
    finally:
        backend.recover()
        session.end_task()
    assert session._limit_named is False  # the next task starts without it


# --------------------------------------------------------------------------- through the plugin
def test_a_smoke_like_run_of_code_raising_answers_scores_what_they_deserve(pytester: pytest.Pytester) -> None:
    """The issue's run: wrong answers that raise harness-looking codes score 0, not 100 %."""
    tasks = {}
    answers = {}
    for i, code in enumerate(HARNESS_LOOKING[:6]):
        name = f"clamp_{i}"
        tasks[name] = {"entry_points": ["clamp_value"], "tests": [
            {"id": f"t{x}", "kind": "output", "script": f"SELECT clamp_value({x});", "expected": [str(min(max(x, 0), 10))]}
            for x in (-5, 15)
        ]}
        answers[name] = raising_clamp(code)
    for code in ("57P01", "57P02"):  # the error made FATAL: the session ends, twice
        tasks[f"fatal_{code}"] = {"entry_points": ["clamp_value"], "tests": tasks["clamp_0"]["tests"]}
        answers[f"fatal_{code}"] = fatal_clamp(code)
    tasks["install_raises"] = {"entry_points": ["clamp_value"], "tests": tasks["clamp_0"]["tests"]}
    answers["install_raises"] = "DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = 'XX000'; END $$;"
    folder, answers_file = write_subset(pytester.path, "hostile", tasks, answers)
    doc, result = run_plugin(pytester, folder, "hostile", answers_file)
    metrics = doc["subsets"]["hostile"]
    assert metrics["failure_classes"].get("infrastructure", 0) == 0
    assert metrics["excluded_tasks"] == []
    assert metrics["tasks"] == len(tasks)
    assert all(not x["passed"] for t in doc["tasks"] for x in t["tests"])
    assert "Traceback" not in result.stdout.str()
    json.dumps(doc)  # a plain document


def test_helpers_write_what_they_say(tmp_path: Path) -> None:
    folder, answers = write_subset(tmp_path, "s", {"a": {"tests": [{"id": "x", "kind": "assert", "script": "SELECT 1"}]}},
                                   {"a": "SELECT 1;"})
    assert (folder / "s.yaml").exists() and answers.read_text().count("\n") == 1
    assert outcomes.INFRASTRUCTURE in outcomes.EXCLUDED


def test_escape_sequences_an_answer_raises_never_reach_the_terminal(pytester: pytest.Pytester) -> None:
    """``ESC[2K ESC[G ... all tests passed``: printed raw, it erases the real line of a failure
    in a terminal and writes a forged one in its place. Shown escaped, it is only text."""
    forged = "E'\\x1b[2K\\x1b[G hostile/clamp: all tests passed \\x1b[8m'"  # SQL: E'\x1b[2K...'
    answer = ("CREATE FUNCTION clamp_value(x int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN "
              "IF x BETWEEN 0 AND 10 THEN RETURN x; END IF; "
              f"RAISE EXCEPTION '%', {forged}; "
              "END $$;")
    tests = [{"id": f"t{x}", "kind": "output", "script": f"SELECT clamp_value({x});", "expected": [str(min(max(x, 0), 10))]}
             for x in (-5, 15)]
    folder, answers_file = write_subset(pytester.path, "hostile", {"clamp": {"entry_points": ["clamp_value"], "tests": tests}},
                                        {"clamp": answer})
    doc, result = run_plugin(pytester, folder, "hostile", answers_file, "-rf", "--tb=short")
    out = result.stdout.str()
    assert all(not x["passed"] for t in doc["tasks"] for x in t["tests"])
    assert "\x1b" not in out and "\\x1b[2K" in out  # shown, escaped


def test_a_judge_that_raises_on_the_answers_output_fails_the_test(backend: PostgresBackend) -> None:
    """What a judge compares is the answer's to shape: a judge that raises on it (a number no
    decimal context holds, a line no parser expects) fails that test -- reported as the harness's
    error, the task would leave the metrics. A judge's own InfrastructureError stays the harness's."""
    from pytest_plsqlbench.errors import InfrastructureError
    from pytest_plsqlbench.judges import DEFAULT, JudgeRegistry, OutputJudge

    class Fragile(OutputJudge):
        def judge(self, ctx, turn, test, execution):  # type: ignore[no-untyped-def]
            if execution.lines == ["15"]:
                raise ArithmeticError("no context holds this")
            if execution.lines == ["-5"]:
                raise InfrastructureError("the judge lost its database")
            return super().judge(ctx, turn, test, execution)

    judges = JudgeRegistry(list(DEFAULT.values()) + [Fragile()])
    right_in_range = ("CREATE FUNCTION clamp_value(x int) RETURNS int LANGUAGE plpgsql AS $$ "
                      "BEGIN RETURN x; END $$;")
    report = evaluate_task(backend, clamp_task(), [right_in_range], judges=judges)
    got = {o.test_id: (o.passed, o.failure_class) for o in report.outcomes}
    assert got == {"t-5": (False, "infrastructure"), "t3": (True, "passed"), "t15": (False, "wrong_output")}
    msg = next(o.message for o in report.outcomes if o.test_id == "t15")
    assert "could not be judged" in msg and "ArithmeticError" in msg


def _reference_task(*tests: tuple[str, str], reference: str) -> Task:
    units = tuple(UnitTest(tid, "reference", script) for tid, script in tests)
    return Task(id="ref", subset="i", dialect="postgres", turns=(Turn(1, "p", units, reference=reference),),
                entry_points=("withdraw",))


WITHDRAW = ("CREATE FUNCTION withdraw(x int) RETURNS SETOF int LANGUAGE plpgsql AS $$ BEGIN "
            "IF x < 0 THEN RAISE EXCEPTION 'negative' USING ERRCODE = 'P0001'; END IF; RETURN NEXT x; END $$;")


@pytest.mark.parametrize("name,answer", [
    # prints the harness's error marker instead of raising
    ("prints-the-error", "CREATE FUNCTION withdraw(x int) RETURNS SETOF int LANGUAGE plpgsql AS $$ BEGIN "
                         "IF x < 0 THEN RAISE NOTICE '<error P0001>'; RETURN; END IF; RETURN NEXT x; END $$;"),
    # prints the value instead of returning it
    ("prints-the-row", "CREATE FUNCTION withdraw(x int) RETURNS SETOF int LANGUAGE plpgsql AS $$ BEGIN "
                       "IF x < 0 THEN RAISE EXCEPTION 'negative' USING ERRCODE = 'P0001'; END IF; "
                       "RAISE NOTICE '%', x; END $$;"),
    # prints what would pass for a tagged row
    ("prints-a-tag", "CREATE FUNCTION withdraw(x int) RETURNS SETOF int LANGUAGE plpgsql AS $$ BEGIN "
                     "IF x < 0 THEN RAISE EXCEPTION 'negative' USING ERRCODE = 'P0001'; END IF; "
                     "RAISE NOTICE '<row> %', x; END $$;"),
])
def test_a_reference_test_tells_printed_lines_from_rows_and_errors(backend: PostgresBackend, name: str,
                                                                    answer: str) -> None:
    """The reference judge compared one stream of lines: a printed ``<error P0001>`` passed for
    the error, a printed value for a returned row."""
    task = _reference_task(("good", "SELECT * FROM withdraw(5);"), ("bad", "SELECT * FROM withdraw(-1);"),
                           reference=WITHDRAW)
    right = evaluate_task(backend, task, [WITHDRAW])
    assert all(o.passed for o in right.outcomes), [o.message for o in right.outcomes]
    report = evaluate_task(backend, task, [answer])
    assert not all(o.passed for o in report.outcomes), (name, [(o.test_id, o.actual) for o in report.outcomes])


def test_a_test_that_runs_the_answer_compares_what_it_printed_not_what_it_selected(backend: PostgresBackend) -> None:
    """A test that runs the answer itself (Spider, the smoke task's printed rows) asks it to print:
    a plain SELECT returning the right rows is not a PL/pgSQL answer, and passed."""
    tests = (UnitTest("rows", "rows", None, ("NL,1", "UK,2")), UnitTest("lines", "output", None, ("NL,1", "UK,2")))
    task = Task(id="print", subset="i", dialect="postgres", turns=(Turn(1, "p", tests),), answer_mode="execute")
    selecting = "SELECT 'NL' AS c, 1 AS n UNION ALL SELECT 'UK', 2;"
    printing = "DO $$ BEGIN RAISE NOTICE 'NL,1'; RAISE NOTICE 'UK,2'; END $$;"
    assert [o.passed for o in evaluate_task(backend, task, [selecting]).outcomes] == [False, False]
    assert [o.passed for o in evaluate_task(backend, task, [printing]).outcomes] == [True, True]


def test_an_output_test_that_queries_compares_what_the_query_returned(backend: PostgresBackend) -> None:
    """``SELECT clamp_value(15)`` expecting ``10`` is a test of what the function returns: one
    that prints 10 and returns nothing passed. A test that calls a procedure still compares what
    it printed."""
    printing = ("CREATE FUNCTION clamp_value(x int) RETURNS SETOF int LANGUAGE plpgsql AS $$ BEGIN "
                "RAISE NOTICE '%', least(greatest(x, 0), 10); END $$;")
    report = evaluate_task(backend, clamp_task(), [printing])
    assert [o.passed for o in report.outcomes] == [False, False, False]
    assert report.outcomes[0].actual == ["<printed> 0"]
    # Rows and notices of a right answer: the rows are compared, in their place.
    chatty = ("CREATE FUNCTION clamp_value(x int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN "
              "RETURN least(greatest(x, 0), 10); END $$;")
    assert all(o.passed for o in evaluate_task(backend, clamp_task(), [chatty]).outcomes)
    calls = (UnitTest("p", "output", "CALL show_clamped(15);", ("10",)),)
    task = Task(id="show", subset="i", dialect="postgres", turns=(Turn(1, "p", calls),), entry_points=("show_clamped",))
    shows = ("CREATE PROCEDURE show_clamped(x int) LANGUAGE plpgsql AS $$ BEGIN "
             "RAISE NOTICE '%', least(greatest(x, 0), 10); END $$;")
    assert evaluate_task(backend, task, [shows]).outcomes[0].passed

"""The PostgreSQL backend's guarantees, checked directly against an embedded server."""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest

from pytest_plsqlbench.dialects.postgres import PostgresBackend, classify
from pytest_plsqlbench.runner import TaskRun, evaluate_task
from pytest_plsqlbench.tasks import Fixture, Task, Turn, UnitTest

from embedded import started_backend

TIMEOUT = 1.5


@pytest.fixture(scope="module")
def backend() -> Iterator[PostgresBackend]:
    with started_backend("backendtest", timeout=TIMEOUT, max_output=200) as b:
        yield b


def one_test_task(script: str, expected: tuple[str, ...] | None = None, fixtures: tuple[Fixture, ...] = ()) -> Task:
    kind = "output" if expected is not None else "assert"
    return Task(
        id="t", subset="s", dialect="postgres", fixtures=fixtures,
        turns=(Turn(1, "p", (UnitTest("x", kind, script, expected),)),),
    )


def test_candidate_role_is_unprivileged(backend: PostgresBackend) -> None:
    session = backend.session()
    session.begin_task()
    try:
        out = session.run(
            "SELECT current_user, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user;",
            isolated=True, phase="test",
        )
    finally:
        session.end_task()
    assert out.lines == [f"{backend.role},f,f,f"]


def test_objects_of_a_task_are_gone_after_it(backend: PostgresBackend) -> None:
    task = one_test_task("SELECT made_here();", ("1",))
    report = evaluate_task(backend, task, [
        "CREATE FUNCTION made_here() RETURNS int LANGUAGE sql AS 'SELECT 1';\n"
        "CREATE TABLE answers.t1(x int); CREATE TYPE answers.ty AS (a int); PREPARE p AS SELECT 1;"
    ])
    assert report.passed
    assert backend.scratch_objects() == []
    # Session state outside transactions (prepared statements) is discarded too.
    again = evaluate_task(backend, one_test_task("PREPARE p AS SELECT 2; EXECUTE p;", ("2",)), ["SELECT 1;"])
    assert again.passed, again.outcomes


def test_transaction_control_in_answers_is_neutralised(backend: PostgresBackend) -> None:
    task = one_test_task("SELECT count(*) FROM pg_proc WHERE proname = 'committed_fn';", ("1",))
    answer = "CREATE FUNCTION committed_fn() RETURNS int LANGUAGE sql AS 'SELECT 1'; COMMIT; END; BEGIN; ROLLBACK;"
    report = evaluate_task(backend, task, [answer])
    assert report.passed, report.outcomes  # the function survived its own COMMIT/ROLLBACK ...
    assert backend.scratch_objects() == []  # ... and was still rolled back with the task


def test_failed_install_undoes_its_partial_effects(backend: PostgresBackend) -> None:
    task = one_test_task("SELECT 1;", ("1",))
    run = TaskRun(backend, task, ["CREATE FUNCTION half() RETURNS int LANGUAGE sql AS 'SELECT 1'; CREATE FUNCTION broken( AS;"])
    run.start()
    try:
        outcome = run.run_test(1, task.turns[0].tests[0])
        visible = backend.session().run("SELECT count(*) FROM pg_proc WHERE proname = 'half';", isolated=True, phase="test")
    finally:
        run.finish()
    assert outcome.failure_class == "invalid_artifact"
    assert visible.lines == ["0"]


def test_statement_timeout_holds_even_if_the_answer_disables_it(backend: PostgresBackend) -> None:
    task = one_test_task("SET statement_timeout = 0; SELECT pg_sleep(30);")
    t0 = time.monotonic()
    report = evaluate_task(backend, task, ["SELECT 1;"])
    elapsed = time.monotonic() - t0
    assert report.outcomes[0].failure_class == "timeout"
    assert elapsed < TIMEOUT + 8
    # The session is usable afterwards.
    assert evaluate_task(backend, one_test_task("SELECT 41 + 1;", ("42",)), ["SELECT 1;"]).passed


def test_only_raise_output_is_captured_and_capped(backend: PostgresBackend) -> None:
    task = one_test_task(
        "DROP FUNCTION IF EXISTS no_such_fn(); DO $$ BEGIN RAISE NOTICE 'shown'; END $$;", ("shown",)
    )
    assert evaluate_task(backend, task, ["SELECT 1;"]).passed
    flood = one_test_task("DO $$ BEGIN FOR i IN 1..20000 LOOP RAISE NOTICE 'line %', i; END LOOP; END $$;", ("x",))
    outcome = evaluate_task(backend, flood, ["SELECT 1;"]).outcomes[0]
    assert outcome.failure_class == "wrong_output"
    assert outcome.actual is not None and outcome.actual[-1] == "<output truncated at 200 characters>"
    assert sum(len(line) for line in outcome.actual[:-1]) <= 200


def test_fixture_is_loaded_once_and_read_only(backend: PostgresBackend) -> None:
    fixture = Fixture("count-me", "CREATE SCHEMA cm; CREATE TABLE cm.loads(n int); INSERT INTO cm.loads VALUES (1);")
    task = one_test_task("SELECT count(*) FROM cm.loads;", ("1",), fixtures=(fixture,))
    assert evaluate_task(backend, task, ["SELECT 1;"]).passed
    assert evaluate_task(backend, task, ["SELECT 1;"]).passed  # a second load would fail: schema exists
    writer = one_test_task("INSERT INTO cm.loads VALUES (2);", fixtures=(fixture,))
    assert evaluate_task(backend, writer, ["SELECT 1;"]).outcomes[0].failure_class == "unsafe"


def test_lost_connection_is_retried_once_on_a_fresh_one(backend: PostgresBackend) -> None:
    task = one_test_task("SELECT answer();", ("7",))
    run = TaskRun(backend, task, ["CREATE FUNCTION answer() RETURNS int LANGUAGE sql AS 'SELECT 7';"])
    run.start()
    try:
        backend.terminate(backend.session().backend_pid)
        outcome = run.run_test(1, task.turns[0].tests[0])
    finally:
        run.finish()
    assert outcome.passed, outcome
    assert "retried" in outcome.extra


@pytest.mark.parametrize(
    ("sqlstate", "phase", "expected"),
    [
        ("42601", "install", "invalid_artifact"),
        ("42601", "test", "invalid_artifact"),
        ("42883", "test", "interface"),
        ("42P01", "install", "interface"),
        ("42703", "test", "interface"),
        ("P0001", "test", "wrong_output"),
        ("22012", "test", "wrong_output"),
        ("57014", "test", "timeout"),
        ("42501", "test", "unsafe"),
        # An answer can raise any code: none of them is ever the harness's (issue 10).
        ("08006", "test", "wrong_output"),
        ("XX000", "test", "wrong_output"),
        ("XX001", "install", "invalid_artifact"),
        ("58030", "test", "wrong_output"),
        ("57P01", "test", "wrong_output"),
        ("53000", "test", "wrong_output"),
        ("53200", "test", "wrong_output"),
    ],
)
def test_sqlstate_classification(sqlstate: str, phase: str, expected: str) -> None:
    assert classify(sqlstate, phase) == expected  # type: ignore[arg-type]


def test_connection_uses_no_tcp_listener(backend: PostgresBackend) -> None:
    assert backend.server is not None
    with psycopg.connect(backend.db_dsn, autocommit=True) as conn:
        listen = conn.execute("SHOW listen_addresses").fetchone()[0]
    assert listen == ""


def test_selected_rows_read_as_raise_notice_prints_them(backend: PostgresBackend) -> None:
    """Gold rows and an answer's printed lines must be formatted by the same authority."""
    values = "232.0/3::float8, 0.1::float8 + 0.2::float8, 1.50::numeric(5,2), interval '26 hours', ARRAY[1,2], true"
    session = backend.session()
    session.begin_task()
    try:
        selected = session.run(f"SELECT {values};", isolated=True, phase="test")
        printed = session.run(
            f"DO $$ BEGIN RAISE NOTICE '%,%,%,%,%,%', {values}; END $$;", isolated=True, phase="test"
        )
    finally:
        session.end_task()
    assert selected.lines == printed.lines == ["77.33333333333333,0.30000000000000004,1.50,26:00:00,{1,2},t"]


def test_tests_after_a_lost_session_still_see_the_answer(backend: PostgresBackend) -> None:
    """A test that gets its own session killed costs that test only, not the tests after it."""
    tests = (
        UnitTest("before", "output", "SELECT f_good();", ("1",)),
        UnitTest("kills-session", "output", "SET transaction_timeout = '50ms'; SELECT pg_sleep(2);", ("x",)),
        UnitTest("after", "output", "SELECT f_good();", ("1",)),
    )
    task = Task(id="t", subset="s", dialect="postgres", turns=(Turn(1, "p", tests),))
    report = evaluate_task(backend, task, ["CREATE FUNCTION f_good() RETURNS int LANGUAGE sql AS 'SELECT 1';"])
    by_id = {o.test_id: o for o in report.outcomes}
    assert by_id["before"].passed and by_id["after"].passed, [(o.test_id, o.failure_class, o.message) for o in report.outcomes]
    assert by_id["kills-session"].failure_class == "timeout"
    assert backend.scratch_objects() == []


@pytest.mark.parametrize("answer", ["SELECT 1;", "   ", "GRANT ALL ON SCHEMA public TO PUBLIC;"])
def test_a_broken_gold_query_excludes_the_test_whatever_the_answer(backend: PostgresBackend, answer: str) -> None:
    test = UnitTest("r", "rows", None, options={"gold_sql": "SELECT * FROM no_such_table;"})
    task = Task(id="g", subset="s", dialect="postgres", answer_mode="execute", turns=(Turn(1, "p", (test,)),))
    outcome = evaluate_task(backend, task, [answer]).outcomes[0]
    assert outcome.failure_class == "infrastructure", outcome.message
    assert "gold SQL" in outcome.message


def test_session_state_of_one_test_is_gone_for_the_next(backend: PostgresBackend) -> None:
    """Savepoints do not undo PREPARE or session advisory locks; the harness does."""
    tests = tuple(
        UnitTest(f"t{n}", "output", "PREPARE p1 AS SELECT 1; EXECUTE p1; SELECT pg_try_advisory_lock(42);", ("1", "t"))
        for n in (1, 2)
    )
    task = Task(id="t", subset="s", dialect="postgres", turns=(Turn(1, "p", tests),))
    report = evaluate_task(backend, task, ["SELECT 1;"])
    assert report.passed, [(o.test_id, o.failure_class, o.message) for o in report.outcomes]


def test_neutralised_transaction_control_is_reported_with_the_tests(backend: PostgresBackend) -> None:
    task = one_test_task("SELECT 1;", ("1",))
    outcome = evaluate_task(backend, task, ["SELECT 1; COMMIT;"]).outcomes[0]
    assert outcome.passed
    assert "ignored transaction control" in outcome.extra.get("notes", "")


@pytest.mark.parametrize(
    "answer",
    [
        # Without the guard, this makes every IS DISTINCT FROM on numeric[] say "equal".
        "CREATE FUNCTION answers.always_eq(a numeric[], b numeric[]) RETURNS boolean LANGUAGE sql AS 'SELECT true';\n"
        "CREATE OPERATOR answers.= (LEFTARG = numeric[], RIGHTARG = numeric[], FUNCTION = answers.always_eq);",
        # An exact-type cardinality() would win over pg_catalog's polymorphic one in the tests.
        "CREATE FUNCTION cardinality(a numeric[]) RETURNS int LANGUAGE sql AS 'SELECT 0';",
    ],
    ids=["operator", "shadowed-builtin"],
)
def test_answers_cannot_redefine_what_tests_compare_with(backend: PostgresBackend, answer: str) -> None:
    script = "DO $$ BEGIN IF ARRAY[1]::numeric[] IS DISTINCT FROM ARRAY[2]::numeric[] AND cardinality(ARRAY[1,2]::numeric[]) = 2 THEN RAISE NOTICE 'honest'; END IF; END $$;"
    task = one_test_task(script, ("honest",))
    outcome = evaluate_task(backend, task, [answer]).outcomes[0]
    assert (outcome.failure_class, outcome.error_code) == ("unsafe", "42501"), outcome.message
    # Under the same rules, a helper with its own name is fine.
    ok = evaluate_task(backend, task, ["CREATE FUNCTION my_helper(a numeric[]) RETURNS int LANGUAGE sql AS 'SELECT 1';"])
    assert ok.passed

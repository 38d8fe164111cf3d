"""Hostile answers against the batch path (issue 12's one-round-trip path for ``assert`` tests).

Each answer here tries something against a batch of tests: forging a pass by raising any
SQLSTATE, looping in one test, changing session state one test leaves for the next, reading the
test that calls it (and so the expected value) from wherever a function can see its caller.
Each must get exactly the outcomes it gets with every test run on its own (``batch=False``), and
none of them a pass it did not earn.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pytest_plsqlbench import outcomes
from pytest_plsqlbench.dialects.postgres import PostgresBackend
from pytest_plsqlbench.runner import TaskRun
from pytest_plsqlbench.tasks import Task, Turn, UnitTest

from embedded import started_backend

TIMEOUT = 1.0


@pytest.fixture(scope="module")
def backend() -> Iterator[PostgresBackend]:
    with started_backend("batch-hostile", timeout=TIMEOUT) as b:
        yield b


def check(expr: str, label: str) -> str:
    return f"DO $t$ BEGIN IF ({expr}) IS DISTINCT FROM true THEN RAISE EXCEPTION '{label} failed'; END IF; END $t$;"


def double_task(n: int = 6, *extra: str) -> Task:
    """``double_it(x)`` = 2x for x in 1..n, plus ``extra`` assert scripts."""
    tests = [UnitTest(f"x{x}", "assert", check(f"double_it({x}) = {2 * x}", f"x{x}")) for x in range(1, n + 1)]
    tests += [UnitTest(f"e{i}", "assert", script) for i, script in enumerate(extra, 1)]
    return Task(id="double", subset="hostile", dialect="postgres", turns=(Turn(1, "p", tuple(tests)),),
                entry_points=("double_it",))


def plpgsql(body: str, declare: str = "") -> str:
    return (f"CREATE FUNCTION double_it(x integer) RETURNS integer LANGUAGE plpgsql AS $f$ "
            f"{('DECLARE ' + declare) if declare else ''} BEGIN {body} END $f$;")


def outcomes_of(backend: PostgresBackend, task: Task, answer: str, *, batch: bool) -> list[tuple[Any, ...]]:
    run = TaskRun(backend, task, [answer], batch=batch, task_timeout=120.0)
    run.start()
    try:
        got = []
        for test in task.turns[0].tests:
            o = run.run_test(1, test)
            got.append((test.id, o.passed, o.failure_class, o.message, o.error_code, o.actual, dict(o.extra)))
        return got
    finally:
        run.finish()


def both_paths(backend: PostgresBackend, task: Task, answer: str) -> tuple[list[tuple[Any, ...]], dict[str, int]]:
    """The outcomes (identical on both paths, asserted) and what the batch path did."""
    alone = outcomes_of(backend, task, answer, batch=False)
    counts = backend.session().batch_counts
    before = dict(counts)
    batched = outcomes_of(backend, task, answer, batch=True)
    assert batched == alone
    return alone, {k: counts[k] - before.get(k, 0) for k in ("calls", "discarded", "decided", "alone")}


def passed(got: list[tuple[Any, ...]]) -> dict[str, bool]:
    return {test_id: ok for test_id, ok, *_ in got}


@pytest.mark.parametrize("code", ["PBOK0", "P0001", "P0004", "00000", "57P01", "XX000"])
def test_raising_the_runners_own_sqlstate_or_any_other_forges_no_pass(backend: PostgresBackend, code: str) -> None:
    # Right on x = 1, and otherwise raises the code the runner uses to roll a passed test back
    # (or another one), hoping the handler takes it for the runner's own.
    answer = plpgsql(f"IF x = 1 THEN RETURN 2; END IF; RAISE EXCEPTION 'pass me' USING ERRCODE = '{code}';")
    if code == "00000":  # successful_completion cannot be raised: the answer fails to install
        answer = plpgsql("IF x = 1 THEN RETURN 2; END IF; RAISE SQLSTATE 'PBOK0';")
    got, did = both_paths(backend, double_task(), answer)
    assert passed(got) == {"x1": True, **{f"x{x}": False for x in range(2, 7)}}
    assert did["calls"] == 1 and did["decided"] + did["alone"] == 5, did
    if code in ("PBOK0", "P0001", "P0004", "00000"):
        assert did["decided"] == 5, did  # decided in the batch, and still failed


def test_an_assert_statement_that_fails_is_caught_and_failed(backend: PostgresBackend) -> None:
    answer = plpgsql("ASSERT x = 1, 'only one'; RETURN 2 * x;")
    got, did = both_paths(backend, double_task(), answer)
    assert passed(got) == {"x1": True, **{f"x{x}": False for x in range(2, 7)}}
    assert {cls for _, ok, cls, *_ in got if not ok} == {outcomes.WRONG_OUTPUT}
    assert did["decided"] == 5, did


def test_an_endless_loop_in_one_test_times_out_that_test_only(backend: PostgresBackend) -> None:
    answer = plpgsql("IF x = 4 THEN LOOP END LOOP; END IF; RETURN 2 * x;")
    got, did = both_paths(backend, double_task(), answer)
    assert passed(got) == {**{f"x{x}": True for x in range(1, 7)}, "x4": False}
    assert [cls for test_id, _, cls, *_ in got if test_id == "x4"] == [outcomes.TIMEOUT]
    assert did["discarded"] == 0 and did["decided"] == 5, did  # the server's own statement timeout, per test


def test_a_loop_that_swallows_the_cancel_is_ended_and_timed_out(backend: PostgresBackend) -> None:
    answer = plpgsql("IF x = 3 THEN LOOP BEGIN PERFORM pg_catalog.pg_sleep(0.05); "
                     "EXCEPTION WHEN query_canceled THEN NULL; END; END LOOP; END IF; RETURN 2 * x;")
    got, _ = both_paths(backend, double_task(4), answer)
    assert passed(got) == {"x1": True, "x2": True, "x3": False, "x4": True}
    assert [cls for test_id, _, cls, *_ in got if test_id == "x3"] == [outcomes.TIMEOUT]


def test_session_state_one_test_leaves_is_gone_for_the_next(backend: PostgresBackend) -> None:
    # Every call changes what it can of the session; the extra tests look for any of it.
    answer = plpgsql(
        "PERFORM pg_catalog.set_config('search_path', 'pg_catalog', false); "
        "PERFORM pg_catalog.set_config('DateStyle', 'German', false); "
        "PERFORM pg_catalog.set_config('client_encoding', 'LATIN1', false); "
        "PERFORM pg_catalog.set_config('standard_conforming_strings', 'off', false); "
        "PERFORM pg_catalog.set_config('my.flag', 'dirty', false); "
        "PERFORM pg_catalog.pg_advisory_lock(7); "
        "BEGIN EXECUTE 'PREPARE leftover AS SELECT 1'; EXCEPTION WHEN duplicate_prepared_statement THEN NULL; END; "
        "CREATE TEMP TABLE IF NOT EXISTS leftover_rows(n int); INSERT INTO leftover_rows VALUES (x); "
        "RETURN 2 * x;")
    task = double_task(
        3,
        check("pg_catalog.current_setting('search_path') = 'answers, public, pg_temp'", "search_path"),
        check("pg_catalog.current_setting('DateStyle') = 'ISO, MDY'", "datestyle"),
        check("pg_catalog.current_setting('client_encoding') = 'UTF8'", "encoding"),
        check("pg_catalog.current_setting('standard_conforming_strings') = 'on'", "strings"),
        check("pg_catalog.current_setting('my.flag', true) IS NULL OR pg_catalog.current_setting('my.flag', true) = ''",
              "custom setting"),
        check("NOT EXISTS (SELECT FROM pg_catalog.pg_locks WHERE locktype = 'advisory' "
              "AND pid = pg_catalog.pg_backend_pid())", "advisory lock"),
        # (pg_prepared_statements is not the candidate's to read: a leftover shows as a name taken)
        "DO $t$ BEGIN EXECUTE 'PREPARE leftover AS SELECT 2'; EXCEPTION WHEN duplicate_prepared_statement THEN "
        "RAISE EXCEPTION 'prepared statement failed'; END $t$;",
        check("pg_catalog.to_regclass('pg_temp.leftover_rows') IS NULL", "temp table"),
    )
    got, did = both_paths(backend, task, answer)
    assert all(ok for _, ok, *_ in got), got
    assert did["decided"] == 10, did


def test_a_sequence_the_answer_can_advance_keeps_its_tests_apart(backend: PostgresBackend) -> None:
    # nextval is never rolled back: a test run again after its batch would see the values the
    # tests after it drew. No batch for such a session; each test runs on its own.
    answer = ("CREATE SEQUENCE calls; " + plpgsql("RETURN 2 * x + 0 * pg_catalog.nextval('calls');")
              + " CREATE FUNCTION calls_so_far() RETURNS bigint LANGUAGE sql AS 'SELECT last_value FROM calls';")
    task = double_task(3, check("calls_so_far() = 1", "fresh sequence"))
    got, did = both_paths(backend, task, answer)
    assert did["calls"] == 0 and did["decided"] == 0, did
    assert passed(got) == {"x1": True, "x2": True, "x3": True, "e1": False}


#: An answer that looks everywhere a PostgreSQL function can see what called it -- the session's
#: current query, its row in pg_stat_activity, its open portals and prepared statements, PG_CONTEXT, an exception's context -- for its own
#: call and the number the test compares it with, and returns that number; x + 100 otherwise.
PEEK = r"""
DECLARE t text := ''; part text; m text[];
BEGIN
  BEGIN t := t || coalesce(pg_catalog.current_query(), ''); EXCEPTION WHEN others THEN NULL; END;
  BEGIN
    t := t || coalesce((SELECT pg_catalog.string_agg(a.query, ' ') FROM pg_catalog.pg_stat_activity a
                        WHERE a.pid = pg_catalog.pg_backend_pid()), '');
  EXCEPTION WHEN others THEN NULL;
  END;
  -- The open portals of the session (the unnamed one runs the test's block) and its prepared
  -- statements, by view and by the functions under them.
  BEGIN
    t := t || coalesce((SELECT pg_catalog.string_agg(c.statement, ' ') FROM pg_catalog.pg_cursors c), '');
  EXCEPTION WHEN others THEN NULL;
  END;
  BEGIN
    t := t || coalesce((SELECT pg_catalog.string_agg(c.statement, ' ') FROM pg_catalog.pg_cursor() c), '');
  EXCEPTION WHEN others THEN NULL;
  END;
  BEGIN
    t := t || coalesce((SELECT pg_catalog.string_agg(s.statement, ' ') FROM pg_catalog.pg_prepared_statements s), '');
  EXCEPTION WHEN others THEN NULL;
  END;
  BEGIN
    t := t || coalesce((SELECT pg_catalog.string_agg(s.statement, ' ')
                        FROM pg_catalog.pg_prepared_statement() s), '');
  EXCEPTION WHEN others THEN NULL;
  END;
  GET DIAGNOSTICS part = PG_CONTEXT;
  t := t || part;
  BEGIN RAISE EXCEPTION 'peek'; EXCEPTION WHEN others THEN GET STACKED DIAGNOSTICS part = PG_EXCEPTION_CONTEXT; END;
  t := t || part;
  m := pg_catalog.regexp_match(t, 'double_it\(' || x || '\).*?(?:FROM|<>|=)\s*(\d+)');
  IF m IS NOT NULL THEN RETURN m[1]::integer; END IF;
  RETURN x + 100;
END"""


def peeking_answer(volatility: str, via_sql: bool) -> str:
    if not via_sql:
        return f"CREATE FUNCTION double_it(x integer) RETURNS integer LANGUAGE plpgsql {volatility} AS $f$ {PEEK} $f$;"
    # An SQL function (inlined or folded by the planner) over a volatile PL/pgSQL one.
    return (f"CREATE FUNCTION peek(x integer) RETURNS integer LANGUAGE plpgsql AS $f$ {PEEK} $f$;\n"
            f"CREATE FUNCTION double_it(x integer) RETURNS integer LANGUAGE sql {volatility} AS 'SELECT peek(x)';")


#: Test shapes: the call and the expected value in one condition (hand-written tasks), in an
#: expression PL/pgSQL runs as a query, and the converter's assignment-then-compare.
SHAPES = {
    "condition": lambda x: f"DO $t$ BEGIN IF double_it({x}) IS DISTINCT FROM {2 * x} THEN RAISE EXCEPTION 'x{x} failed'; END IF; END $t$;",
    "converted": lambda x: (f"DO $t$ DECLARE v_actual integer; BEGIN v_actual := double_it({x}); "
                            f"IF v_actual IS DISTINCT FROM {2 * x} THEN RAISE EXCEPTION 'x{x} failed'; END IF; END $t$;"),
    "sql-block": lambda x: (f"DO $t$ DECLARE v_actual integer; BEGIN v_actual := double_it({x}); "
                            f"DECLARE other integer := {2 * x}; BEGIN IF v_actual <> other THEN "
                            f"RAISE EXCEPTION 'x{x} failed'; END IF; END; END $t$;"),
}


def shaped_task(shape: str, n: int = 4) -> Task:
    tests = [UnitTest(f"x{x}", "assert", SHAPES[shape](x)) for x in range(1, n + 1)]
    return Task(id="double", subset="hostile", dialect="postgres", turns=(Turn(1, "p", tuple(tests)),),
                entry_points=("double_it",))


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("volatility,via_sql", [("IMMUTABLE", False), ("STABLE", False), ("VOLATILE", False),
                                                ("IMMUTABLE", True)])
def test_an_answer_cannot_read_the_expected_value_from_the_test_that_calls_it(
        backend: PostgresBackend, shape: str, volatility: str, via_sql: bool) -> None:
    answer = peeking_answer(volatility, via_sql)
    task = shaped_task(shape)
    # The same answer, where a session may read what calls it (a superuser's), passes every test:
    # the peeking works, so only the harness's containment can make it fail below.
    with psycopg.connect(backend.db_dsn, autocommit=True) as admin:
        admin.execute("BEGIN")
        admin.execute("CREATE SCHEMA peek_control")
        admin.execute("SET LOCAL search_path = peek_control")
        admin.execute(answer)
        for test in task.turns[0].tests:
            admin.execute(test.script or "")  # raises if the peek did not find the expected value
        admin.execute("ROLLBACK")
    got, did = both_paths(backend, task, answer)
    assert passed(got) == {f"x{x}": False for x in range(1, 5)}, got
    assert {cls for _, _, cls, *_ in got} == {outcomes.WRONG_OUTPUT}
    assert did["calls"] == 1 and did["decided"] == 3, did


def test_the_answers_functions_are_volatile_while_assert_tests_run(backend: PostgresBackend) -> None:
    answer = ("CREATE FUNCTION double_it(x integer) RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT 2 * x';\n"
              "CREATE TABLE twice(n integer); CREATE INDEX twice_doubled ON twice (double_it(n));")
    task = double_task(2, check("(SELECT p.provolatile FROM pg_catalog.pg_proc p WHERE p.proname = 'double_it') = 'v'",
                                "volatile"))
    got, _ = both_paths(backend, task, answer)
    assert all(ok for _, ok, *_ in got), got  # the answer's own expression index still installs


@pytest.mark.parametrize("body", [
    "RAISE EXCEPTION 'trailing blanks   ';",
    "RAISE EXCEPTION E'\\n  starts on a later line\\nand goes on';",
    "RAISE EXCEPTION 'non-ASCII: caf\u00e9';",
    "RAISE EXCEPTION '%', pg_catalog.repeat('long ', 2000);",
    "RAISE EXCEPTION '   ';",
    "RAISE NOTICE 'printed before failing'; RAISE EXCEPTION 'then failed';",
    "RETURN double_it(x);",  # endless recursion: stack depth exceeded
    "RAISE EXCEPTION 'in transaction state' USING ERRCODE = '25001';",
])
def test_failure_messages_read_as_on_their_own(backend: PostgresBackend, body: str) -> None:
    answer = plpgsql(f"IF x = 1 THEN RETURN 2; END IF; {body} RETURN 0;")
    got, did = both_paths(backend, double_task(4), answer)
    assert passed(got) == {"x1": True, "x2": False, "x3": False, "x4": False}
    assert did["calls"] == 1, did


def test_notices_of_passing_tests_do_not_matter_and_failing_ones_run_alone(backend: PostgresBackend) -> None:
    answer = plpgsql("RAISE NOTICE 'called with %', x; IF x > 4 THEN RETURN 0; END IF; RETURN 2 * x;")
    got, did = both_paths(backend, double_task(), answer)
    assert passed(got) == {"x1": True, "x2": True, "x3": True, "x4": True, "x5": False, "x6": False}
    assert [actual for test_id, _, _, _, _, actual, _ in got if test_id == "x5"] == [["called with 5"]]
    assert did["decided"] == 3 and did["alone"] == 2, did

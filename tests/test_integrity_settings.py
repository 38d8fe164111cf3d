"""The harness owns every session setting it depends on (issue 10, item 2).

Pinned in each candidate connection's startup packet, reset after every script, restored at
once when a statement changes one the lexer or the driver reads, and the candidate's role
defaults put back at the end of a task: nothing an answer sets reaches the next task.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_plsqlbench.dialects.postgres import PINNED_SETTINGS, PostgresBackend
from pytest_plsqlbench.runner import evaluate_task
from pytest_plsqlbench.tasks import Task, Turn, UnitTest

from embedded import started_backend
from integrity_subset import by_test, run_plugin, write_subset

#: Settings an answer may try to poison, and a value that would break the harness or the tests.
POISON = {
    "client_encoding": "EUC_TW",
    "standard_conforming_strings": "off",
    "DateStyle": "SQL, DMY",
    "IntervalStyle": "sql_standard",
    "extra_float_digits": "-15",
    "search_path": "pg_temp, public",
    "bytea_output": "escape",
    "default_transaction_read_only": "on",
    "client_min_messages": "error",
    "statement_timeout": "0",
    "idle_session_timeout": "1",
    "TimeZone": "Asia/Kathmandu",
}

#: What the tests of the canary see when nothing leaked.
CANARY_SCRIPT = (
    "SELECT current_setting('client_encoding'), current_setting('standard_conforming_strings'), "
    "current_setting('DateStyle'), current_setting('IntervalStyle'), current_setting('extra_float_digits'), "
    "current_setting('search_path'), current_setting('bytea_output'), current_setting('default_transaction_read_only'), "
    "current_setting('client_min_messages'), current_setting('statement_timeout');"
)


@pytest.fixture(scope="module")
def backend() -> Iterator[PostgresBackend]:
    with started_backend("integrity-settings", timeout=2.0) as b:
        yield b


def expected_canary() -> str:
    p = PINNED_SETTINGS
    return ",".join([p["client_encoding"], "on", p["DateStyle"], p["IntervalStyle"], p["extra_float_digits"],
                     p["search_path"], p["bytea_output"], "off", "notice", "2s"])


def task(name: str, tests: list[tuple[str, str, tuple[str, ...]]]) -> Task:
    units = tuple(UnitTest(i, "output", script, expected) for i, script, expected in tests)
    return Task(id=name, subset="i", dialect="postgres", turns=(Turn(1, "p", units),), entry_points=("f",))


def canary() -> Task:
    return task("canary", [("settings", CANARY_SCRIPT, (expected_canary(),)),
                           ("values", "SELECT 0.1::float8 + 0.2, date '2024-03-01', interval '1 day 2 hours', '\\x01'::bytea, 'a\\b';",
                            ("0.30000000000000004,2024-03-01,1 day 02:00:00,\\x01,a\\b",))])


def test_canary_passes_on_a_fresh_backend(backend: PostgresBackend) -> None:
    report = evaluate_task(backend, canary(), ["SELECT 1;"])
    assert report.passed, [(o.test_id, o.message, o.actual) for o in report.failures()]


@pytest.mark.parametrize(("name", "value"), sorted(POISON.items()))
def test_a_setting_an_install_makes_stays_in_its_script(backend: PostgresBackend, name: str, value: str) -> None:
    """A correct answer that also poisons a setting at the end of its install: its tests are
    judged with the harness's settings, and the next task sees none of it."""
    answer = ("CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 41 + 1';\n"
              f"SELECT set_config('{name}', '{value}', false);\nSET {name} = '{value}';")
    report = evaluate_task(backend, task("poison", [("t", "SELECT f();", ("42",))]), [answer])
    assert report.passed, [(o.failure_class, o.message) for o in report.outcomes]
    after = evaluate_task(backend, canary(), ["SELECT 1;"])
    assert after.passed, [(o.test_id, o.message, o.actual) for o in after.failures()]


def test_standard_conforming_strings_off_cannot_change_how_later_statements_are_read(backend: PostgresBackend) -> None:
    """After ``SET standard_conforming_strings = off`` the next statement still runs as it was split."""
    answer = ("SET standard_conforming_strings = off;\n"
              "CREATE FUNCTION f() RETURNS text LANGUAGE sql AS $$ SELECT 'a\\' $$;\n"
              "SELECT '\\' AS x;")
    report = evaluate_task(backend, task("scs", [("t", "SELECT f();", ("a\\",))]), [answer])
    assert report.passed, [(o.failure_class, o.message) for o in report.outcomes]


@pytest.mark.parametrize(
    "setting",
    ["client_encoding = 'EUC_TW'", "default_transaction_read_only = on", "statement_timeout = 0",
     "search_path = pg_temp, public", "client_min_messages = error", "DateStyle = 'SQL, DMY'"],
)
def test_role_defaults_that_escape_the_transaction_are_put_back(backend: PostgresBackend, setting: str) -> None:
    """An ``ALTER ROLE CURRENT_USER SET`` that got committed (as the issue's splitter escape did):
    the next task's connection has the provisioned defaults again."""
    before = backend._current_role_settings()
    session = backend.session()
    session.end_task() if session._in_task else None
    assert session.conn is not None
    session.conn.execute(f"ALTER ROLE CURRENT_USER SET {setting}")  # autocommit: it sticks
    session.begin_task()
    session.end_task()  # the janitor pass
    assert backend._current_role_settings() == before
    report = evaluate_task(backend, canary(), ["SELECT 1;"])
    assert report.passed, [(o.test_id, o.message, o.actual) for o in report.failures()]


def test_the_candidate_cannot_set_database_defaults(backend: PostgresBackend) -> None:
    answer = "ALTER DATABASE plsqlbench SET search_path = pg_temp, public;"
    report = evaluate_task(backend, task("dbset", [("t", "SELECT 1;", ("1",))]), [answer])
    assert report.outcomes[0].failure_class == "unsafe"


def test_poisoned_settings_through_the_plugin(pytester: pytest.Pytester) -> None:
    """The issue's run: an install that ends with ``SET client_encoding = 'EUC_TW'`` (and other
    poison) no longer gets its task excluded; every later task is judged normally."""
    tasks, answers = {}, {}
    for i, (name, value) in enumerate(sorted(POISON.items())):
        tid = f"poison_{i}"
        tasks[tid] = {"entry_points": ["f"], "tests": [
            {"id": "right", "kind": "output", "script": "SELECT f(1);", "expected": ["2"]},
            {"id": "wrong", "kind": "output", "script": "SELECT f(2);", "expected": ["4"]},
        ]}
        answers[tid] = (f"CREATE FUNCTION f(x int) RETURNS int LANGUAGE sql AS 'SELECT x + 1';\n"
                        f"SELECT set_config('{name}', '{value}', false);")
    tasks["canary"] = {"entry_points": ["f"], "tests": [
        {"id": "settings", "kind": "output", "script": CANARY_SCRIPT, "expected": [expected_canary()]}]}
    answers["canary"] = "SELECT 1;"
    folder, answers_file = write_subset(pytester.path, "poison", tasks, answers)
    doc, result = run_plugin(pytester, folder, "poison", answers_file, "--plsql-safety=off")
    tests = by_test(doc)
    for tid in answers:
        if tid == "canary":
            continue
        assert tests[(tid, "right")]["passed"], tests[(tid, "right")]
        assert tests[(tid, "wrong")]["failure_class"] == "wrong_output", tests[(tid, "wrong")]
    assert tests[("canary", "settings")]["passed"], tests[("canary", "settings")]
    assert doc["subsets"]["poison"]["excluded_tasks"] == []


def test_random_numbers_the_last_task_seeded_do_not_reach_the_next(backend: PostgresBackend) -> None:
    """``DISCARD ALL`` does not reset ``random()``'s generator: an answer that seeds it would
    choose (or know) the random values of the next task on the connection. The end of a task
    seeds it afresh, as a new connection would be (found by a red-team review)."""
    after_seed = "SELECT setseed(0.5); SELECT random();"
    probe = "SELECT random();"
    # What the first random() is right after setseed(0.5), on this server.
    report = evaluate_task(backend, task("seeded", [("value", after_seed, ("-",))]), ["SELECT 1;"])
    seeded_value = report.outcomes[0].actual[-1]
    assert seeded_value and seeded_value != "-"
    firsts = []
    for n in range(3):
        # The answer seeds the generator at install; the next task reads it.
        evaluate_task(backend, task(f"seeds-{n}", [("t", "SELECT 1;", ("1",))]), ["SELECT setseed(0.5);"])
        nxt = evaluate_task(backend, task(f"reads-{n}", [("t", probe, ("-",))]), ["SELECT 1;"])
        firsts.append(nxt.outcomes[0].actual[-1])
    assert seeded_value not in firsts
    assert len(set(firsts)) == 3  # a fresh seed each time, not one fixed value


#: Ways an answer can create a custom setting's name (which outlives ROLLBACK and DISCARD ALL).
CUSTOM_NAMES = {
    "set_config": "SELECT set_config('x.seen', 'v', false);",
    "set_config in a transaction": "SELECT set_config('x.seen', 'v', true);",
    "SET": "SET x.seen = 'v';",
    "SET LOCAL": "SET LOCAL x.seen TO 'v';",
    "RESET": "RESET x.seen;",
    "RESET, quoted": 'RESET "x"."seen";',
    "RESET in a procedure": (
        "CREATE PROCEDURE answers.p() LANGUAGE plpgsql AS $$ BEGIN RESET x.seen; END $$; CALL answers.p();"),
    "SET SESSION, quoted, comments": 'SET SESSION "x" /* ; */ . /* -- */ "seen" = \'v\';',
    "in a function": ("CREATE FUNCTION answers.f() RETURNS text LANGUAGE plpgsql AS $$ BEGIN SET x.seen = 1; "
                      "RETURN 'ok'; END $$; SELECT answers.f();"),
    "dynamic SQL": "DO $$ BEGIN EXECUTE 'SE' || 'T x.' || 'seen = 1'; END $$;",
    "a query string ts_stat runs": ("SELECT count(*) FROM ts_stat('select to_tsvector(pg_catalog.set_' || "
                                    "'config(''x.seen'', ''v'', false))');"),
    "U& escape": 'SET U&"\\0078".seen = 1;',
}


@pytest.mark.parametrize("script", list(CUSTOM_NAMES.values()), ids=list(CUSTOM_NAMES))
def test_a_custom_setting_name_an_answer_creates_never_reaches_the_next_task(backend: PostgresBackend, script: str) -> None:
    """Issue 28: ``current_setting('x.seen', true)`` is NULL for a name nobody created and ``''``
    after an earlier task created it, whatever ROLLBACK and DISCARD ALL did. A task whose scripts
    may have created one ends with a new backend."""
    probe = "SELECT coalesce(current_setting('x.seen', true), 'never seen');"
    made = evaluate_task(backend, task("makes", [("t", probe, ("-",))]), [script])
    assert made.outcomes[0].actual, made.outcomes[0].message
    assert made.outcomes[0].actual[-1] != "never seen", "the script did not create the name: the test proves nothing"
    later = evaluate_task(backend, task("reads", [("t", probe, ("never seen",))]), ["SELECT 1;"])
    assert later.outcomes[0].passed, later.outcomes[0].actual


def test_a_task_that_cannot_create_a_setting_name_keeps_its_backend(backend: PostgresBackend) -> None:
    """The check is cheap: a task whose scripts name no setting keeps the connection (no reconnect)."""
    evaluate_task(backend, task("plain-1", [("t", "SELECT 1;", ("1",))]), ["SELECT 2;"])
    pid = backend.session().backend_pid
    evaluate_task(backend, task("plain-2", [("t", "SELECT 1 + 1;", ("2",))]), ["CREATE FUNCTION answers.g() RETURNS int LANGUAGE sql AS 'SELECT 3';"])
    assert backend.session().backend_pid == pid
    evaluate_task(backend, task("names-one", [("t", "SELECT 1;", ("1",))]), ["SELECT set_config('y.z', '1', false);"])
    assert backend.session().backend_pid != pid

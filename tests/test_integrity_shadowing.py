"""Nothing an answer creates changes what a test or a harness helper resolves to (issue 10, item 3).

Each hostile answer is wrong and would pass its test if the name it squats were resolved to
it; the event-trigger guard refuses it (``unsafe``) whatever ``--plsql-safety`` says, and
ordinary answers that create their own types, aggregates and triggers still pass.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_plsqlbench.dialects.postgres import PostgresBackend
from pytest_plsqlbench.runner import evaluate_task
from pytest_plsqlbench.tasks import Fixture, Task, Turn, UnitTest

from embedded import started_backend
from integrity_subset import by_test, run_plugin, write_subset

FIXTURE = Fixture("integrity:shadow", """
CREATE TYPE public.numeric_numeric_kv AS (a numeric, b numeric);
CREATE FUNCTION public.bench_same(x jsonb, y jsonb) RETURNS boolean LANGUAGE sql AS 'SELECT x = y';
CREATE TABLE public.bench_rows(x int);
INSERT INTO public.bench_rows VALUES (1), (2);
""")

#: The wrong answer: total() returns 0. Each test passes only if a squatted name makes it look right.
WRONG = "CREATE FUNCTION total(x numeric[]) RETURNS numeric LANGUAGE sql AS 'SELECT 0::numeric';\n"
TEST_JSONB = "SELECT public.bench_same(to_jsonb(total(ARRAY[1,2]::numeric[])), to_jsonb(3::numeric));"
TEST_CARD = "SELECT cardinality(ARRAY[total(ARRAY[1,2]::numeric[])]::numeric[]) = 3;"
TEST_TYPE = "SELECT (ROW(total(ARRAY[1]::numeric[]), 1)::numeric_numeric_kv).a IS NOT DISTINCT FROM 1;"
TEST_HELPER = "SELECT bench_same(to_jsonb(total(ARRAY[1]::numeric[])), '1'::jsonb);"
TRUE_AGG = ("CREATE FUNCTION yes_sfunc(boolean, numeric) RETURNS boolean LANGUAGE sql AS 'SELECT true';\n"
            "CREATE AGGREGATE {name}(numeric) (sfunc = yes_sfunc, stype = boolean);\n")

HOSTILE = {
    # The issue's: an aggregate renamed to to_jsonb(numeric) makes every comparison through
    # to_jsonb true-ish; one renamed to cardinality(numeric[]) likewise.
    "alter_aggregate_rename": (WRONG + "CREATE FUNCTION j_sfunc(jsonb, numeric) RETURNS jsonb LANGUAGE sql AS $$SELECT '3'::jsonb$$;\n"
                               "CREATE AGGREGATE jagg(numeric) (sfunc = j_sfunc, stype = jsonb);\n"
                               "ALTER AGGREGATE jagg(numeric) RENAME TO to_jsonb;", TEST_JSONB, "t"),
    "alter_procedure_rename": (WRONG + "CREATE PROCEDURE p(x int) LANGUAGE sql AS 'SELECT 1';\n"
                               "ALTER PROCEDURE p(int) RENAME TO cardinality;", TEST_CARD, "t"),
    "alter_function_rename": (WRONG + "CREATE FUNCTION c(x numeric[]) RETURNS int LANGUAGE sql AS 'SELECT 3';\n"
                              "ALTER FUNCTION c(numeric[]) RENAME TO cardinality;", TEST_CARD, "t"),
    "alter_routine_rename": (WRONG + "CREATE FUNCTION c(x numeric[]) RETURNS int LANGUAGE sql AS 'SELECT 3';\n"
                             "ALTER ROUTINE c(numeric[]) RENAME TO cardinality;", TEST_CARD, "t"),
    "create_aggregate": (WRONG + TRUE_AGG.format(name="to_jsonb"), TEST_JSONB, "t"),
    "temp_type_shadows_fixture_type": (WRONG + "CREATE TYPE pg_temp.numeric_numeric_kv AS (a text, b text);", TEST_TYPE, "t"),
    "scratch_type_shadows_fixture_type": (WRONG + "CREATE TYPE numeric_numeric_kv AS (a text, b text);", TEST_TYPE, "t"),
    "table_rowtype_shadows_fixture_type": (WRONG + "CREATE TABLE numeric_numeric_kv(a text, b text);", TEST_TYPE, "t"),
    "type_renamed_onto_fixture_type": (WRONG + "CREATE TYPE kv AS (a text, b text);\nALTER TYPE kv RENAME TO numeric_numeric_kv;",
                                       TEST_TYPE, "t"),
    "domain_shadows_builtin_type": (WRONG + "CREATE DOMAIN int4 AS text;", "SELECT 1::int4;", "1"),
    "enum_shadows_builtin_type": (WRONG + "CREATE TYPE bool AS ENUM ('t');", "SELECT true::bool;", "t"),
    "helper_function_squatted": (WRONG + "CREATE FUNCTION bench_same(x jsonb, y jsonb) RETURNS boolean LANGUAGE sql AS 'SELECT true';",
                                 TEST_HELPER, "t"),
    "operator": (WRONG + "CREATE FUNCTION eq(numeric[], numeric[]) RETURNS boolean LANGUAGE sql AS 'SELECT true';\n"
                 "CREATE OPERATOR = (leftarg = numeric[], rightarg = numeric[], function = eq);",
                 "SELECT ARRAY[total(ARRAY[1]::numeric[])] = ARRAY[1::numeric];", "t"),
    "cast": (WRONG + "CREATE TYPE money2 AS (x int);\nCREATE CAST (money2 AS text) WITH INOUT;", "SELECT 1;", "1"),
    "collation": (WRONG + "CREATE COLLATION mine (provider = icu, locale = 'und');", "SELECT 1;", "1"),
    "text_search": (WRONG + "CREATE TEXT SEARCH CONFIGURATION english2 (COPY = english);", "SELECT 1;", "1"),
    "rule_on_own_table": (WRONG + "CREATE TABLE r(x int);\nCREATE RULE r_ins AS ON INSERT TO r DO INSTEAD NOTHING;", "SELECT 1;", "1"),
    "table_shadows_fixture_table": (WRONG + "CREATE TABLE bench_rows(x int);\nINSERT INTO bench_rows VALUES (3);",
                                    "SELECT max(x) = 3 FROM bench_rows;", "t"),
    "view_renamed_onto_fixture_table": (WRONG + "CREATE VIEW v AS SELECT 3 AS x;\nALTER VIEW v RENAME TO bench_rows;",
                                        "SELECT max(x) = 3 FROM bench_rows;", "t"),
    # CREATE TYPE ... AS RANGE also makes a multirange type and constructor functions, which the
    # command does not report: each named like what the tests use.
    "multirange_shadows_fixture_type": (WRONG + "CREATE TYPE r1 AS RANGE (subtype = numeric, "
                                        "multirange_type_name = numeric_numeric_kv);", TEST_TYPE, "t"),
    "multirange_shadows_builtin_type": (WRONG + "CREATE TYPE r2 AS RANGE (subtype = numeric, "
                                        "multirange_type_name = int4);", "SELECT 1::int4;", "1"),
    "range_constructor_shadows_builtin_function": (WRONG + "CREATE TYPE to_jsonb AS RANGE (subtype = numeric);",
                                                   "SELECT 1;", "1"),
    "range_constructor_shadows_helper_function": (WRONG + "CREATE TYPE bench_same AS RANGE (subtype = jsonb);",
                                                  "SELECT 1;", "1"),
    "trigger_on_fixture_table": (WRONG + "CREATE FUNCTION tf() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;\n"
                                 "CREATE TRIGGER tr BEFORE INSERT ON public.bench_rows FOR EACH ROW EXECUTE FUNCTION tf();",
                                 "SELECT 1;", "1"),
}


@pytest.fixture(scope="module")
def backend() -> Iterator[PostgresBackend]:
    with started_backend("integrity-shadow", timeout=2.0) as b:
        yield b


def task(name: str, script: str, expected: str) -> Task:
    return Task(id=name, subset="i", dialect="postgres", turns=(Turn(1, "p", (UnitTest("t", "output", script, (expected,)),)),),
                entry_points=("total",), fixtures=(FIXTURE,))


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_squatting_a_name_the_tests_use_is_refused(backend: PostgresBackend, name: str) -> None:
    answer, script, expected = HOSTILE[name]
    outcome = evaluate_task(backend, task(name, script, expected), [answer]).outcomes[0]
    assert not outcome.passed
    assert outcome.failure_class == "unsafe", (outcome.failure_class, outcome.message)
    # and the next task resolves names as before
    ok = evaluate_task(backend, task("after", TEST_TYPE.replace("total(ARRAY[1]::numeric[])", "1"), "t"), ["SELECT 1;"])
    assert ok.passed, [(o.failure_class, o.message) for o in ok.outcomes]


@pytest.mark.parametrize(
    "answer",
    [
        "CREATE TYPE pair AS (a int, b int);\nCREATE FUNCTION total(x numeric[]) RETURNS numeric LANGUAGE sql "
        "AS 'SELECT sum(v) FROM unnest(x) v';",
        TRUE_AGG.format(name="all_yes") + "CREATE FUNCTION total(x numeric[]) RETURNS numeric LANGUAGE sql "
        "AS 'SELECT sum(v) FROM unnest(x) v';",
        "CREATE TABLE log(x int);\nCREATE FUNCTION tf() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;\n"
        "CREATE TRIGGER tr BEFORE INSERT ON log FOR EACH ROW EXECUTE FUNCTION tf();\n"
        "CREATE TEMP TABLE scratch(x int);\nCREATE DOMAIN posint AS int CHECK (VALUE > 0);\n"
        "CREATE FUNCTION total(x numeric[]) RETURNS numeric LANGUAGE sql AS 'SELECT sum(v) FROM unnest(x) v';",
        # a range of its own (its multirange, arrays and constructors named after it) and a table
        "CREATE TYPE numspan AS RANGE (subtype = numeric);\nCREATE TABLE total_log(x int);\n"
        "CREATE FUNCTION total(x numeric[]) RETURNS numeric LANGUAGE sql AS 'SELECT sum(v) FROM unnest(x) v';",
    ],
    ids=["own_type", "own_aggregate", "own_trigger_temp_table_domain", "own_range_and_table"],
)
def test_ordinary_answers_that_create_their_own_objects_pass(backend: PostgresBackend, answer: str) -> None:
    report = evaluate_task(backend, task("ok", "SELECT total(ARRAY[1,2]::numeric[]);", "3"), [answer])
    assert report.passed, [(o.failure_class, o.message) for o in report.outcomes]


def test_shadowing_through_the_plugin_with_safety_off(pytester: pytest.Pytester) -> None:
    """Containment does not depend on the pre-check: with --plsql-safety=off every squatter fails."""
    pick = ("alter_aggregate_rename", "temp_type_shadows_fixture_type", "alter_procedure_rename", "helper_function_squatted")
    fixtures = pytester.path / "shadow-tasks" / "fixtures"  # next to the subset's manifest
    (fixtures / "shadow").mkdir(parents=True)
    (fixtures / "shadow" / "postgres.sql").write_text(FIXTURE.script)
    tasks = {n: {"entry_points": ["total"], "fixtures": ["shadow"],
                 "tests": [{"id": "t", "kind": "output", "script": HOSTILE[n][1], "expected": [HOSTILE[n][2]]}]}
             for n in pick}
    folder, answers = write_subset(pytester.path, "shadow", tasks, {n: HOSTILE[n][0] for n in pick})
    doc, _ = run_plugin(pytester, folder, "shadow", answers, "--plsql-safety=off")
    tests = by_test(doc)
    assert {n: tests[(n, "t")]["failure_class"] for n in pick} == {n: "unsafe" for n in pick}

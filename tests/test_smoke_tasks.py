"""The ``smoke`` subset: its tasks are sound in both dialects and every task can fail.

* Static checks (no database): each task file loads in both dialects with the same turns,
  test ids and kinds; the subset keeps the size and coverage issue 2 asks for; the Oracle
  scripts end every PL/SQL unit with a ``/`` line and neither dialect's scripts contain the
  other's idioms (the usual copy-paste slip between the two blocks of a test).
* End to end (``pytester`` subprocesses, as a user runs it): every reference answer passes
  on the embedded PostgreSQL; the Oracle files collect; and one run feeding a deliberately
  wrong but compiling PL/pgSQL answer per task (``WRONG_ANSWERS`` below) fails at least one
  test of every task with the failure class ``wrong_output``.
* On a reachable Oracle (``PLSQL_ORACLE_DSN``) the reference answers must pass there too.

A new smoke task needs a wrong answer here: ``test_every_task_has_a_wrong_answer`` says so.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from pytest_plsqlbench.loaders.yaml_tasks import load_task_file
from pytest_plsqlbench.scripts import split
from pytest_plsqlbench.tasks import Task

REPO = Path(__file__).resolve().parent.parent
SMOKE_DIR = REPO / "tasks" / "smoke"
FIXTURE_DIRS = (REPO / "fixtures",)
TASK_FILES = sorted(SMOKE_DIR.glob("*.yaml"))

RUN_ARGS = ("--subset", "smoke", "-p", "no:cacheprovider")
POSTGRES = "--plsql-dialect=postgres"
REQUIRED_MARKERS = {
    "construct_function",
    "construct_procedure",
    "construct_package",
    "construct_exception",
    "construct_collection",
    "construct_cursor",
    "multiturn_conversation",
}
DIFFICULTIES = {"simple", "intermediate", "advanced"}


def _load(path: Path, dialect: str) -> Task:
    return load_task_file(path, "smoke", dialect, FIXTURE_DIRS)


@pytest.fixture(scope="module")
def tasks() -> dict[str, dict[str, Task]]:
    """``{dialect: {task_id: Task}}`` for every smoke task file."""
    return {d: {t.id: t for t in (_load(p, d) for p in TASK_FILES)} for d in ("postgres", "oracle")}


def _scripts(task: Task):
    """(label, script) for every reference answer and test script of a task."""
    for turn in task.turns:
        if turn.reference is not None:
            yield f"turn {turn.index} reference", turn.reference
        for test in turn.tests:
            if test.script is not None:
                yield f"turn {turn.index} test {test.id}", test.script


# --------------------------------------------------------------------------- static checks


def test_subset_size_and_coverage(tasks: dict[str, dict[str, Task]]) -> None:
    pg = tasks["postgres"]
    assert 15 <= len(pg) <= 25, f"the smoke subset should have 15-25 tasks, has {len(pg)}"
    markers = {m for t in pg.values() for m in t.markers}
    assert REQUIRED_MARKERS <= markers, f"no task covers {sorted(REQUIRED_MARKERS - markers)}"
    assert any(t.answer_mode == "execute" for t in pg.values()), "no answer_mode: execute task"
    assert any(len(t.turns) == 3 for t in pg.values()), "no 3-turn conversation"
    assert any(t.fixtures for t in pg.values()), "no schema-grounded task"
    for t in pg.values():
        assert t.metadata.get("difficulty") in DIFFICULTIES, f"{t.id}: metadata.difficulty"


@pytest.mark.parametrize("path", TASK_FILES, ids=[p.stem for p in TASK_FILES])
def test_task_is_the_same_in_both_dialects(path: Path) -> None:
    pg, ora = _load(path, "postgres"), _load(path, "oracle")
    assert pg.id == path.stem, "a smoke task's id is its file name"
    assert (pg.answer_mode, pg.markers, [f.description for f in pg.fixtures]) == (
        ora.answer_mode,
        ora.markers,
        [f.description for f in ora.fixtures],
    )
    assert len(pg.turns) == len(ora.turns)
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    raw_turns = raw.get("turns") or [raw]
    for t_pg, t_ora, t_raw in zip(pg.turns, ora.turns, raw_turns):
        assert t_pg.reference and t_ora.reference, f"turn {t_pg.index}: a reference answer in each dialect"
        assert t_pg.prompt != t_ora.prompt or "prompt" in t_raw, "dialect prompts should differ or be shared"
        assert [(u.id, u.kind, u.script is None) for u in t_pg.tests] == [
            (u.id, u.kind, u.script is None) for u in t_ora.tests
        ]
        for u_pg, u_ora, u_raw in zip(t_pg.tests, t_ora.tests, t_raw["tests"]):
            if not isinstance(u_raw.get("expected"), dict):
                assert u_pg.expected == u_ora.expected


_EXEC_LINE = re.compile(r"^EXEC(UTE)?\s", re.IGNORECASE)
_END_LINE = re.compile(r"^END\b", re.IGNORECASE)
_SQL_START = re.compile(r"^(SELECT|INSERT|UPDATE|DELETE|CREATE|GRANT)\b", re.IGNORECASE)
_ORACLE_ONLY = ("DBMS_OUTPUT", "RAISE_APPLICATION_ERROR", " FROM dual", "EXEC ", "SYS_REFCURSOR", "NVL(")
_POSTGRES_ONLY = ("$$", "RAISE NOTICE", "RAISE EXCEPTION", "::", "CALL ", "LANGUAGE plpgsql", "coalesce(")


def _oracle_script_problems(label: str, script: str) -> list[str]:
    """SQL*Plus hygiene, checked with the harness's own splitter.

    A PL/SQL unit whose '/' line is missing swallows the next statement: it then holds a
    column-0 ``END`` line before its last line. Every other PL/SQL unit (``EXEC`` lines aside)
    must own exactly one '/' line, and plain SQL must not run into the next statement.
    """
    problems = []
    lines = script.splitlines()
    statements = split(script, "oracle")
    if not statements:
        problems.append(f"oracle {label}: no statements")
    units = [s for s in statements if s.kind == "plsql"]
    execs = sum(1 for line in lines if _EXEC_LINE.match(line))
    slashes = sum(1 for line in lines if line.strip() == "/")
    if len(units) - execs != slashes:
        problems.append(f"oracle {label}: {len(units) - execs} PL/SQL unit(s) but {slashes} '/' line(s)")
    for stmt in statements:
        body = stmt.text.splitlines()
        if stmt.kind == "plsql" and any(_END_LINE.match(line) for line in body[:-1]):
            problems.append(f"oracle {label} line {stmt.line}: PL/SQL unit runs into the next (no '/')")
        if stmt.kind == "sql" and any(_SQL_START.match(line) for line in body[1:]):
            problems.append(f"oracle {label} line {stmt.line}: SQL runs into the next statement (no ';')")
    for word in _POSTGRES_ONLY:
        if word in script:
            problems.append(f"oracle {label}: contains PostgreSQL {word!r}")
    return problems


@pytest.mark.parametrize("path", TASK_FILES, ids=[p.stem for p in TASK_FILES])
def test_scripts_follow_their_dialect(path: Path) -> None:
    oracle = _load(path, "oracle")
    problems = [p for label, script in _scripts(oracle) for p in _oracle_script_problems(label, script)]
    assert not problems, "\n".join(problems)
    for label, script in _scripts(_load(path, "postgres")):
        assert not any(line.strip() == "/" for line in script.splitlines()), f"postgres {label}: '/' line"
        for word in _ORACLE_ONLY:
            assert word.lower() not in script.lower(), f"postgres {label}: contains Oracle {word!r}"


ORACLE_FIXTURES = sorted((REPO / "fixtures").glob("*/oracle.sql"))


@pytest.mark.parametrize("path", ORACLE_FIXTURES, ids=[p.parent.name for p in ORACLE_FIXTURES])
def test_oracle_fixture_scripts(path: Path) -> None:
    assert _oracle_script_problems(path.parent.name, path.read_text(encoding="utf-8")) == []


def test_oracle_lint_catches_broken_scripts() -> None:
    good = (
        "CREATE FUNCTION f RETURN NUMBER IS\nBEGIN\n  RETURN 1;\nEND f;\n/\n"
        "SELECT f FROM dual;\nEXEC p(1);\n"
    )
    assert _oracle_script_problems("good", good) == []
    assert _oracle_script_problems("no slash", good.replace("END f;\n/\n", "END f;\n"))
    assert _oracle_script_problems("two units, one slash", "BEGIN\n  NULL;\nEND;\nBEGIN\n  NULL;\nEND;\n/\n")
    assert _oracle_script_problems("no semicolon", "SELECT 1 FROM dual\nSELECT 2 FROM dual;\n")
    assert _oracle_script_problems("postgres", "DO $$ BEGIN RAISE NOTICE 'x'; END $$;\n")


# --------------------------------------------------------------------------- end to end


def test_reference_answers_pass(pytester: pytest.Pytester, tasks: dict[str, dict[str, Task]]) -> None:
    results = pytester.path / "reference.json"
    run = pytester.runpytest_subprocess(
        *RUN_ARGS, POSTGRES, "--plsql-model=reference", f"--plsql-results={results}"
    )
    n_tests = sum(t.n_tests for t in tasks["postgres"].values())
    run.assert_outcomes(passed=n_tests)
    doc = json.loads(results.read_text(encoding="utf-8"))
    assert doc["subsets"]["smoke"]["suite_pass"] == 1.0
    assert sorted(t["task_id"] for t in doc["tasks"]) == sorted(tasks["postgres"])
    assert 15 <= len(doc["tasks"]) <= 25


def test_oracle_files_collect(pytester: pytest.Pytester, tasks: dict[str, dict[str, Task]]) -> None:
    run = pytester.runpytest_subprocess(*RUN_ARGS, "--collect-only", "-q", "--plsql-dialect=oracle")
    assert run.ret == 0, run.stdout.str()
    n_tests = sum(t.n_tests for t in tasks["oracle"].values())
    assert f"{n_tests} tests collected" in run.stdout.str()
    for task_id in tasks["oracle"]:
        assert any(line.startswith(f"smoke/{task_id}/") for line in run.outlines), task_id


@pytest.mark.oracle
@pytest.mark.skipif(not os.environ.get("PLSQL_ORACLE_DSN"), reason="no Oracle: set PLSQL_ORACLE_DSN")
def test_reference_answers_pass_on_oracle(
    pytester: pytest.Pytester, tasks: dict[str, dict[str, Task]]
) -> None:
    results = pytester.path / "oracle.json"
    run = pytester.runpytest_subprocess(
        *RUN_ARGS, "--plsql-dialect=oracle", "--plsql-model=reference", f"--plsql-results={results}"
    )
    run.assert_outcomes(passed=sum(t.n_tests for t in tasks["oracle"].values()))
    assert json.loads(results.read_text(encoding="utf-8"))["subsets"]["smoke"]["suite_pass"] == 1.0


# One deliberately wrong PL/pgSQL answer per task: it installs, runs, and gets something wrong
# that at least one test of the task checks. {task_id: {turn: answer}}.
WRONG_ANSWERS: dict[str, dict[int, str]] = {
    # Forgets the NULL rule: GREATEST/LEAST skip NULL arguments in PostgreSQL.
    "clamp_value": {1: """
CREATE FUNCTION clamp_value(p_value numeric, p_low numeric, p_high numeric) RETURNS numeric
LANGUAGE plpgsql AS $$ BEGIN RETURN LEAST(GREATEST(p_value, p_low), p_high); END $$;
"""},
    # Returns '' instead of NULL when there are no words (Oracle habit: '' is NULL there).
    "initials": {1: """
CREATE FUNCTION initials(p_name text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v_result text := ''; v_word text;
BEGIN
  FOREACH v_word IN ARRAY regexp_split_to_array(coalesce(p_name, ''), ' +') LOOP
    v_result := v_result || upper(left(v_word, 1));
  END LOOP;
  RETURN v_result;
END $$;
"""},
    # Wraps hours at 24.
    "format_duration": {1: """
CREATE FUNCTION format_duration(p_seconds integer) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  RETURN CASE WHEN p_seconds < 0 THEN '-' ELSE '' END || to_char(abs(p_seconds) / 3600 % 24, 'FM990') || ':'
      || to_char(abs(p_seconds) / 60 % 60, 'FM00') || ':' || to_char(abs(p_seconds) % 60, 'FM00');
END $$;
"""},
    # % keeps the dividend's sign: negative shifts leave the alphabet.
    "caesar_shift": {1: """
CREATE FUNCTION caesar_shift(p_text text, p_shift integer) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v_result text := ''; c text; b integer;
BEGIN
  FOR i IN 1 .. length(p_text) LOOP
    c := substr(p_text, i, 1);
    b := CASE WHEN c BETWEEN 'A' AND 'Z' THEN 65 WHEN c BETWEEN 'a' AND 'z' THEN 97 END;
    v_result := v_result || CASE WHEN b IS NULL THEN c ELSE chr(b + (ascii(c) - b + p_shift) % 26) END;
  END LOOP;
  RETURN v_result;
END $$;
"""},
    # Leap years by divisibility by 4 only (1900 and 2100 get 29 days).
    "days_in_month": {1: """
CREATE FUNCTION days_in_month(p_year integer, p_month integer) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
  IF p_month NOT BETWEEN 1 AND 12 THEN
    RAISE EXCEPTION 'invalid month: %', p_month USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF p_month = 2 THEN RETURN CASE WHEN p_year % 4 = 0 THEN 29 ELSE 28 END; END IF;
  RETURN CASE WHEN p_month IN (4, 6, 9, 11) THEN 30 ELSE 31 END;
END $$;
"""},
    # Trusts the cast: accepts '1.5', and 'abc' fails with PostgreSQL's own message.
    "parse_quantity": {1: """
CREATE FUNCTION parse_quantity(p_text text) RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE v numeric := trim(p_text)::numeric;
BEGIN
  IF v <= 0 THEN
    RAISE EXCEPTION 'quantity must be positive: %', v USING ERRCODE = 'numeric_value_out_of_range';
  END IF;
  RETURN v;
END $$;
"""},
    # Wrong date format.
    "customer_label": {1: """
CREATE FUNCTION customer_label(p_customer_id integer) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  SELECT * INTO r FROM shop.customers WHERE customer_id = p_customer_id;
  IF NOT FOUND THEN RETURN 'unknown customer ' || p_customer_id; END IF;
  RETURN r.name || ' (' || r.country || ', since ' || to_char(r.signup_date, 'DD.MM.YYYY') || ')';
END $$;
"""},
    # Takes the middle element without sorting.
    "median_of": {1: """
CREATE FUNCTION median_of(p_values numeric[]) RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE v numeric[] := array_remove(p_values, NULL); n integer := coalesce(cardinality(v), 0);
BEGIN
  IF n = 0 THEN RETURN NULL; END IF;
  IF n % 2 = 1 THEN RETURN v[(n + 1) / 2]; END IF;
  RETURN (v[n / 2] + v[n / 2 + 1]) / 2;
END $$;
"""},
    # NULL elements poison the running sum.
    "running_total": {1: """
CREATE FUNCTION running_total(p_values numeric[]) RETURNS numeric[] LANGUAGE plpgsql AS $$
DECLARE r numeric[] := '{}'; s numeric := 0; x numeric;
BEGIN
  IF p_values IS NULL THEN RETURN NULL; END IF;
  FOREACH x IN ARRAY p_values LOOP s := s + x; r := r || s; END LOOP;
  RETURN r;
END $$;
"""},
    # Most frequent value first instead of ascending values.
    "print_histogram": {1: """
CREATE PROCEDURE print_histogram(p_values numeric[]) LANGUAGE plpgsql AS $$
DECLARE r record; n integer := 0;
BEGIN
  FOR r IN SELECT x, count(*) AS c FROM unnest(p_values) x WHERE x IS NOT NULL
           GROUP BY x ORDER BY c DESC, x LOOP
    RAISE NOTICE '%: %', to_char(r.x, 'FM9999999990'), repeat('*', r.c::integer);
    n := n + 1;
  END LOOP;
  IF n = 0 THEN RAISE NOTICE 'no values'; END IF;
END $$;
"""},
    # Off by one: p_stop is never included.
    "number_series": {1: """
CREATE FUNCTION number_series(p_start numeric, p_stop numeric, p_step numeric) RETURNS SETOF numeric
LANGUAGE plpgsql AS $$
DECLARE v numeric := p_start;
BEGIN
  IF p_step = 0 THEN
    RAISE EXCEPTION 'step must not be zero' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  WHILE (p_step > 0 AND v < p_stop) OR (p_step < 0 AND v > p_stop) LOOP
    RETURN NEXT v; v := v + p_step;
  END LOOP;
END $$;
"""},
    # Breaks price ties the wrong way.
    "top_n_products": {1: """
CREATE FUNCTION top_n_products(p_n integer) RETURNS text[] LANGUAGE plpgsql AS $$
BEGIN
  IF p_n IS NULL THEN RETURN NULL; END IF;
  RETURN coalesce((SELECT array_agg(name ORDER BY unit_price DESC, name DESC) FROM
    (SELECT name, unit_price FROM shop.products ORDER BY unit_price DESC, name DESC
     LIMIT greatest(p_n, 0)) t), '{}');
END $$;
"""},
    # Boundary: 5 counts as LOW.
    "stock_status": {1: """
CREATE FUNCTION stock_status(p_product_id integer) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  RETURN (SELECT CASE WHEN stock = 0 THEN 'OUT' WHEN stock <= 5 THEN 'LOW' ELSE 'OK' END
          FROM shop.products WHERE product_id = p_product_id);
END $$;
"""},
    # Average printed unrounded.
    "print_category_summary": {1: """
CREATE PROCEDURE print_category_summary(p_category text DEFAULT NULL) LANGUAGE plpgsql AS $$
DECLARE r record; n integer := 0;
BEGIN
  FOR r IN SELECT category, count(*) AS c, sum(stock) AS s, avg(unit_price) AS a FROM shop.products
           WHERE p_category IS NULL OR upper(category) = upper(p_category)
           GROUP BY category ORDER BY category LOOP
    RAISE NOTICE '%: % products, % in stock, avg price %', r.category, r.c, r.s, r.a;
    n := n + 1;
  END LOOP;
  IF n = 0 AND p_category IS NOT NULL THEN RAISE NOTICE 'no products in category %', p_category; END IF;
END $$;
"""},
    # Excludes the last day of the range.
    "print_orders_between": {1: """
CREATE PROCEDURE print_orders_between(p_from date, p_to date) LANGUAGE plpgsql AS $$
DECLARE r record; n integer := 0;
BEGIN
  IF p_from IS NULL OR p_to IS NULL THEN RETURN; END IF;
  IF p_from > p_to THEN
    RAISE EXCEPTION 'invalid range: % > %', to_char(p_from, 'YYYY-MM-DD'), to_char(p_to, 'YYYY-MM-DD')
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOR r IN SELECT o.order_date, o.order_id, c.name, o.status FROM shop.orders o
           JOIN shop.customers c USING (customer_id)
           WHERE o.order_date >= p_from AND o.order_date < p_to ORDER BY 1, 2 LOOP
    RAISE NOTICE '% % % %', to_char(r.order_date, 'YYYY-MM-DD'), r.order_id, r.name, r.status;
    n := n + 1;
  END LOOP;
  IF n = 0 THEN
    RAISE NOTICE 'no orders between % and %', to_char(p_from, 'YYYY-MM-DD'), to_char(p_to, 'YYYY-MM-DD');
  END IF;
END $$;
"""},
    # Oldest first.
    "customer_orders": {1: """
CREATE FUNCTION customer_orders(p_customer_id integer) RETURNS refcursor LANGUAGE plpgsql AS $$
DECLARE c refcursor;
BEGIN
  OPEN c FOR SELECT o.order_id, o.order_date, o.status,
                    (SELECT coalesce(sum(quantity), 0) FROM shop.order_items i WHERE i.order_id = o.order_id)
             FROM shop.orders o WHERE o.customer_id = p_customer_id ORDER BY o.order_date, o.order_id;
  RETURN c;
END $$;
"""},
    # Concatenates the argument into the statement: injectable, and PostgreSQL's own error.
    "count_rows": {1: """
CREATE FUNCTION count_rows(p_table_name text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  EXECUTE 'SELECT count(*) FROM shop.' || p_table_name INTO n;
  RETURN n;
END $$;
"""},
    # Counts cancelled orders in the customer totals.
    "shop_stats_package": {1: """
CREATE FUNCTION shop_stats_order_total(p_order_id integer) RETURNS numeric LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM shop.orders WHERE order_id = p_order_id) THEN
    RAISE EXCEPTION 'order % not found', p_order_id USING ERRCODE = 'no_data_found';
  END IF;
  RETURN (SELECT coalesce(sum(i.quantity * p.unit_price), 0) FROM shop.order_items i
          JOIN shop.products p USING (product_id) WHERE i.order_id = p_order_id);
END $$;
CREATE FUNCTION shop_stats_customer_total(p_customer_id integer) RETURNS numeric LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM shop.customers WHERE customer_id = p_customer_id) THEN
    RAISE EXCEPTION 'customer % not found', p_customer_id USING ERRCODE = 'no_data_found';
  END IF;
  RETURN (SELECT coalesce(sum(shop_stats_order_total(order_id)), 0) FROM shop.orders
          WHERE customer_id = p_customer_id);
END $$;
CREATE FUNCTION shop_stats_best_customer() RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
  RETURN (SELECT customer_id FROM shop.customers
          ORDER BY shop_stats_customer_total(customer_id) DESC, customer_id LIMIT 1);
END $$;
CREATE PROCEDURE shop_stats_print_leaderboard(p_top integer) LANGUAGE plpgsql AS $$
DECLARE r record; k integer := 0;
BEGIN
  FOR r IN SELECT name, shop_stats_customer_total(customer_id) AS t FROM shop.customers
           WHERE shop_stats_customer_total(customer_id) > 0
           ORDER BY t DESC, customer_id LIMIT greatest(p_top, 0) LOOP
    k := k + 1;
    RAISE NOTICE '%. %: %', k, r.name, to_char(r.t, 'FM9999999990.00');
  END LOOP;
END $$;
"""},
    # Counts cancelled orders too.
    "country_order_counts": {1: """
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT c.country, count(DISTINCT c.customer_id) AS n, count(o.order_id) AS m
           FROM shop.customers c LEFT JOIN shop.orders o USING (customer_id) GROUP BY c.country LOOP
    RAISE NOTICE '%,%,%', r.country, r.n, r.m;
  END LOOP;
END $$;
"""},
    # Revenue of cancelled orders included.
    "monthly_revenue": {1: """
DO $$
DECLARE r record; t numeric := 0;
BEGIN
  FOR r IN SELECT to_char(o.order_date, 'YYYY-MM') AS m, sum(i.quantity * p.unit_price) AS v
           FROM shop.orders o JOIN shop.order_items i USING (order_id) JOIN shop.products p USING (product_id)
           GROUP BY 1 ORDER BY 1 LOOP
    RAISE NOTICE '% %', r.m, to_char(r.v, 'FM9999999990.00');
    t := t + r.v;
  END LOOP;
  RAISE NOTICE 'total %', to_char(t, 'FM9999999990.00');
END $$;
"""},
    # Turn 1 lists the orders newest first; turns 2 and 3 are left unanswered (not generated).
    "customer_report_conversation": {1: """
CREATE PROCEDURE report_customer(p_customer_id integer) LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR r IN SELECT order_id, status FROM shop.orders WHERE customer_id = p_customer_id
           ORDER BY order_id DESC LOOP
    RAISE NOTICE '% %', r.order_id, r.status;
  END LOOP;
END $$;
"""},
}


def test_every_task_has_a_wrong_answer(tasks: dict[str, dict[str, Task]]) -> None:
    assert sorted(WRONG_ANSWERS) == sorted(tasks["postgres"]), "one wrong answer per smoke task"


def test_wrong_answers_fail_every_task(pytester: pytest.Pytester, tasks: dict[str, dict[str, Task]]) -> None:
    answers = pytester.path / "wrong.jsonl"
    answers.write_text(
        "".join(
            json.dumps({"task_id": task_id, "turn": turn, "answer": code}) + "\n"
            for task_id, turns in WRONG_ANSWERS.items()
            for turn, code in turns.items()
        ),
        encoding="utf-8",
    )
    results = pytester.path / "wrong.json"
    run = pytester.runpytest_subprocess(
        *RUN_ARGS, POSTGRES, f"--plsql-answers={answers}", f"--plsql-results={results}"
    )
    assert run.ret == 1, run.stdout.str()
    doc = json.loads(results.read_text(encoding="utf-8"))
    by_task = {t["task_id"]: t["tests"] for t in doc["tasks"]}
    assert sorted(by_task) == sorted(tasks["postgres"])
    problems = []
    for task_id, tests in sorted(by_task.items()):
        classes = {t["failure_class"] for t in tests}
        if "wrong_output" not in classes:
            problems.append(f"{task_id}: no test failed with wrong_output ({sorted(classes)})")
        # A wrong answer must install: anything but wrong output means it did not.
        stray = classes - {"passed", "wrong_output", "not_generated"}
        if stray:
            problems.append(f"{task_id}: unexpected failure classes {sorted(stray)}")
    assert not problems, "\n".join(problems)

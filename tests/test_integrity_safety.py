"""Safety pre-check false positives on correct answers (issue 10, item 8), and that the fixes do
not open the doors they sit next to."""

from __future__ import annotations

import pytest

from pytest_plsqlbench.safety import findings
from pytest_plsqlbench.tasks import Task, Turn, UnitTest


def task() -> Task:
    return Task(id="t", subset="s", dialect="postgres", turns=(Turn(1, "p", (UnitTest("x", "assert", "x"),)),),
                entry_points=("report",))


@pytest.mark.parametrize(
    "answer",
    [
        # SELECT ... INTO TEMP t creates t; dropping it is the answer's own business.
        "CREATE FUNCTION report() RETURNS int LANGUAGE plpgsql AS $$ DECLARE n int; BEGIN "
        "SELECT * INTO TEMP t FROM shop.orders; SELECT count(*) INTO n FROM t; DROP TABLE t; RETURN n; END $$;",
        "SELECT 1 AS x INTO TEMPORARY TABLE scratch;\nDROP TABLE scratch;\n"
        "CREATE FUNCTION report() RETURNS int LANGUAGE sql AS 'SELECT 1';",
        # A temp table named at run time, dropped through format(%I).
        "CREATE FUNCTION report(v text) RETURNS int LANGUAGE plpgsql AS $$ BEGIN "
        "EXECUTE format('CREATE TEMP TABLE %I (x int)', v); EXECUTE format('DROP TABLE %I', v); RETURN 1; END $$;",
        # 'Grant' is a value, not a statement.
        "CREATE FUNCTION report() RETURNS text LANGUAGE plpgsql AS $$ DECLARE r text; BEGIN "
        "EXECUTE format('SELECT %L || %L', 'Grant', 'Revoke') INTO r; RETURN format('%s', 'Grant'); END $$;",
    ],
    ids=["select_into_temp_plpgsql", "select_into_temporary_table", "format_drop_of_own_temp", "grant_as_a_value"],
)
def test_correct_answers_pass_the_check(answer: str) -> None:
    assert findings(task(), answer) == []


@pytest.mark.parametrize(
    ("answer", "rule"),
    [
        # Without a temp table of its own, a run-time DROP is still flagged.
        ("CREATE FUNCTION report(v text) RETURNS int LANGUAGE plpgsql AS $$ BEGIN "
         "EXECUTE format('DROP TABLE %I', v); RETURN 1; END $$;", "drop"),
        # A temp table does not excuse dropping a named fixture table.
        ("CREATE TEMP TABLE t(x int);\nDROP TABLE shop.orders;", "drop"),
        # A real GRANT in dynamic SQL is still a GRANT.
        ("DO $$ BEGIN EXECUTE format('GRANT SELECT ON %I TO public', 't'); END $$;", "privileges"),
        ("DO $$ BEGIN EXECUTE 'REVOKE ALL ON shop.orders FROM public'; END $$;", "privileges"),
    ],
)
def test_the_fixes_do_not_open_neighbouring_doors(answer: str, rule: str) -> None:
    assert rule in {f.rule for f in findings(task(), answer)}

"""The splitter and the safety check read an answer exactly as the server runs it (issue 10, item 4).

PostgreSQL: PostgreSQL's own scanner (pglast) with ``standard_conforming_strings`` on, and each
statement sent with the extended protocol, so a string holding two statements is refused by
the server instead of running unseen. Oracle: q-quotes and backslashes (never an escape in
Oracle) read as SQL*Plus reads them (unit-tested: Oracle cannot run here).
"""

from __future__ import annotations

import pytest

from pytest_plsqlbench.safety import findings
from pytest_plsqlbench.scripts import split
from pytest_plsqlbench.tasks import Task, Turn, UnitTest


def texts(script: str, dialect: str = "postgres") -> list[str]:
    return [s.text for s in split(script, dialect)]


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        # standard_conforming_strings: a backslash is an ordinary character in '...'.
        ("SELECT '\\' AS a; SELECT 2", ["SELECT '\\' AS a", "SELECT 2"]),
        # E'' strings do escape it.
        ("SELECT E'\\'; SELECT 1' AS a; SELECT 2", ["SELECT E'\\'; SELECT 1' AS a", "SELECT 2"]),
        # U&'' strings: a backslash starts a Unicode escape, not a quote escape.
        ("SELECT U&'d\\0061t\\' ; SELECT 2", ["SELECT U&'d\\0061t\\'", "SELECT 2"]),
        # Nested block comments.
        ("SELECT 1 /* a /* b; */ still; */ ; SELECT 2", ["SELECT 1 /* a /* b; */ still; */", "SELECT 2"]),
        # Dollar quotes with and without a tag, a $ inside identifiers.
        ("SELECT $t$ ; $$ ; $t$, a$b FROM x$y; SELECT $$;$$", ["SELECT $t$ ; $$ ; $t$, a$b FROM x$y", "SELECT $$;$$"]),
        # Quoted identifiers hold ; and '.
        ('SELECT 1 AS "a;\'b"; SELECT 2', ['SELECT 1 AS "a;\'b"', "SELECT 2"]),
        # An unterminated string runs to the end: one statement, which the server refuses.
        ("SELECT 1; SELECT 'abc; SELECT 2", ["SELECT 1", "SELECT 'abc; SELECT 2"]),
    ],
)
def test_postgres_splitting_agrees_with_the_server(script: str, expected: list[str]) -> None:
    assert texts(script) == expected


def test_psql_meta_command_with_a_quote_is_one_client_line() -> None:
    stmts = split("\\echo it's done\nSELECT 1;\n", "postgres")
    assert [(s.kind, s.text) for s in stmts] == [("client", "\\echo it's done"), ("sql", "SELECT 1")]


def test_issue_splitter_escape_is_seen_by_the_safety_check() -> None:
    """The issue's example: sqlparse saw one statement, the server six."""
    answer = ("CREATE TABLE answers.x AS SELECT '\\' AS a; ALTER ROLE CURRENT_USER SET statement_timeout = 0; "
              "COMMIT; BEGIN; SAVEPOINT plsql_install; SELECT '\\' AS b -- ';")
    assert len(split(answer, "postgres")) == 6
    task = Task(id="t", subset="s", dialect="postgres", turns=(Turn(1, "p", (UnitTest("x", "assert", "x"),)),))
    assert "privileges" in {f.rule for f in findings(task, answer)}


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        # Oracle: a backslash is an ordinary character; sqlparse alone would read \' as an escape.
        ("SELECT '\\' FROM dual;\nSELECT 2 FROM dual;", ["SELECT '\\' FROM dual", "SELECT 2 FROM dual"]),
        # q-quotes with brackets and any delimiter, holding quotes, ; and /.
        ("SELECT q'[it's; /]' FROM dual;\nSELECT 2 FROM dual;", ["SELECT q'[it's; /]' FROM dual", "SELECT 2 FROM dual"]),
        ("SELECT nq'!a'b;!' FROM dual;\nSELECT q'{x}' FROM dual;", ["SELECT nq'!a'b;!' FROM dual", "SELECT q'{x}' FROM dual"]),
        ("BEGIN\n  x := q'<a ; '\n/ >';\nEND;\n/\nSELECT 1 FROM dual;",
         ["BEGIN\n  x := q'<a ; '\n/ >';\nEND;", "SELECT 1 FROM dual"]),
    ],
)
def test_oracle_splitting_reads_q_quotes_and_backslashes_as_sqlplus(script: str, expected: list[str]) -> None:
    assert texts(script, "oracle") == expected


def test_oracle_q_quote_hiding_a_grant_is_read_by_the_safety_check() -> None:
    task = Task(id="t", subset="s", dialect="oracle", turns=(Turn(1, "p", (UnitTest("x", "assert", "x"),)),))
    answer = "SELECT '\\' FROM dual;\nGRANT DBA TO scott;\nSELECT '\\' FROM dual;"
    assert "privileges" in {f.rule for f in findings(task, answer)}


# --------------------------------------------------------------------------- against the server
ESCAPE = ("CREATE TABLE answers.x AS SELECT '\\' AS a; "
          "CREATE FUNCTION yes(boolean, numeric) RETURNS boolean LANGUAGE sql AS 'SELECT true'; "
          "CREATE AGGREGATE answers.leftover(numeric) (sfunc = yes, stype = boolean); "
          "ALTER ROLE CURRENT_USER SET default_transaction_read_only = on; "
          "ALTER ROLE CURRENT_USER SET statement_timeout = 0; COMMIT; BEGIN; SAVEPOINT plsql_install; "
          "SELECT '\\' AS b -- ';\n"
          "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1';")


def test_the_issue_escape_commits_nothing(tmp_path) -> None:  # noqa: ANN001
    """Run with the safety check off: the database, not the filter, contains it. Nothing the
    answer did survives its task: no object, no role default, the limits intact."""
    from pytest_plsqlbench.dialects.postgres import PostgresBackend
    from pytest_plsqlbench.runner import evaluate_task
    from pytest_plsqlbench.settings import Settings

    b = PostgresBackend(Settings.of(subsets=(), timeout=2.0), worker="integrity-lexer")
    b.start()
    try:
        before = b._current_role_settings()
        t = Task(id="esc", subset="s", dialect="postgres", entry_points=("f",),
                 turns=(Turn(1, "p", (UnitTest("x", "output", "SELECT f();", ("1",)),)),))
        evaluate_task(b, t, [ESCAPE])
        assert b._current_role_settings() == before
        assert b.scratch_objects() == []
        canary = Task(id="c", subset="s", dialect="postgres", turns=(Turn(1, "p", (UnitTest(
            "x", "output", "SELECT current_setting('statement_timeout'), current_setting('transaction_read_only'), "
            "(SELECT count(*) FROM pg_proc WHERE proname = 'leftover');", ("2s,off,0",)),)),))
        report = evaluate_task(b, canary, ["SELECT 1;"])
        assert report.passed, [(o.message, o.actual) for o in report.outcomes]
    finally:
        b.stop()

"""The SQL*Plus script splitter over every script of the PLSQLBench sample, and its rules.

Each sample check states an expectation that is derived independently of the splitter
(slash lines, EXEC lines, the statement's first word in the original text), so a splitter
that silently merges, drops or mangles statements fails here with the script named.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_plsqlbench.scripts import Statement, serveroutput, split

SLASH_LINE = re.compile(r"^\s*/\s*$")
EXEC_LINE = re.compile(r"^\s*EXEC(UTE)?\s", re.I)
LEADING_WORDS = (
    "CREATE",
    "DECLARE",
    "BEGIN",
    "SELECT",
    "WITH",
    "EXEC",
    "EXECUTE",
    "SET",
    "INSERT",
    "UPDATE",
    "DELETE",
    "ALTER",
    "DROP",
    "CALL",
    "MERGE",
    "COMMIT",
    "ROLLBACK",
)


def sample_scripts(root: Path) -> Iterator[tuple[str, str]]:
    """(label, script) for every reference answer and test script of the sample."""
    datasets = root / "datasets"
    for rel in ("spider2_st/spider2_st.jsonl", "spider2_mt/spider2_mt.jsonl", "spider/spider1.jsonl"):
        path = datasets / rel
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            row = json.loads(line)
            yield f"{rel}:{lineno} {row['instance_id']} reference", row["reference_answer"]
            for n, test in enumerate(row.get("tests") or (), 1):
                yield f"{rel}:{lineno} {row['instance_id']} test {n}", test


@pytest.fixture(scope="module")
def scripts(plsqlbench_sample: Path) -> list[tuple[str, str]]:
    found = list(sample_scripts(plsqlbench_sample))
    assert found, f"no scripts found under {plsqlbench_sample}"
    return found


def code_lines(script: str) -> list[tuple[int, str]]:
    """Lines that carry code: not blank, not a ``--`` comment, not a lone slash."""
    out = []
    for n, line in enumerate(script.replace("\r\n", "\n").split("\n"), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("--") and not SLASH_LINE.match(line):
            out.append((n, stripped))
    return out


def expected_units(script: str) -> int:
    """PL/SQL units as SQL*Plus counts them: one per slash line, plus an unterminated last one."""
    lines = script.replace("\r\n", "\n").split("\n")
    slashes = [i for i, line in enumerate(lines) if SLASH_LINE.match(line)]
    tail = lines[slashes[-1] + 1 :] if slashes else lines
    pending = any(line.strip() and not line.strip().startswith("--") for line in tail)
    starts_plsql = any(re.match(r"^\s*(CREATE|DECLARE|BEGIN)\b", line, re.I) for line in tail)
    return len(slashes) + (1 if pending and starts_plsql else 0)


def check_script(label: str, script: str) -> list[str]:
    problems: list[str] = []
    statements = split(script, "oracle")
    lines = script.replace("\r\n", "\n").split("\n")
    if not any(s.kind != "client" for s in statements):
        problems.append("no executable statement")
    for stmt in statements:
        where = f"{label} line {stmt.line}"
        first_line = lines[stmt.line - 1].strip() if 0 < stmt.line <= len(lines) else ""
        if stmt.kind == "client":
            if stmt.command != "SET" or serveroutput(stmt) is None:
                problems.append(f"{where}: unexpected client command {stmt.text!r}")
            continue
        if any(SLASH_LINE.match(x) for x in stmt.text.split("\n")):
            problems.append(f"{where}: a '/' terminator leaked into the statement")
        if stmt.kind == "sql" and stmt.text.rstrip().endswith(";"):
            problems.append(f"{where}: SQL statement keeps its ';' (ORA-00933/00911 in Oracle)")
        if stmt.kind == "plsql" and not stmt.text.rstrip().endswith(";"):
            problems.append(f"{where}: PL/SQL unit does not end with ';': ...{stmt.text[-30:]!r}")
        if EXEC_LINE.match(first_line):
            if not re.fullmatch(r"BEGIN .+; END;", stmt.text, re.S) or stmt.kind != "plsql":
                problems.append(f"{where}: EXEC not converted to an anonymous block: {stmt.text!r}")
        elif not first_line.upper().startswith(stmt.first_word):
            problems.append(f"{where}: statement {stmt.first_word!r} does not start on its reported line")
        if stmt.first_word not in LEADING_WORDS:
            problems.append(f"{where}: statement starts with unexpected word {stmt.first_word!r}")
    # Nothing lost: every code line of the script is inside some statement, in order.
    pos, text = 0, script.replace("\r\n", "\n")
    for stmt in statements:
        if stmt.text.startswith("BEGIN ") and EXEC_LINE.match(lines[stmt.line - 1]):
            found = text.find(lines[stmt.line - 1].strip(), pos)
            length = len(lines[stmt.line - 1].strip())
        else:
            found, length = text.find(stmt.text, pos), len(stmt.text)
        if found < 0:
            problems.append(f"{label}: statement at line {stmt.line} is not a verbatim part of the script")
            continue
        pos = found + length
    covered = "\n".join(s.text for s in statements)
    for n, line in code_lines(script):
        body = line.rstrip(";").strip()
        if EXEC_LINE.match(line):
            body = re.sub(EXEC_LINE, "", line).rstrip(";").strip()
        if body and body not in covered:
            problems.append(f"{label} line {n}: code not in any statement: {line!r}")
    units = sum(1 for s in statements if s.kind == "plsql" and not EXEC_LINE.match(lines[s.line - 1]))
    if units != expected_units(script):
        problems.append(f"{label}: {units} PL/SQL unit(s), SQL*Plus would run {expected_units(script)}")
    return problems


def test_every_sample_script_splits_like_sqlplus(scripts: list[tuple[str, str]]) -> None:
    problems = [p for label, script in scripts for p in check_script(label, script)]
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:40])


def test_sample_covers_every_statement_shape(scripts: list[tuple[str, str]]) -> None:
    """The sample exercises what the parser must handle; if the data changes, say so."""
    shapes = {"exec": 0, "select": 0, "block": 0, "create": 0, "serveroutput": 0, "no_final_slash": 0}
    for _, script in scripts:
        for stmt in split(script, "oracle"):
            if serveroutput(stmt):
                shapes["serveroutput"] += 1
            elif stmt.kind == "sql" and stmt.first_word == "SELECT":
                shapes["select"] += 1
            elif stmt.text.startswith("BEGIN ") and stmt.text.endswith("; END;") and "\n" not in stmt.text:
                shapes["exec"] += 1
            elif stmt.first_word == "CREATE":
                shapes["create"] += 1
            elif stmt.kind == "plsql":
                shapes["block"] += 1
        if expected_units(script) and not SLASH_LINE.match(script.rstrip().split("\n")[-1]):
            shapes["no_final_slash"] += 1
    assert all(shapes.values()), shapes


def test_sample_script_counts(scripts: list[tuple[str, str]]) -> None:
    """The sample's size (README: 15 ST tasks, 12 MT turns, 22 Spider tasks)."""
    refs = [label for label, _ in scripts if label.endswith("reference")]
    assert len(refs) == 15 + 12 + 22
    assert len(scripts) - len(refs) == 102


# --------------------------------------------------------------------------- rules on small inputs
def kinds(script: str, dialect: str = "oracle") -> list[tuple[str, str]]:
    return [(s.kind, s.text) for s in split(script, dialect)]


def test_blocks_end_at_slash_and_sql_at_semicolon() -> None:
    script = "SET SERVEROUTPUT ON;\nBEGIN\n  x := 1;\nEND;\n/\nSELECT 1 FROM dual;\nSELECT 2 FROM dual\n/\n"
    assert kinds(script) == [
        ("client", "SET SERVEROUTPUT ON;"),
        ("plsql", "BEGIN\n  x := 1;\nEND;"),
        ("sql", "SELECT 1 FROM dual"),
        ("sql", "SELECT 2 FROM dual"),
    ]


def test_slash_with_surrounding_blanks_and_missing_final_slash() -> None:
    assert kinds("DECLARE n NUMBER;\nBEGIN NULL; END;\n /  \n") == [
        ("plsql", "DECLARE n NUMBER;\nBEGIN NULL; END;")
    ]
    assert kinds("BEGIN NULL; END;") == [("plsql", "BEGIN NULL; END;")]


def test_exec_becomes_an_anonymous_block() -> None:
    assert kinds("EXEC p(1, 'a;b');\nexecute q;\n") == [
        ("plsql", "BEGIN p(1, 'a;b'); END;"),
        ("plsql", "BEGIN q; END;"),
    ]


def test_package_spec_and_body_are_two_units() -> None:
    script = "CREATE OR REPLACE PACKAGE p IS\n  PROCEDURE a;\nEND p;\n/\nCREATE OR REPLACE PACKAGE BODY p IS\n  PROCEDURE a IS BEGIN NULL; END;\nEND p;\n/\n"
    got = split(script, "oracle")
    assert [s.kind for s in got] == ["plsql", "plsql"]
    assert got[1].text.startswith("CREATE OR REPLACE PACKAGE BODY") and got[1].line == 5


def test_create_table_and_view_are_sql_but_type_is_plsql() -> None:
    got = split(
        "CREATE TABLE t (a NUMBER);\nCREATE OR REPLACE VIEW v AS SELECT 1 a FROM dual;\n"
        "CREATE OR REPLACE TYPE num_list AS TABLE OF NUMBER;\n/\n",
        "oracle",
    )
    assert [(s.kind, s.first_word) for s in got] == [
        ("sql", "CREATE"),
        ("sql", "CREATE"),
        ("plsql", "CREATE"),
    ]


def test_semicolons_and_slashes_inside_strings_comments_and_q_quotes() -> None:
    script = (
        "BEGIN\n  DBMS_OUTPUT.PUT_LINE('a; b');\n  -- a comment; with /\n"
        "  DBMS_OUTPUT.PUT_LINE(q'[it's; \n/]');\nEND;\n/\nSELECT 'x;y', q'<o'k>' FROM dual;\n"
    )
    got = split(script, "oracle")
    assert [s.kind for s in got] == ["plsql", "sql"]
    assert "q'[it's; \n/]'" in got[0].text
    assert got[1].text == "SELECT 'x;y', q'<o'k>' FROM dual" and got[1].line == 8


def test_division_inside_a_line_is_not_a_terminator() -> None:
    assert kinds("BEGIN x := 4 / 2; END;\n/\n") == [("plsql", "BEGIN x := 4 / 2; END;")]


def test_with_function_is_one_unit() -> None:
    script = "WITH FUNCTION f RETURN NUMBER IS BEGIN RETURN 1; END;\nSELECT f FROM dual\n/\n"
    assert kinds(script) == [
        ("plsql", "WITH FUNCTION f RETURN NUMBER IS BEGIN RETURN 1; END;\nSELECT f FROM dual")
    ]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("SET SERVEROUTPUT ON", True),
        ("set serveroutput on size unlimited;", True),
        ("SET SERVEROUT OFF", False),
        ("SET FEEDBACK OFF", None),
        ("SET LINESIZE 200", None),
    ],
)
def test_serveroutput_setting(text: str, want: bool | None) -> None:
    (stmt,) = split(text, "oracle")
    assert stmt.kind == "client" and serveroutput(stmt) is want


def test_sql_set_words_are_not_client_commands() -> None:
    assert kinds("SET TRANSACTION READ ONLY;\n") == [("sql", "SET TRANSACTION READ ONLY")]


def test_client_commands_and_stray_slashes() -> None:
    got = split("PROMPT hello;\nSHOW ERRORS\n/\nREM note\nSELECT 1 FROM dual;\n/\n", "oracle")
    assert [(s.kind, s.command) for s in got] == [
        ("client", "PROMPT"),
        ("client", "SHOW"),
        ("client", "REM"),
        ("sql", None),
    ]


def test_postgres_rules_unchanged() -> None:
    """psql-like splitting: ``;`` ends statements, dollar bodies are whole, a '/' line ends one too."""
    script = "CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN 1; END $$;\n\\set x 1\nDO $$ BEGIN RAISE NOTICE 'a;b'; END $$\n/\nSELECT 1;"
    got = split(script, "postgres")
    assert [(s.kind, s.first_word) for s in got] == [
        ("sql", "CREATE"),
        ("client", "\\SET"),
        ("sql", "DO"),
        ("sql", "SELECT"),
    ]
    assert got[0].text.endswith("END $$;") or got[0].text.endswith("END $$")


def test_statement_is_frozen_and_carries_line() -> None:
    stmt = Statement("SELECT 1", "sql", 3)
    with pytest.raises(AttributeError):
        stmt.text = "x"  # type: ignore[misc]
    assert stmt.first_word == "SELECT"
    # split() gives each statement the 1-based line it starts on, past blank lines, comments and
    # multi-line PL/SQL blocks, so an error message can point at the right line of the script.
    script = (
        "-- header\n"
        "\n"
        "CREATE OR REPLACE FUNCTION f RETURN NUMBER IS\n"
        "BEGIN\n"
        "  RETURN 1;\n"
        "END;\n"
        "/\n"
        "SET SERVEROUTPUT ON\n"
        "select  f()\n"
        "  from dual;\n"
    )
    got = split(script, "oracle")
    assert [(s.kind, s.first_word, s.line) for s in got] == [
        ("plsql", "CREATE", 3),
        ("client", "SET", 8),
        ("sql", "SELECT", 9),
    ]
    assert got[1].command == "SET"


# --------------------------------------------------------------------------- the fast tokenizer
def test_fast_tokenizer_splits_exactly_like_sqlparse(
    scripts: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch, plsqlbench_sample: Path
) -> None:
    """Megabyte fixture scripts use a regex tokenizer; it must split as sqlparse does."""
    import pytest_plsqlbench.scripts as sc
    from pytest_plsqlbench.spider.schema import Catalog

    repo = Path(__file__).resolve().parent.parent
    corpus = [(label, text, "oracle") for label, text in scripts]
    corpus += [(f"fixture {p}", p.read_text(), p.stem) for p in (repo / "fixtures").glob("*/*.sql")]
    catalog = Catalog.spider(plsqlbench_sample)
    for owner in ("CRE_THEME_PARK", "CRE_DOC_AND_COLLECTIONS"):
        corpus.append((f"spider {owner} oracle", catalog.oracle_fixture(owner).script, "oracle"))
        corpus.append((f"spider {owner} postgres", catalog.postgres_fixture(owner).fixture.script, "postgres"))
    corpus += [
        ("q-quotes", "BEGIN x := q'[a;\n/]' || nq'{b'}'; END;\n/\nSELECT 'q''x' FROM dual;\n", "oracle"),
        ("dollars", "DO $body$ BEGIN RAISE NOTICE 'a;b'; END $body$;\nSELECT $$x;y$$;\n\\echo hi\nSELECT 1;", "postgres"),
        ("comments", "-- a; b\n/* c; \n/ */ SELECT 1 FROM dual; -- tail\nEXEC p; -- x\n", "oracle"),
        ("unterminated", "SELECT 'abc FROM dual;\nSELECT 2 FROM dual;", "oracle"),
    ]
    for label, text, dialect in corpus:
        slow = split(text, dialect)
        monkeypatch.setattr(sc, "FAST_TOKENIZER_FROM", 0)
        fast = split(text, dialect)
        monkeypatch.setattr(sc, "FAST_TOKENIZER_FROM", 200_000)
        assert fast == slow, label


def test_large_fixture_scripts_skip_the_sqlparse_lexer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Megabyte data scripts never reach sqlparse's lexer (about 200 KB a second); the speed
    itself is measured in benchmarks/script_split.py."""
    import pytest_plsqlbench.scripts as sc

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("sqlparse lexer used on a large script")

    monkeypatch.setattr(sc.lexer, "tokenize", refuse)
    row = "(1, 'text; with a semicolon', 'a, b', NULL, -3.14)"
    stmt = 'INSERT INTO OWNER_X.T ("A", "B", "C", "D", "E") VALUES ' + ", ".join([row] * 500) + ";\n"
    script = 'CREATE TABLE OWNER_X.T ("A" NUMBER);\n' + stmt * 100  # 3 MB
    statements = split(script, "oracle")
    assert len(statements) == 101 and statements[-1].text.endswith("-3.14)")

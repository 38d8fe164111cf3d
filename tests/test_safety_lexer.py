"""The safety check's one-pass PostgreSQL lexer reads every text token for token like the general
path it shortcuts (issue 12: the pre-check of a megabyte reference answer)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from pytest_plsqlbench import safety
from pytest_plsqlbench.tasks import Task, Turn, UnitTest

ROOT = Path(__file__).resolve().parent.parent

#: Pieces of PostgreSQL text whose tokens the two paths must agree on, alone and glued together.
FRAGMENTS = [
    "CREATE OR REPLACE FUNCTION f(p1 integer) RETURNS integer LANGUAGE plpgsql AS $f$ BEGIN RETURN p1; END $f$;",
    "DO $$ BEGIN EXECUTE 'DROP TABLE ' || 'x'; END $$;", "$tag$ nested $$ body $tag$", "$$", "$1", "$2::int",
    "'it''s'", "E'a\\'b'", "U&'d\\0061t'", "B'1010'", "X'1F'", "q'[quoted]'", "nq'(n)'", "Q", "q", "nq",
    '"Quoted Name"', 'U&"d\\0061t"', '""', '"a""b"', "\\set x 1", "\\\\", "\\copy t to 'f'", "\\", "\\gexec",
    "-- comment\n", "/* block /* nested */ */", "\n", "\n\n  ", "\t", "1.5e3", "42", ".5", "::", "=>", "<>", ":=",
    "..", ";", "/", "(", ")", ",", "SELECT", "select", "drop", "table", "ALTER", "grant", "copy", "PROGRAM",
    "IS NOT DISTINCT FROM", "ARRAY['a', 'b']::text[]", "ROW(1, 'x')::rec", "pg_catalog.pg_read_file('/etc/passwd')",
    # Tokens that span lines, or go on on the next one: what a piece of the text may not cut.
    "'first'\n'continued'", "E'a'\n  'b'", "'open\nstring'", "/* open\ncomment */", "$$\nbody\n$$",
    '"name\nwith newline"', "U&'x'\nUESCAPE '!'", "B'1'\n'0'", "X'F'\n'0'", "-- to the end\nSELECT",
]


def corpus() -> list[str]:
    texts: list[str] = []
    for path in sorted((ROOT / "tasks").rglob("*.yaml")):
        def walk(node: object) -> None:
            if isinstance(node, str) and len(node) > 10:
                texts.append(node)
            elif isinstance(node, dict):
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)
        walk(yaml.safe_load(path.read_text()))
    rng = random.Random(12)
    for _ in range(3000):
        pieces = rng.choices(FRAGMENTS, k=rng.randint(1, 8))
        texts.append(rng.choice(["", " ", "\n"]).join(pieces))
    return texts


@pytest.mark.parametrize("chunk", [safety.SCAN_CHUNK, 1, 9])
def test_the_one_pass_lexer_reads_every_text_as_the_general_path_does(monkeypatch: pytest.MonkeyPatch,
                                                                        chunk: int) -> None:
    # Tiny pieces put a piece boundary at nearly every newline of every text.
    monkeypatch.setattr(safety, "SCAN_CHUNK", chunk)
    compared = fallbacks = 0
    for text in corpus():
        for line0 in (1, 7):
            fast = safety._lex_pg(text, line0)
            if fast is None:
                fallbacks += 1  # the scanner stopped: the general path reads it (as before)
                continue
            assert fast == safety._lex_tokens(text, "postgres", line0), text
            compared += 1
    assert compared > 5000 and fallbacks > 0, (compared, fallbacks)


@pytest.mark.parametrize("text", ["\\set x 1", "SELECT 1; \\gexec", "q'[x]'", "E'a''b'", "$f$ DROP TABLE t $f$"])
def test_psql_words_and_quotes_keep_their_reading(text: str) -> None:
    fast = safety._lex_pg(text, 1)
    assert fast is not None and fast == safety._lex_tokens(text, "postgres", 1)


# --------------------------------------------------------------------------- texts not lexed at all
#: One statement per thing a rule looks for, as an answer would hide it: lower case, in a body, in
#: the dynamic SQL of a body.
WATCHED_STATEMENTS = [
    "drop table shop.orders", "create role r", "alter table shop.orders add x int", "truncate shop.orders",
    "insert into shop.orders values (1)", "delete from shop.orders", "update shop.orders set x = 1",
    "merge into shop.orders o using shop.customers c on (o.id = c.id) when matched then delete",
    "grant all on shop.orders to public", "revoke all on shop.orders from public", "set role postgres",
    "set statement_timeout = 0", "copy shop.orders to program 'x'", "load 'lib'",
    "perform pg_read_file('/etc/passwd')", "perform set_config('statement_timeout', '0', false)",
    "perform dblink_exec('x')", "perform pg_terminate_backend(1)", "perform pg_reload_conf()",
    "create function shop.f() returns int language c as 'x'",
]
ORACLE_STATEMENTS = ["pragma autonomous_transaction", "x := utl_http.request('http://x')", "alter session set events 'x'",
                     "dbms_scheduler.create_job('j')"]


def hidden(statement: str, dialect: str) -> list[str]:
    if dialect == "oracle":
        return [f"BEGIN {statement}; END;", f"BEGIN EXECUTE IMMEDIATE '{statement.replace(chr(39), chr(39) * 2)}'; END;"]
    quoted = statement.replace("'", "''")
    return [f"{statement};", f"DO $$ BEGIN {statement}; END $$;",
            f"DO $outer$ BEGIN EXECUTE '{quoted}'; END $outer$;",
            f"CREATE FUNCTION answers.g() RETURNS void LANGUAGE plpgsql AS $g$ BEGIN EXECUTE $q$ {statement} $q$; END $g$;"]


def a_task(dialect: str) -> Task:
    return Task(id="t", subset="s", dialect=dialect, turns=(Turn(1, "p", (UnitTest("x", "assert", "x"),)),),
                entry_points=("f",))


@pytest.mark.parametrize("dialect", ["postgres", "oracle"])
def test_skipping_texts_without_a_watched_word_finds_what_reading_them_finds(monkeypatch: pytest.MonkeyPatch,
                                                                             dialect: str) -> None:
    statements = WATCHED_STATEMENTS if dialect == "postgres" else ORACLE_STATEMENTS
    texts = [t for s in statements for t in hidden(s, dialect)]
    task = a_task(dialect)
    skipped = [[str(f) for f in safety.findings(task, t)] for t in texts]
    for text, found in zip(texts, skipped):
        assert found, f"nothing found in {text!r}"
    more = corpus()[: 1500 if dialect == "postgres" else 300]  # sqlparse reads Oracle text: slower
    texts += more + [t.replace("DROP", "drop").replace("SELECT", "InSeRt") for t in more[:200]]
    skipped = [[str(f) for f in safety.findings(task, t)] for t in texts]
    monkeypatch.setattr(safety, "_watched", lambda text: True)
    read = [[str(f) for f in safety.findings(task, t)] for t in texts]
    assert skipped == read
    assert sum(map(bool, read)) > len(statements)  # the corpus has findings of its own too


def test_a_megabyte_body_without_a_watched_word_is_not_lexed(monkeypatch: pytest.MonkeyPatch) -> None:
    body = "\n".join(f"  IF p1 = {i} THEN RETURN ARRAY[{i}, {i + 1}]; END IF;" for i in range(30000))
    answer = f"CREATE FUNCTION f(p1 int) RETURNS int[] LANGUAGE plpgsql AS $b$\nBEGIN\n{body}\nRETURN NULL;\nEND;\n$b$;"
    lexed: list[int] = []
    real = safety._lex
    monkeypatch.setattr(safety, "_lex", lambda text, dialect, line: lexed.append(len(text)) or real(text, dialect, line))
    assert safety.findings(a_task("postgres"), answer) == []
    assert len(lexed) == 1  # the CREATE statement; its body holds no watched word
    lexed.clear()
    hostile = answer.replace("RETURN NULL;", "DELETE FROM shop.orders; RETURN NULL;")
    assert [f.rule for f in safety.findings(a_task("postgres"), hostile)] == ["write"]
    assert len(lexed) == 2

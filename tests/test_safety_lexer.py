"""The safety check's one-pass PostgreSQL lexer reads every text token for token like the general
path it shortcuts (issue 12: the pre-check of a megabyte reference answer)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from pytest_plsqlbench import safety

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

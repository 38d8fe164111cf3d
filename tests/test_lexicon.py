"""A dialect's client rules are a Lexicon and SafetyRules, not a name (docs/redesign.md section 11, step 10):
one made here, for a third dialect (sqlite3-like: dot-commands, triggers ending at a ``/`` line), drives
the splitter, the safety lexer and check, and code extraction without any dialect being named."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_plsqlbench import registry, safety
from pytest_plsqlbench import scripts as sc
from pytest_plsqlbench.generation.extract import extract_code
from pytest_plsqlbench.lexicon import Lexicon, SafetyRules, StatementKind
from pytest_plsqlbench.scripts import split
from pytest_plsqlbench.tasks import Task, Turn, UnitTest


def classify(words: list[str]) -> tuple[StatementKind, str | None]:
    if words and words[0].startswith("."):  # sqlparse: ".", "MODE"; the large-script tokenizer: ".MODE"
        return "client", words[0] if words[0] != "." else "." + "".join(words[1:2])
    if words[:2] == ["CREATE", "TRIGGER"]:
        return "plsql", None  # its body holds ";": it ends at a "/" line
    return "sql", None


TOY = Lexicon(classify=classify, strip_semicolon=True, slash_terminator=True)
TOY_SAFETY = SafetyRules(scratch_schemas=frozenset({"main"}), objects_live_in_scratch=True)

SCRIPT = """.mode column
CREATE TRIGGER t AFTER INSERT ON a BEGIN
  INSERT INTO b VALUES ('x; y');
END;
/
SELECT 'it''s; \\ fine' FROM a;
SELECT 2
/
"""
EXPECTED = [
    ("client", ".mode column", ".MODE"),
    ("plsql", "CREATE TRIGGER t AFTER INSERT ON a BEGIN\n  INSERT INTO b VALUES ('x; y');\nEND;", None),
    ("sql", "SELECT 'it''s; \\ fine' FROM a", None),
    ("sql", "SELECT 2", None),
]


@pytest.mark.parametrize("fast_from", [sc.FAST_TOKENIZER_FROM, 0])
def test_a_lexicon_made_here_drives_the_splitter(monkeypatch: pytest.MonkeyPatch, fast_from: int) -> None:
    monkeypatch.setattr(sc, "FAST_TOKENIZER_FROM", fast_from)  # 0: the large-script tokenizer reads it
    got = split(SCRIPT, TOY)
    assert [(s.kind, s.text, s.command) for s in got] == EXPECTED
    assert [s.line for s in got] == [1, 2, 6, 7]


def test_a_lexicon_made_here_drives_the_safety_lexer_and_check(monkeypatch: pytest.MonkeyPatch) -> None:
    words = [t.word for t in safety._lex("DELETE FROM main.t; DROP TABLE other.x", TOY, 1)]
    assert words == ["DELETE", "FROM", "MAIN", ".", "T", ";", "DROP", "TABLE", "OTHER", ".", "X"]
    # The checker reads the task's dialect only to look its rules up in the registry.
    monkeypatch.setattr(safety, "rules_for", lambda dialect: (TOY, TOY_SAFETY))
    task = Task(id="t", subset="s", dialect="toy", turns=(Turn(1, "p", (UnitTest("x", "assert", "x"),)),))
    answer = "CREATE TABLE main.t (a int);\nDELETE FROM main.t;\nCREATE TABLE other.x (a int);\nDROP TABLE other.y;\n"
    assert [(f.rule, f.line) for f in safety.findings(task, answer)] == [("create-elsewhere", 3), ("drop", 4)]


def test_a_lexicon_made_here_drives_code_extraction() -> None:
    reply = "Here it is:\n\nCREATE TRIGGER t AFTER INSERT ON a BEGIN\n  SELECT 1;\nEND;\n/\nThis fires on insert."
    assert extract_code(reply, TOY) == "CREATE TRIGGER t AFTER INSERT ON a BEGIN\n  SELECT 1;\nEND;\n/"
    without = Lexicon(classify=classify)
    assert extract_code(reply, without).endswith("This fires on insert.")


def test_a_registered_dialects_fence_names_are_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """A block tagged with a fence name of a registered dialect is code, whichever dialect the
    reply is for; unregistered, the same block is commentary."""
    reply = "Here it is:\n\n```trig\nCREATE TRIGGER t AFTER INSERT ON a BEGIN\n  SELECT 1;\nEND;\n```\nDone."
    assert extract_code(reply, TOY) == "Here it is:\n\nDone."
    toy = SimpleNamespace(name="toy", lexicon=Lexicon(fence_names=frozenset({"trig"})))
    monkeypatch.setattr(registry, "_active", [])
    registry.use(registry.Registry([*registry.outside_pytest().dialects.values(), toy]))  # type: ignore[list-item]
    assert extract_code(reply, TOY) == "CREATE TRIGGER t AFTER INSERT ON a BEGIN\n  SELECT 1;\nEND;"

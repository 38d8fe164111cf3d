"""Oracle MBPP failures show the call, the expected and the returned value (issue 29).

On PostgreSQL a failing case raises both values in a DETAIL; Oracle's RAISE_APPLICATION_ERROR
has none, so a failing Oracle case appends the returned value, written as an Oracle literal by
local procedures of the block, to its message after ``RETURNED_MARK``. Checked here without a
database: the blocks (ours and the published ones) differ from the plain ones only in that
message, their PL/SQL is well nested, the judge reads the value back, and the Oracle session
(on tests/test_oracle_session.py's scripted driver) keeps the message and its failure class
whatever the value says. The same on a real Oracle at the end, skipped when none is reachable.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_plsqlbench import outcomes
from pytest_plsqlbench.convert.emitter import EmitCase, Signature
from pytest_plsqlbench.convert.model import Tolerance
from pytest_plsqlbench.convert.oracle import OracleEmitter, published_cases, show_published
from pytest_plsqlbench.convert.sqltypes import BOOL, NUMBER, TEXT, ListT, RecordT
from pytest_plsqlbench.dialects.base import DbError, Execution
from pytest_plsqlbench.judges import AssertJudge, JudgeContext
from pytest_plsqlbench.outputs import RETURNED_MARK, returned_value
from pytest_plsqlbench.tasks import UnitTest

from test_convert_pipeline import unshown
from test_oracle import SKIP_REASON, backend, oracle_reachable, session  # noqa: F401 - fixtures

LITERAL = re.compile(r"'(?:[^']|'')*'")


def nesting_problems(block: str) -> list[str]:
    """BEGIN/END, IF/END IF and LOOP/END LOOP pairs and string quotes of a PL/SQL block (a
    smoke check of generated text: no PL/SQL compiler runs here)."""
    text = LITERAL.sub("''", block)
    if "'" in text.replace("''", ""):
        return ["unbalanced quote"]
    stack: list[str] = []
    problems: list[str] = []
    tokens = re.findall(r"[A-Za-z_][\w$#]*|;", text)
    for i, tok in enumerate(tokens):
        word = tok.upper()
        prev = tokens[i - 1].upper() if i else ""
        if word == "END":
            nxt = tokens[i + 1].upper() if i + 1 < len(tokens) else ";"
            want = nxt if nxt in ("IF", "LOOP") else "BEGIN"
            if not stack or stack.pop() != want:
                problems.append(f"END {want} without its opening at token {i}")
        elif word in ("IF", "LOOP") and prev != "END":
            stack.append(word)
        elif word == "BEGIN":
            stack.append(word)
    return problems + [f"{s} never closed" for s in stack]


def literal_of(value: Any, t: Any) -> str:
    return OracleEmitter().literal(value, t)


def failing(label: str, shown: str, total: int | None = None, tail: str = "\nORA-06512: at line 61") -> str:
    """The message Oracle reports for a failing case whose function returned ``shown``."""
    return f"ORA-20001: {label} failed\n{RETURNED_MARK}{len(shown)} {total or len(shown)}:{shown}{tail}"


# --------------------------------------------------------------------------- the blocks
SIGNATURES = [
    (Signature("f_num", (NUMBER,), NUMBER), EmitCase("case-1", (2,), 4)),
    (Signature("f_text", (TEXT,), TEXT), EmitCase("case-1", ("it's",), "it is")),
    (Signature("f_bool", (NUMBER,), BOOL), EmitCase("plus-7", (1,), True)),
    (Signature("f_nested", (ListT(NUMBER),), ListT(ListT(NUMBER))), EmitCase("case-2", ([1],), [[1], [2, 3]])),
    (Signature("f_rec", (TEXT,), RecordT((TEXT, NUMBER))), EmitCase("case-1", ("a",), ("a", 0.5))),
    (
        Signature("f_dict", (TEXT,), ListT(RecordT((TEXT, NUMBER), kv=True), "map")),
        EmitCase("case-1", ("a",), {"a": 1, "b": 2}),
    ),
    (Signature("f_set", (NUMBER,), ListT(TEXT, "set")), EmitCase("case-3", (1,), ["x", "y"])),
    (Signature("f_alt", (NUMBER,), NUMBER), EmitCase("case-1", (1,), 4, alternatives=(5,))),
    (Signature("f_tol", (NUMBER,), NUMBER), EmitCase("case-1", (1,), 0.1, tolerance=Tolerance(atol=1e-6))),
]


@pytest.mark.parametrize("mode", ["null-safe", "published"])
@pytest.mark.parametrize(("sig", "case"), SIGNATURES, ids=[s.name for s, _ in SIGNATURES])
def test_our_blocks_differ_from_the_plain_ones_only_in_the_failure_message(
    sig: Signature, case: EmitCase, mode: str
) -> None:
    emitter = OracleEmitter()
    script = emitter.test_script(sig, case, mode)
    plain = emitter.block(sig, [case], mode, show=False) + "\n/\n"
    assert script != plain and unshown(script) == plain
    # The value is written only where the comparison failed: inside the branch that raises.
    raises = [line.strip() for line in script.splitlines() if "RAISE_APPLICATION_ERROR" in line]
    assert len(raises) == 1 and "|| plsqlbench_shown(" in raises[0]
    assert nesting_problems(script.removesuffix("\n/\n")) == []
    # Writing the value can never raise out of the block: any error leaves the bare message.
    shown = script[script.index("FUNCTION plsqlbench_shown("):]
    assert "EXCEPTION\n    WHEN OTHERS THEN\n      RETURN NULL;" in shown
    # No helper can shadow the function under test.
    declared = re.findall(r"(?:PROCEDURE|FUNCTION)\s+(\w+)", script)
    assert sig.name not in declared and all(d.startswith(("plsqlbench_", "eq_", "in_", "assert_eq")) for d in declared)


def test_the_nesting_check_is_not_vacuous() -> None:
    sig, case = SIGNATURES[3]
    script = OracleEmitter().test_script(sig, case, "null-safe")
    assert nesting_problems(script.replace("END LOOP;", "END;", 1)) != []
    assert nesting_problems(script.replace("'NULL'", "'NULL", 1)) == ["unbalanced quote"]


@pytest.fixture(scope="module")
def published_blocks(plsqlbench_sample: Path) -> dict[str, str]:
    path = plsqlbench_sample / "datasets" / "mbpp" / "mbpp_plsql.jsonl"
    return {r["task_id"]: r["test"] for r in map(json.loads, path.read_text().splitlines())}


def test_published_blocks_keep_their_calls_and_comparisons(published_blocks: dict[str, str]) -> None:
    assert len(published_blocks) >= 20
    for tid, block in published_blocks.items():
        shown = show_published(block)
        assert shown != block and unshown(shown) == block, tid
        assert shown.count("RAISE_APPLICATION_ERROR(-20001, msg || plsqlbench_shown(a));") == 1, tid
        assert nesting_problems(shown) == [], tid
        cases = published_cases(block)
        assert list(cases) == re.findall(r"'(case_\d+) failed'", block), tid
        for label, case in cases.items():
            (expected,) = case["expected"]
            assert f"v_actual := {case['call']};" in block, (tid, label)
            assert f"assert_eq(v_actual, {expected}, '{label} failed');" in block, (tid, label)


def test_blocks_in_another_layout_are_left_as_they_are(published_blocks: dict[str, str]) -> None:
    block = published_blocks["MBPP/4"]
    others = [
        block.replace("NUMBER_NTT", "MY_LIST_T"),  # a type outside the published convention
        block.replace("RAISE_APPLICATION_ERROR(-20001, msg);", "RAISE_APPLICATION_ERROR(-20002, msg);"),
        block.replace("END IF;\n  END;", "END IF;\n    RAISE_APPLICATION_ERROR(-20001, msg);\n  END;"),
        "BEGIN\n  IF f(1) != 2 THEN\n    RAISE_APPLICATION_ERROR(-20001, 'case_1 failed');\n  END IF;\nEND;",
        show_published(block),  # already showing
    ]
    for other in others:
        assert show_published(other) == other


# --------------------------------------------------------------------------- the judge
def judged(test: UnitTest, message: str, code: str = "ORA-20001") -> Any:
    cls = outcomes.WRONG_OUTPUT
    execution = Execution(error=DbError(message, code, cls, 1))
    return AssertJudge().judge(JudgeContext(backend=None, task=None), 1, test, execution)  # type: ignore[arg-type]


def test_a_converted_case_shows_call_expected_and_returned() -> None:
    sig, case = SIGNATURES[3]
    emitter = OracleEmitter()
    test = UnitTest("case-2", "assert", emitter.test_script(sig, case, "null-safe"),
                    options={"call": emitter.call(sig, case.args), "expected": [literal_of(case.expected, sig.returns)]})
    returned = literal_of([[1], [2, 4]], sig.returns)
    out = judged(test, failing("case_2", returned))
    assert not out.passed and out.failure_class == outcomes.WRONG_OUTPUT
    assert out.message == (
        "f_nested(NUMBER_NTT(1)) returned NUMBER_NTT_NTT(NUMBER_NTT(1),NUMBER_NTT(2,4)); "
        "expected NUMBER_NTT_NTT(NUMBER_NTT(1),NUMBER_NTT(2,3))"
    )
    assert list(out.expected) == ["NUMBER_NTT_NTT(NUMBER_NTT(1),NUMBER_NTT(2,3))"]
    assert list(out.actual) == [returned] and out.extra == {"call": "f_nested(NUMBER_NTT(1))"}
    # NULL came back.
    assert judged(test, failing("case_2", "NULL")).message.startswith("f_nested(NUMBER_NTT(1)) returned NULL;")
    # A value longer than the message holds: what is shown, and how much was left out.
    long = judged(test, failing("case_2", "NUMBER_NTT_NTT(" + "9," * 499, 5000))
    assert long.message.split(";")[0].endswith(f"... <{5000 - 1013} more characters>")
    # The function raised before returning: what it raised, the call and the expected value.
    raised = judged(test, "ORA-06502: PL/SQL: numeric or value error\nORA-06512: at line 9", "ORA-06502")
    assert raised.message == (
        "f_nested(NUMBER_NTT(1)): [ORA-06502] ORA-06502: PL/SQL: numeric or value error (script line 1); "
        "expected NUMBER_NTT_NTT(NUMBER_NTT(1),NUMBER_NTT(2,3))"
    )


def test_a_published_block_names_the_case_that_failed(published_blocks: dict[str, str]) -> None:
    block = published_blocks["MBPP/4"]
    test = UnitTest("block", "assert", show_published(block), options={"cases": published_cases(block)})
    out = judged(test, failing("case_2", "NUMBER_NTT(85,75,65)", tail="\nORA-06512: at line 58\nORA-06512: at line 64"))
    assert out.message == (
        "heap_queue_largest(NUMBER_NTT(25,35,22,85,14,65,75,22,58), 2) returned NUMBER_NTT(85,75,65); "
        "expected NUMBER_NTT(85,75)"
    )
    # A text value that spans lines and holds an error code reads back whole.
    text_block = published_blocks["MBPP/11"]
    test = UnitTest("block", "assert", show_published(text_block), options={"cases": published_cases(text_block)})
    value = literal_of("it's\nORA-00942: gone", TEXT)
    out = judged(test, failing("case_3", value))
    assert out.message == f"remove_Occ(TO_CLOB('PHP'), TO_CLOB('P')) returned {value}; expected TO_CLOB('H')"
    # An error the case did not raise (no case named, or an unknown one): the error as before.
    for message, code in (("ORA-06502: PL/SQL: numeric or value error", "ORA-06502"),
                          ("ORA-20001: case_9 failed", "ORA-20001")):
        assert judged(test, message, code).message == f"[{code}] {message} (script line 1)"


def test_returned_value_parsing() -> None:
    assert returned_value("ORA-20001: case_1 failed") is None
    rest, value, total = returned_value(failing("case_1", "TO_CLOB('a\nb')", 40)) or ("", "", 0)
    assert value == "TO_CLOB('a\nb')" and total == 40
    assert rest == "ORA-20001: case_1 failed\nORA-06512: at line 61"


# --------------------------------------------------------------------------- the session (scripted driver)
def test_the_session_keeps_the_value_and_the_failure_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """A returned string holding ``ORA-00942`` (an interface code) must not make a wrong value
    an interface failure; the message keeps the value for the judge."""
    from pytest_plsqlbench.dialects import oracle

    import test_oracle_session as scripted

    db = scripted.FakeDb()
    driver = SimpleNamespace(Error=scripted.Error, DatabaseError=scripted.DatabaseError,
                             IntegrityError=scripted.IntegrityError,
                             connect=lambda **kw: scripted.Connection(db), **vars(scripted.DB))
    monkeypatch.setitem(sys.modules, "oracledb", driver)
    value = literal_of("ORA-00942: table or view does not exist\nPLS-00201", TEXT)
    execute = scripted.Cursor.execute

    def run_block(self: Any, text: str, params: Any = ()) -> None:
        if "plsqlbench_shown" in text:  # the block, as Oracle runs it for a wrong answer
            self.db.executed.append(text)
            raise scripted.ora("ORA-20001", failing("case_1", value).removeprefix("ORA-20001: "))
        return execute(self, text, params)

    monkeypatch.setattr(scripted.Cursor, "execute", run_block)
    s = oracle.OracleSession(scripted.FakeBackend(db))  # type: ignore[arg-type]
    s.begin_task()
    sig, case = SIGNATURES[1]
    emitter = OracleEmitter()
    script = emitter.test_script(sig, case, "null-safe")
    result = s.run(script, isolated=True, phase="test")
    assert result.error is not None
    assert (result.error.failure_class, result.error.code) == (outcomes.WRONG_OUTPUT, "ORA-20001")
    test = UnitTest("case-1", "assert", script,
                    options={"call": emitter.call(sig, case.args), "expected": [literal_of(case.expected, TEXT)]})
    out = AssertJudge().judge(JudgeContext(backend=None, task=None), 1, test, result)  # type: ignore[arg-type]
    assert out.message == f"f_text(TO_CLOB('it''s')) returned {value}; expected TO_CLOB('it is')"
    assert out.failure_class == outcomes.WRONG_OUTPUT


# --------------------------------------------------------------------------- a real Oracle
needs_oracle = pytest.mark.skipif(not oracle_reachable(), reason=SKIP_REASON)


def _install(oracle_session: Any, script: str) -> None:
    result = oracle_session.run(script, isolated=False, phase="install")
    assert result.ok, result.error


@needs_oracle
@pytest.mark.oracle
def test_real_oracle_shows_returned_values_without_changing_verdicts(
    session: Any, published_blocks: dict[str, str]  # noqa: F811 - the fixture
) -> None:
    judge = AssertJudge()
    ctx = JudgeContext(backend=None, task=None)  # type: ignore[arg-type]
    _install(session, "CREATE TYPE NUMBER_NTT AS TABLE OF NUMBER;\n/\n")
    block = published_blocks["MBPP/4"]
    test = UnitTest("block", "assert", show_published(block) + "\n/\n", options={"cases": published_cases(block)})
    # Three largest whatever n is: case_1 passes, case_2 fails and shows what came back.
    _install(session, "CREATE OR REPLACE FUNCTION heap_queue_largest(p1 IN NUMBER_NTT, p2 IN NUMBER) "
                      "RETURN NUMBER_NTT IS BEGIN RETURN NUMBER_NTT(85, 75, 65); END;\n/\n")
    wrong = session.run(test.script, isolated=True, phase="test")
    assert wrong.error is not None and wrong.error.code == "ORA-20001", wrong.error
    assert wrong.error.failure_class == outcomes.WRONG_OUTPUT
    out = judge.judge(ctx, 1, test, wrong)
    assert out.message.endswith("2) returned NUMBER_NTT(85,75,65); expected NUMBER_NTT(85,75)"), out.message
    # A right answer passes the block with the value writers in it, as it passes the published one.
    _install(session, "CREATE OR REPLACE FUNCTION heap_queue_largest(p1 IN NUMBER_NTT, p2 IN NUMBER) "
                      "RETURN NUMBER_NTT IS r NUMBER_NTT := NUMBER_NTT(); BEGIN "
                      "SELECT COLUMN_VALUE BULK COLLECT INTO r FROM (SELECT COLUMN_VALUE FROM TABLE(p1) "
                      "ORDER BY COLUMN_VALUE DESC) WHERE ROWNUM <= p2; RETURN r; END;\n/\n")
    assert session.run(test.script, isolated=True, phase="test").ok
    assert session.run(block + "\n/\n", isolated=True, phase="test").ok
    # NULL passes a published block (its != is NULL); it still does.
    _install(session, "CREATE OR REPLACE FUNCTION heap_queue_largest(p1 IN NUMBER_NTT, p2 IN NUMBER) "
                      "RETURN NUMBER_NTT IS BEGIN RETURN NULL; END;\n/\n")
    assert session.run(test.script, isolated=True, phase="test").ok
    # Text with quotes, a line break and an error code; numbers below one.
    text_block = published_blocks["MBPP/11"]
    test = UnitTest("block", "assert", show_published(text_block) + "\n/\n",
                    options={"cases": published_cases(text_block)})
    _install(session, "CREATE OR REPLACE FUNCTION remove_Occ(p1 IN CLOB, p2 IN CLOB) RETURN CLOB IS BEGIN "
                      "RETURN TO_CLOB('it''s ORA-00942' || CHR(10) || 'x'); END;\n/\n")
    wrong = session.run(test.script, isolated=True, phase="test")
    assert wrong.error is not None and wrong.error.failure_class == outcomes.WRONG_OUTPUT, wrong.error
    out = judge.judge(ctx, 1, test, wrong)
    assert "returned TO_CLOB('it''s ORA-00942\nx'); expected TO_CLOB('heo')" in out.message, out.message
    sig, case = SIGNATURES[4]
    emitter = OracleEmitter()
    _install(session, "CREATE TYPE CLOB_NUMBER_OBJ2 AS OBJECT (F1 CLOB, F2 NUMBER);\n/\n"
                      "CREATE OR REPLACE FUNCTION f_rec(p1 IN CLOB) RETURN CLOB_NUMBER_OBJ2 IS BEGIN "
                      "RETURN CLOB_NUMBER_OBJ2(p1, -0.25); END;\n/\n")
    test = UnitTest("case-1", "assert", emitter.test_script(sig, case, "null-safe"),
                    options={"call": emitter.call(sig, case.args), "expected": [literal_of(case.expected, sig.returns)]})
    out = judge.judge(ctx, 1, test, session.run(test.script, isolated=True, phase="test"))
    assert out.message == (
        "f_rec(TO_CLOB('a')) returned CLOB_NUMBER_OBJ2(TO_CLOB('a'),-0.25); "
        "expected CLOB_NUMBER_OBJ2(TO_CLOB('a'),0.5)"
    ), out.message

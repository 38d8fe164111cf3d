"""Concise failure output: one line per failed task turn unless details are asked for."""

from __future__ import annotations

import json

import pytest

from pytest_plsqlbench.concise import failure_lines

WRONG = {
    # Installs, returns a wrong value: wrong output on every test.
    "initials": "CREATE FUNCTION initials(p text) RETURNS text LANGUAGE sql AS $$ SELECT 'X' $$;",
    # Defines nothing the tests call: interface/schema.
    "clamp_value": "SELECT 1;",
}


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    answers = pytester.path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"task_id": k, "answer": v}) + "\n" for k, v in WRONG.items()))
    return pytester.runpytest_subprocess(
        "--subset", "smoke", f"--plsql-answers={answers}", "--plsql-task=initials,clamp_value,days_in_month",
        "-p", "no:cacheprovider", *args, timeout=300,
    )


def test_default_output_is_one_line_per_failed_task_turn(pytester: pytest.Pytester) -> None:
    result = run(pytester)
    text = result.stdout.str()
    assert result.ret == 1
    assert "= FAILURES =" not in text and "FAILED smoke/" not in text  # no section or line per item
    result.stdout.fnmatch_lines(
        [
            "*PLSQLBench failures: 3 task turn(s)*",
            "smoke/clamp_value: [[]interface/schema] 4 of 4 tests failed; e.g. *: *does not exist*",
            "smoke/days_in_month: [[]not generated] * tests failed; e.g. *",
            "smoke/initials: [[]wrong output/logic] 4 of 4 tests failed; e.g. *expected*got X*",
            "*PLSQLBench summary*",
        ]
    )


@pytest.mark.parametrize("flag", ["-v", "--tb=short", "-rf"])
def test_details_when_asked(pytester: pytest.Pytester, flag: str) -> None:
    text = run(pytester, flag).stdout.str()
    assert "PLSQLBench failures" not in text
    if flag == "-rf":
        assert "FAILED smoke/initials/" in text
    else:
        assert "= FAILURES =" in text and "[wrong_output]" in text


def test_failure_lines_name_turns_samples_and_the_first_difference() -> None:
    def test(turn: int, tid: str, cls: str, sample: int = 0, **kw: object) -> dict[str, object]:
        return {"turn": turn, "test_id": tid, "sample": sample, "passed": cls == "passed", "failure_class": cls,
                "message": kw.pop("message", ""), **kw}

    doc = {
        "header": {"samples": 2},
        "tasks": [
            {"subset": "s", "task_id": "t/10", "node": "t-10", "n_turns": 1,
             "tests": [test(1, "a", "passed"), test(1, "b", "wrong_output", expected=["1", "2"], actual=["1", "3"])]},
            {"subset": "s", "task_id": "t/9", "node": "t-9", "n_turns": 2,
             "tests": [test(1, "a", "passed"), test(2, "a", "timeout", message="ran past 10s"),
                       test(2, "b", "wrong_output"), test(1, "a", "infrastructure", sample=1)]},
        ],
    }
    assert failure_lines(doc) == [
        "s/t-9/turn-2/sample-1: [timeout] 2 of 2 tests failed; e.g. a: ran past 10s",
        "s/t-9/turn-1/sample-2: [infrastructure] 1 of 1 tests failed; e.g. a: ",
        "s/t-10/sample-1: [wrong output/logic] 1 of 2 tests failed; e.g. b: line 2: expected '2', got '3'",
    ]
    # A narrow line cuts the message, never the values that differ.
    narrow = failure_lines(doc, width=60)
    assert narrow[2].endswith("line 2: expected '2', got '3'") and narrow[0].endswith("e.g. a: ran past 10s")



def _doc(test: dict[str, object]) -> dict[str, object]:
    base = {"turn": 1, "test_id": "t1", "sample": 0, "passed": False, "failure_class": "wrong_output"}
    return {"header": {}, "tasks": [{"subset": "s", "task_id": "long", "n_turns": 1, "tests": [{**base, **test}]}]}


def test_a_difference_past_the_line_width_stays_in_view() -> None:
    """Issue 29: cutting the line at 240 characters hid the value that differs when it lay further in."""
    from pytest_plsqlbench.comparators import compare_output

    for at in (5, 239, 300, 1999, 5000):
        expected = "a" * at + "X" + "b" * 400
        actual = "a" * at + "Y" + "c" * 400
        ok, why = compare_output(["same", expected], ["same", actual])
        assert not ok
        # -v / --tb show the message: the differing characters are in it, with the column.
        assert "aXb" in why and "aYc" in why and f"column {at + 1}" in why or at < 60, (at, why)
        (line,) = failure_lines(_doc({"message": why, "expected": ["same", expected], "actual": ["same", actual]}))
        assert len(line) <= 240, line
        assert "expected 2 line(s), got 2" in line and "line 2" in line, line
        shown = line.split("line 2", 1)[1]
        assert ("'a" if at else "'") + "X" in shown or "aXb" in shown, line
        assert "aYc" in shown or "'Y" in shown, line
        assert shown.index("X") < shown.index("Y"), line  # expected first, as the message says


def test_a_returned_value_differing_far_in_shows_both_values_around_the_difference() -> None:
    """MBPP assert tests: the call, what came back and what was expected, each cut around where
    they differ (a long input list is cut first)."""
    call = "f(NUMBER_NTT(" + ",".join(str(i) for i in range(200)) + "))"
    expected = "NUMBER_NTT(" + ",".join(str(i) for i in range(150)) + ")"
    returned = "NUMBER_NTT(" + ",".join(str(i) for i in range(120)) + ",999," + ",".join(
        str(i) for i in range(121, 150)) + ")"
    message = f"{call} returned {returned}; expected {expected}"
    test = {"message": message, "expected": [expected], "actual": [returned], "extra": {"call": call}}
    (line,) = failure_lines(_doc(test))
    assert len(line) <= 240, line
    got, want = line.split(" returned ", 1)[1].split("; expected ", 1)
    assert "119,999,121" in got and "119,120,121" in want, line
    assert line.split("e.g. t1: ", 1)[1].startswith("f(NUMBER_NTT(0,1,2"), line
    # Several accepted values: the nearest one is shown, and the others counted.
    test["expected"] = ["NUMBER_NTT()", expected]
    (line,) = failure_lines(_doc(test))
    assert "119,120,121" in line and "(or 1 other accepted value(s))" in line, line


def test_rows_and_lines_show_the_difference_in_the_full_message_too() -> None:
    from pytest_plsqlbench.comparators import compare_rows
    from pytest_plsqlbench.outputs import describe_mismatch

    long_e, long_a = "k," + "v" * 300 + "1", "k," + "v" * 300 + "2"
    ok, why = compare_rows([long_e], [long_a], {"ordered": True})
    assert not ok and "v1'" in why and "v2'" in why and "column 303" in why, why
    text = describe_mismatch(["x" * 150 + "END"], ["x" * 150 + "FIN"])
    assert "xEND'" in text and "xFIN'" in text, text
    assert describe_mismatch(["short"], []).splitlines()[1] == "  line 1: expected 'short'"


LONG_TASK = """\
id: long_line
answer_mode: execute
prompt: Print the line.
reference: "DO $$ BEGIN RAISE NOTICE '%', repeat('a', 300) || 'X' || repeat('b', 60); END $$;"
tests:
  - id: out
    kind: output
    runs_answer: true
    expected: ['@EXPECTED@']
"""
LONG_ANSWER = "DO $$ BEGIN RAISE NOTICE '%', repeat('a', 300) || 'Y' || repeat('c', 60); END $$;"


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["-q", "-v"])
def test_a_long_output_differing_past_240_characters_end_to_end(pytester: pytest.Pytester, flag: str) -> None:
    """A real run: the one-line summary (``-q``) and the failure section (``-v``) both show the
    characters that differ at column 301 of a 361-character line."""
    tasks = pytester.path / "tasks"
    (tasks / "own").mkdir(parents=True)
    (tasks / "own.yaml").write_text("name: own\nloader: yaml\ndialects: [postgres]\noptions:\n  dir: own\n")
    (tasks / "own" / "long_line.yaml").write_text(LONG_TASK.replace("@EXPECTED@", "a" * 300 + "X" + "b" * 60))
    answers = pytester.path / "answers.jsonl"
    answers.write_text(json.dumps({"task_id": "long_line", "answer": LONG_ANSWER}) + "\n")
    result = pytester.runpytest_subprocess(
        "--plsql-tasks", str(tasks), "--subset", "own", f"--plsql-answers={answers}", "--plsql-dialect=postgres", "-p", "no:cacheprovider",
        "--plsql-cache", str(pytester.path / "cache"), "-n", "0", flag, timeout=300,
    )
    text = result.stdout.str()
    assert result.ret == 1, text[-3000:]
    if flag == "-q":
        line = next(x for x in text.splitlines() if x.startswith("own/long_line: "))
        assert len(line) <= 240 and "column 301" in line, line
        assert "aXbbb" in line and "aYccc" in line, line
    else:
        assert "column 301" in text and "aXbbb" in text and "aYccc" in text, text[-3000:]


def test_a_call_that_raised_shows_its_error_not_a_line_count() -> None:
    message = "f(1): [P0001] division by zero (script line 3); expected 3"
    (line,) = failure_lines(_doc({"message": message, "expected": ["3"], "actual": [], "extra": {"call": "f(1)"}}))
    assert line.endswith("e.g. t1: " + message), line

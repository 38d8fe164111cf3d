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
        "s/t-10/sample-1: [wrong output/logic] 1 of 2 tests failed; e.g. b:  (line 2: expected '2', got '3')",
    ]
    assert all(len(line) <= 60 for line in failure_lines(doc, width=60))

"""Replay validation on embedded PostgreSQL through the core runner, NULL-safe vs published
assertions, and the ``plsqlbench convert`` / ``validate`` commands."""

from __future__ import annotations

import json
import re

import pytest

from pytest_plsqlbench.cli import main
from pytest_plsqlbench.convert import convert_file
from pytest_plsqlbench.convert.validate import replay_validate
from pytest_plsqlbench.runner import evaluate_task, open_backend
from pytest_plsqlbench.settings import Settings
from pytest_plsqlbench.tasks import Task

from test_convert_pipeline import unshown

PG = Settings.of(subsets=(), dialect="postgres", timeout=10.0)


@pytest.fixture(scope="module")
def backend():
    with open_backend(PG, "convert-tests") as b:
        yield b


def null_answer(task: Task) -> str:
    """The task's function returning NULL whatever the input (built from its replay header)."""
    reference = task.turns[0].reference
    assert reference is not None
    head, tag = re.match(r"(?s)(.*?\nAS )(\$\w*\$)\n", reference).groups()
    return f"{head}{tag}\nBEGIN\n  RETURN NULL;\nEND;\n{tag};\n"


@pytest.mark.parametrize("assertions", ["null-safe", "published"])
def test_plsqlbench_sample_is_replay_valid_in_postgres(plsqlbench_sample, assertions, backend):
    result = convert_file(
        "plsqlbench-mbpp", plsqlbench_sample, "postgres", subset="mbpp", assertions=assertions
    )
    assert result.converted == result.total == 28
    report = replay_validate(result.tasks, PG, backend=backend)
    assert report.failures == []
    assert report.summary() == "replay-valid 28 of 28"


def test_sanitized_mbpp_is_replay_valid_in_postgres(mbpp_sanitized_file, backend):
    result = convert_file("mbpp", mbpp_sanitized_file, "postgres", subset="mbpp-sanitized")
    assert result.converted >= 0.95 * result.total
    report = replay_validate(result.tasks, PG, backend=backend)
    assert report.failures == []
    assert report.valid == result.converted
    assert report.tests == sum(t.n_tests for t in result.tasks) > 3 * result.converted - 30


def test_a_null_returning_function_passes_published_blocks_but_not_null_safe_ones(plsqlbench_sample, backend):
    """The published `IF a != b` lets NULL through; NULL-safe assertions do not."""
    published = convert_file(
        "plsqlbench-mbpp", plsqlbench_sample, "postgres", subset="mbpp", assertions="published"
    )
    null_safe = convert_file("plsqlbench-mbpp", plsqlbench_sample, "postgres", subset="mbpp")
    for loose, strict in zip(published.tasks, null_safe.tasks, strict=True):
        answer = null_answer(strict)
        loose_report = evaluate_task(backend, loose, [answer])
        strict_report = evaluate_task(backend, strict, [answer])
        assert loose_report.passed, (loose.id, loose_report.failures()[:1])
        assert strict_report.outcomes and not any(o.passed for o in strict_report.outcomes), strict.id
        assert {o.failure_class for o in strict_report.outcomes} == {"wrong_output"}
        # ... and the replay function (the right answer) passes both.
        assert evaluate_task(backend, loose, [loose.turns[0].reference]).passed
        assert evaluate_task(backend, strict, [strict.turns[0].reference]).passed


def test_null_safe_tests_fail_a_wrong_answer_and_report_what_it_returned(plsqlbench_sample, backend):
    result = convert_file("plsqlbench-mbpp", plsqlbench_sample, "postgres", subset="mbpp")
    task = next(t for t in result.tasks if t.id == "MBPP/2")  # similar_elements: compared as sets
    reverse = null_answer(task).replace(
        "RETURN NULL;", "RETURN ARRAY(SELECT x FROM unnest(p1) x WHERE x = ANY (p2) ORDER BY x DESC);"
    )
    report = evaluate_task(backend, task, [reverse])
    assert report.passed  # order does not matter for a set-compared task
    wrong = null_answer(task).replace("RETURN NULL;", "RETURN p1;")
    report = evaluate_task(backend, task, [wrong])
    assert not any(o.passed for o in report.outcomes)
    first = report.outcomes[0]
    # the call, what the answer returned and the expected value, as a user writes them (issue 29)
    call = task.turns[0].tests[0].options["call"]
    assert call.startswith("similar_elements(") and first.message.startswith(f"{call} returned {{3,4,5,6}}; expected ")
    assert first.actual == ["{3,4,5,6}"] and first.expected and first.expected[0] in first.message


def test_oracle_blocks_show_the_same_difference_structurally(plsqlbench_sample):
    """No Oracle here: the published block's `!=` has no NULL branch, the NULL-safe one does."""
    published = convert_file(
        "plsqlbench-mbpp", plsqlbench_sample, "oracle", subset="mbpp", assertions="published"
    )
    null_safe = convert_file("plsqlbench-mbpp", plsqlbench_sample, "oracle", subset="mbpp")
    for loose, strict in zip(published.tasks, null_safe.tasks, strict=True):
        (block,) = loose.turns[0].tests
        # (the procedures that write a failing case's returned value test for NULL: not a comparison)
        assert "IF a != b THEN" in block.script and "IS NULL" not in unshown(block.script)
        for test in strict.turns[0].tests:
            assert "a != b" not in test.script
            assert re.search(r"IF NOT eq_\w+\(a, b\) THEN", test.script)
            # every comparison function answers NULL-vs-value before comparing values
            for body in re.findall(r"FUNCTION eq_\w+\(a .*?\n  END;", test.script, re.DOTALL):
                assert "IS NULL" in body or "GETLENGTH" in body


# --------------------------------------------------------------------------- the commands
def test_convert_and_validate_commands(plsqlbench_sample, tmp_path, capsys):
    out = tmp_path / "mbpp-pg.jsonl"
    code = main(
        [
            "convert",
            "--from",
            "plsqlbench-mbpp",
            str(plsqlbench_sample),
            "--dialect",
            "postgres",
            "-o",
            str(out),
            "--explain",
            "MBPP/3",
        ]
    )
    text = capsys.readouterr().out
    assert code == 0
    assert text.splitlines()[0] == "converted 28 of 28"
    assert "MBPP/3: converted to postgres with 3 unit test(s) of 3 source case(s)" in text
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 28 and rows[0]["subset"] == "mbpp" and rows[0]["dialect"] == "postgres"

    assert main(["validate", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "replay-valid 28 of 28"
    assert "cases kept 84 of 84 (100.0%) in 28 task(s)" in lines
    assert "constant-passable 0: no task is passed by one constant answer" in lines

    # Break one expected value: validation must fail and name the task and case.
    rows[4]["turns"][0]["tests"][1]["script"] = rows[4]["turns"][0]["tests"][1]["script"].replace(
        "IS DISTINCT FROM 153", "IS DISTINCT FROM 154"
    )
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert main(["validate", str(broken)]) == 1
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "replay-valid 27 of 28"
    assert "FAILED MBPP/5: 1 of 3 test(s) failed; case-2: wrong_output" in text

    bad = tmp_path / "bad.jsonl"
    bad.write_text(out.read_text().splitlines()[0] + "\n{oops\n")
    assert main(["validate", str(bad)]) == 2
    assert f"{bad}:2:" in capsys.readouterr().err


def test_convert_reports_rejections_by_reason(tmp_path, capsys):
    src = tmp_path / "mbpp.jsonl"
    rows = [
        {
            "task_id": 1,
            "text": "t",
            "code": "def f(x):\n    return x",
            "test_list": ["assert f(1) == 1", "assert f(2) == 2"],
        },
        {"task_id": 2, "text": "t", "code": "def g(x):\n    return x", "test_list": ["assert g(1j) == 1j"]},
        {
            "task_id": 3,
            "text": "t",
            "code": "def h(x):\n    return x",
            "test_list": ["assert h([1, 'a']) == 1"],
        },
    ]
    src.write_text("\n".join(json.dumps(r) for r in rows))
    out = tmp_path / "out.jsonl"
    assert (
        main(
            [
                "convert",
                "--from",
                "mbpp",
                str(src),
                "--dialect",
                "oracle",
                "-o",
                str(out),
                "--explain",
                "Mbpp/2",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["converted 1 of 3", "rejected 1: inconsistent-types", "rejected 1: unsupported-type"]
    assert any(line.startswith("Mbpp/2: rejected (unsupported-type)") for line in lines)
    assert len(out.read_text().splitlines()) == 1


def test_keep_constant_tasks_flag_and_validate_report(tmp_path, capsys):
    rows = [
        {"task_id": 1, "text": "Is it positive?", "code": "def pos(n):\n    return n > 0",
         "test_list": ["assert pos(1) == True", "assert pos(5) == True", "assert pos('a') == False"]},
        {"task_id": 2, "text": "Double it.", "code": "def dbl(n):\n    return 2 * n",
         "test_list": ["assert dbl(1) == 2", "assert dbl(2) == 4"]},
    ]
    src = tmp_path / "mbpp.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "out.jsonl"
    base = ["convert", "--from", "mbpp", str(src), "--dialect", "postgres", "-o", str(out)]
    assert main(base) == 0
    text = capsys.readouterr().out
    assert "converted 1 of 2" in text
    assert "left out 1: constant-passable: Mbpp/1 (-> True, 2 of 3 cases)" in text
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["Mbpp/2"]
    assert main([*base, "--keep-constant-tasks", "--explain", "Mbpp/1"]) == 0
    text = capsys.readouterr().out
    assert "kept on request, marked 1: constant-passable: Mbpp/1" in text
    assert "kept on request (constant-passable): a function returning True passes all 2 kept case(s) of 3" in text
    assert main(["validate", str(out)]) == 0  # the replay passes; the report names the weak task
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "replay-valid 2 of 2"
    assert "cases kept 4 of 5 (80.0%) in 2 task(s)" in lines
    assert any(x.startswith("kept on request, marked 1: constant-passable: Mbpp/1 (-> True") for x in lines)

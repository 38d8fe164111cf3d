"""An own subset as a user writes it (issue 29): a broken fixture fails the run, naming the file,
the line and the database's message; any subset name works with markers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_plsqlbench.collect import marker_name, subset_marker

from minisubset import DOUBLE_REF_PG, double_task, write_answers, write_subset

#: The statement starting on line 3 is broken; PostgreSQL points at line 4 (text for an integer column).
BROKEN_FIXTURE = "CREATE TABLE shop (id integer);\nINSERT INTO shop VALUES (1);\nINSERT INTO shop\n  VALUES ('x');\n"


def _subset(root: Path, name: str = "mine") -> Path:
    folder = write_subset(root, name, {
        "t1_a": double_task("t1_a"),
        "t2_b": double_task("t2_b").replace("entry_points: [double_it]", "entry_points: [double_it]\nfixtures: [shop]"),
    })
    (folder / "fixtures" / "shop").mkdir(parents=True)
    (folder / "fixtures" / "shop" / "postgres.sql").write_text(BROKEN_FIXTURE)
    return folder


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_fixture_that_cannot_load_fails_the_run_with_file_line_and_message(
    pytester: pytest.Pytester, workers: str
) -> None:
    folder = _subset(pytester.path)
    out = pytester.path / "r.json"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--subset", "mine", "--plsql-tasks", str(folder), "--plsql-model=reference",
        f"--plsql-results={out}", "-q", "-n", workers,
    )
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text[-3000:]
    fixture = folder / "fixtures" / "shop" / "postgres.sql"
    expected = f"{fixture}:4: fixture 'shop' failed to load: invalid input syntax for type integer"
    assert expected in text, text[-3000:]
    assert "yaml:shop:" not in text  # not the hashed key
    result.assert_outcomes(passed=3, errors=3)
    assert "skipped" not in text and "Traceback" not in text
    doc = json.loads(out.read_text())
    broken = [t for task in doc["tasks"] if task["task_id"] == "t2_b" for t in task["tests"]]
    assert [t["failure_class"] for t in broken] == ["infrastructure"] * 3
    assert all(expected in t["message"] for t in broken)


def test_a_fixture_error_is_not_hidden_by_the_look_ahead(pytester: pytest.Pytester) -> None:
    """The broken task comes second: met ahead on the thread while t1_a reports, it is still raised
    by its own items, an error, never a skip."""
    folder = _subset(pytester.path)
    answers = write_answers(pytester.path / "a.jsonl", [{"task_id": t, "answer": DOUBLE_REF_PG} for t in ("t1_a", "t2_b")])
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--subset", "mine", "--plsql-tasks", str(folder), f"--plsql-answers={answers}",
        "-n", "0", "-rE",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=3, errors=3)
    result.stdout.fnmatch_lines(["*ERROR at setup of mine/t2_b/case-1*",
                                 "[[]data error[]] *postgres.sql:4: fixture 'shop' failed to load: *integer: \"x\""])


NAMES = ["My.Set", "Own-Tasks.v2", "UPPER", "a.b-c_D"]


def test_the_marker_name_is_one_identifier_for_any_subset_name() -> None:
    assert [subset_marker(n) for n in NAMES] == ["subset_my_set", "subset_own_tasks_v2", "subset_upper", "subset_a_b_c_d"]
    assert marker_name("--") == "_" and subset_marker("x") == "subset_x"


@pytest.mark.parametrize("name", NAMES)
def test_any_subset_name_works_with_strict_markers_m_and_collect_only(pytester: pytest.Pytester, name: str) -> None:
    folder = write_subset(pytester.path, name, {"t1_a": double_task("t1_a"), "t2_b": double_task("t2_b")})
    mark = subset_marker(name)
    base = ("-p", "no:cacheprovider", "--subset", name, "--plsql-tasks", str(folder), "--strict-markers")
    collected = pytester.runpytest_subprocess(*base, "--collect-only", "-q", "-m", mark)
    assert collected.ret == pytest.ExitCode.OK, collected.stdout.str()[-2000:] + collected.stderr.str()[-2000:]
    assert sum(1 for line in collected.stdout.lines if "::" in line or "/t1_a/" in line or "/t2_b/" in line) >= 6
    none = pytester.runpytest_subprocess(*base, "--collect-only", "-q", "-m", f"not {mark}")
    assert none.ret == pytest.ExitCode.NO_TESTS_COLLECTED, none.stdout.str()[-2000:]
    ran = pytester.runpytest_subprocess(*base, "--plsql-model=reference", "-n", "0", "-m", f"{mark} and plsql")
    assert ran.ret == pytest.ExitCode.OK, ran.stdout.str()[-2000:] + ran.stderr.str()[-2000:]
    ran.assert_outcomes(passed=6)
    listed = pytester.runpytest_subprocess(*base, "--markers")
    assert f"@pytest.mark.{mark}: item of subset {name}" in listed.stdout.str()
    output = "".join(r.stdout.str() + r.stderr.str() for r in (collected, none, ran, listed))
    assert "INTERNALERROR" not in output and "PytestUnknownMarkWarning" not in output

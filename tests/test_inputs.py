"""Bad input is one clear error naming the file and the line, never a silently wrong task."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_plsqlbench.answers import AnswersFile
from pytest_plsqlbench.errors import UsageError
from pytest_plsqlbench.loaders.yaml_tasks import load_task_file
from pytest_plsqlbench.manifests import discover
from pytest_plsqlbench.tasks import Task, Turn, UnitTest

TASK = """id: t
prompt: p
{extra}
tests:
  - {{id: a, postgres: "SELECT 1;", oracle: "SELECT 1 FROM dual;"}}
"""


def write(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(TASK.format(extra=extra))
    return path


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("entry_points: add_one", "entry_points: must be a list of names"),
        ("markers: fast", "markers: must be a list of names"),
        ("fixtures: shop", "fixtures: must be a list of names"),
        ("answer_mode: exectue", "answer_mode must be 'install' or 'execute'"),
    ],
)
def test_task_fields_of_the_wrong_shape_are_errors(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        load_task_file(write(tmp_path, extra), "s", "postgres", ())


def test_fixtures_with_the_same_name_but_other_content_are_different_fixtures(tmp_path: Path) -> None:
    keys = []
    for n, body in enumerate(("CREATE SCHEMA a;", "CREATE SCHEMA b;")):
        folder = tmp_path / f"f{n}" / "shop"
        folder.mkdir(parents=True)
        (folder / "postgres.sql").write_text(body)
        task = load_task_file(write(tmp_path, "fixtures: [shop]"), "s", "postgres", (folder.parent,))
        keys.append(task.fixtures[0].key)
    assert keys[0] != keys[1]


def test_answers_file_rejects_a_second_answer_for_the_same_turn(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"task_id": "t", "answer": "x"}\n{"task_id": "u", "answer": "y"}\n{"task_id": "t", "turn": 1, "answer": "z"}\n')
    with pytest.raises(UsageError, match=r"a\.jsonl:3: a second answer for t turn 1 \(first at line 1\)"):
        AnswersFile(path)


def test_answers_file_turn_must_be_an_integer_not_a_boolean(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"task_id": "t", "turn": true, "answer": "x"}\n')
    with pytest.raises(UsageError, match=r"a\.jsonl:1: 'turn' must be a positive integer"):
        AnswersFile(path)


def test_missing_tasks_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--plsql-tasks: .*nowhere is not a folder"):
        discover((tmp_path / "nowhere",))


def test_task_model_rejects_unknown_answer_mode() -> None:
    with pytest.raises(ValueError, match="answer_mode"):
        Task(id="t", subset="s", dialect="postgres", answer_mode="later",  # type: ignore[arg-type]
             turns=(Turn(1, "p", (UnitTest("a", "assert", "SELECT 1;"),)),))

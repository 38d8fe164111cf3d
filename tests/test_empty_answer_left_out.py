"""Tasks an empty answer passes measure nothing: left out by default in every family, named, and
kept with ``--plsql-keep-constant-tasks`` (issue 29, point 6).

Decided by the judges on an empty answer after the task's expectations are computed: where the
answer is the program (``answer_mode: execute``: Spider), what an empty program does (prints
nothing, raises nothing); where a test has its own script (``reference`` tests), that script
really run with no answer installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_plsqlbench.collect import LEFT_OUT_EMPTY

#: A program that runs and prints nothing (an empty string is no answer at all: not generated).
DO_NOTHING = "DO $$ BEGIN NULL; END $$;"
EMPTY_CONFTEST = '''
from pytest_plsqlbench import Answer


def pytest_plsql_generate(config, task, turn, history, sample):
    return Answer(code="@CODE@", source="test")
'''

TASKS = {
    # The answer is the program; the expected output is empty: an empty program passes.
    "prints_nothing": """
        id: prints_nothing
        answer_mode: execute
        prompt: Print nothing.
        reference: "DO $$ BEGIN NULL; END $$;"
        tests:
          - id: out
            kind: output
            runs_answer: true
            expected: []
    """,
    "prints_one": """
        id: prints_one
        answer_mode: execute
        prompt: Print 1.
        reference: "DO $$ BEGIN RAISE NOTICE '1'; END $$;"
        tests:
          - id: out
            kind: output
            runs_answer: true
            expected: ['1']
    """,
    # A test script that does not use the answer: an empty answer gives the reference's output.
    "ignores_answer": """
        id: ignores_answer
        entry_points: [f_one]
        prompt: Write a function f_one() returning 1.
        reference: "CREATE FUNCTION f_one() RETURNS int LANGUAGE sql AS 'SELECT 1';"
        tests:
          - id: same
            kind: reference
            postgres: SELECT 2 + 2
    """,
    "uses_answer": """
        id: uses_answer
        entry_points: [f_two]
        prompt: Write a function f_two() returning 2.
        reference: "CREATE FUNCTION f_two() RETURNS int LANGUAGE sql AS 'SELECT 2';"
        tests:
          - id: calls
            kind: reference
            postgres: SELECT f_two()
          - id: holds
            kind: assert
            postgres: "DO $$ BEGIN IF f_two() <> 2 THEN RAISE EXCEPTION 'no'; END IF; END $$;"
    """,
}


def write_subset(root: Path) -> Path:
    tasks = root / "tasks"
    (tasks / "own").mkdir(parents=True)
    (tasks / "own.yaml").write_text("name: own\nloader: yaml\ndialects: [postgres]\noptions:\n  dir: own\n")
    for name, text in TASKS.items():
        (tasks / "own" / f"{name}.yaml").write_text(textwrap.dedent(text))
    return tasks


def run(folder: Path, *args: str, code: str | None = None) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    model = ["--plsql-model=reference"]  # with ``code``, the conftest's hook answers instead
    if code is not None:
        (folder / "conftest.py").write_text(EMPTY_CONFTEST.replace("@CODE@", code))
    out = folder / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--plsql-dialect=postgres", *model,
         f"--plsql-results={out}", "--plsql-cache", str(folder / "cache"), "-rs", "-n", "0", *args],
        cwd=folder, capture_output=True, text=True, timeout=600,
    )
    assert out.is_file(), proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc, json.loads(out.read_text())


def scored(doc: dict[str, Any]) -> set[str]:
    return {t["task_id"] for t in doc["tasks"] if not t.get("excluded")}


@pytest.mark.slow
def test_own_subset_tasks_an_empty_answer_passes_are_left_out_and_kept_on_request(tmp_path: Path) -> None:
    tasks = write_subset(tmp_path)
    proc, doc = run(tmp_path, "--plsql-tasks", str(tasks), "--subset", "own")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert scored(doc) == {"prints_one", "uses_answer"}
    assert doc["subsets"]["own"]["tasks"] == 2
    assert set(doc["subsets"]["own"]["skipped_tasks"]) == {"prints_nothing", "ignores_answer"}
    assert LEFT_OUT_EMPTY in proc.stdout, proc.stdout[-2000:]
    assert "not in the metrics: 2 skipped (left out: an answer that does nothing passes their task)" in proc.stdout
    # Kept on request: scored, and their records say an empty answer passes them.
    proc, doc = run(tmp_path, "--plsql-tasks", str(tasks), "--subset", "own", "--plsql-keep-constant-tasks")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert scored(doc) == set(TASKS)
    flagged = {t["task_id"] for t in doc["tasks"] for x in t["tests"] if (x.get("extra") or {}).get("empty_answer_passes")}
    assert flagged == {"prints_nothing", "ignores_answer"}


@pytest.mark.slow
def test_ini_key_keeps_them_too(tmp_path: Path) -> None:
    tasks = write_subset(tmp_path)
    (tmp_path / "pytest.ini").write_text("[pytest]\nplsql_keep_constant_tasks = true\n")
    proc, doc = run(tmp_path, "--plsql-tasks", str(tasks), "--subset", "own")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert scored(doc) == set(TASKS)


@pytest.mark.slow
def test_spider_excerpt_an_answer_that_prints_nothing_scores_nothing(tmp_path: Path, shared_data: Path) -> None:
    """The release lost the rows these tasks read, so 11 of 22 gold results are empty: those are
    left out, named in the data report, and an empty answer no longer scores 50 %."""
    data = f"--plsql-data={shared_data / 'plsqlbench-spider-sample'}"
    proc, doc = run(tmp_path, "--subset", "spider", data, code=DO_NOTHING)
    spider = doc["subsets"]["spider"]
    assert spider["tasks"] == 11 and spider["mean_test_pass"] == 0.0, proc.stdout[-3000:]
    left = doc["spider_report"]["spider"]["left_out_empty_answer"]
    assert len(left) == 11 and set(left) == set(doc["spider_report"]["spider"]["empty_gold_tasks"])
    assert set(spider["skipped_tasks"]) == set(left)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("  gold result empty:"))
    assert "left out of the scores (11, --plsql-keep-constant-tasks keeps them)" in line and left[0] in line
    # Kept on request: the published figure (an empty answer passes half).
    proc, doc = run(tmp_path, "--subset", "spider", data, "--plsql-keep-constant-tasks", code=DO_NOTHING)
    assert doc["subsets"]["spider"]["tasks"] == 22 and doc["subsets"]["spider"]["mean_test_pass"] == 0.5
    assert "kept on request (11)" in proc.stdout
    assert doc["header"]["keep_constant_tasks"] is True

"""tools/compare_results.py: two runs' results files are equal but for times, durations and workers.

The tool is what each redesign step is checked with (docs/redesign.md section 11), so each test runs
it as a person does (a subprocess, its exit code and its lines) on small results files.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

TOOL = Path(__file__).resolve().parent.parent / "tools" / "compare_results.py"

DOC: dict[str, Any] = {
    "header": {"started": "2026-01-01T00:00:00+00:00", "finished": "2026-01-01T00:01:00+00:00", "model": "reference"},
    "tasks": [{"subset": "smoke", "task_id": "t1", "tests": [
        {"test_id": "case-1", "passed": True, "failure_class": "passed", "duration_s": 0.1, "worker": "gw0"},
        {"test_id": "case-2", "passed": False, "failure_class": "wrong_output", "duration_s": 0.2, "worker": "gw1"},
    ]}],
    "overall": {"suite_pass": 0.0},
}


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], check=False, capture_output=True, text=True,
                          timeout=60)


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def test_times_durations_and_workers_are_left_out(tmp_path: Path) -> None:
    other = copy.deepcopy(DOC)
    other["header"].update(started="2026-02-02T00:00:00+00:00", finished="2026-02-02T00:09:00+00:00")
    for test in other["tasks"][0]["tests"]:
        test.update(duration_s=9.9, worker="gw7")
    done = run(write(tmp_path / "a" / "smoke.json", DOC), write(tmp_path / "b" / "smoke.json", other))
    assert done.returncode == 0, done.stdout + done.stderr
    done = run(tmp_path / "a", tmp_path / "b")
    assert (done.returncode, done.stdout.strip()) == (0, "compare_results: 1 file(s) equal")


def test_an_outcome_a_figure_or_a_missing_file_is_a_difference(tmp_path: Path) -> None:
    other = copy.deepcopy(DOC)
    other["tasks"][0]["tests"][1].update(passed=True, failure_class="passed")
    other["overall"]["suite_pass"] = 1.0
    del other["header"]["model"]
    write(tmp_path / "a" / "smoke.json", DOC)
    write(tmp_path / "b" / "smoke.json", other)
    write(tmp_path / "a" / "spider.json", DOC)
    done = run(tmp_path / "a", tmp_path / "b")
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "smoke.json: header.model: only in before",
        "smoke.json: overall.suite_pass: 0.0 != 1.0",
        'smoke.json: tasks[0].tests[1].failure_class: "wrong_output" != "passed"',
        "smoke.json: tasks[0].tests[1].passed: false != true",
        f"spider.json: only in {tmp_path / 'a'}",
    ]


def test_started_is_compared_outside_the_header_and_ignore_adds_keys(tmp_path: Path) -> None:
    other = copy.deepcopy(DOC)
    other["tasks"][0]["started"] = "later"
    other["overall"]["suite_pass"] = 0.5
    a, b = write(tmp_path / "a.json", DOC), write(tmp_path / "b.json", other)
    assert run(a, b).stdout.splitlines() == ["a.json: overall.suite_pass: 0.0 != 0.5", "a.json: tasks[0].started: only in after"]
    assert run(a, b, "--ignore", "suite_pass", "--ignore", "started").returncode == 0

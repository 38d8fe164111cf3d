"""Progress while the tests run (``--plsql-progress``): items done, rate, ETA, and the item running
longest -- a sign of life for long items (issue 29, point 7)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_plsqlbench.runprogress import RunProgress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Report:
    def __init__(self, nodeid: str, when: str = "teardown") -> None:
        self.nodeid, self.when = nodeid, when


def test_line_counts_rate_eta_and_the_longest_running_item() -> None:
    clock = Clock()
    p = RunProgress(lambda line: None, 30.0, clock=clock)
    p.total = 100
    assert p.line() == "plsql tests: 0/100 items (0%)"
    for n in range(10):
        p.pytest_runtest_logstart(f"s/t{n}/a", None)
        clock.now += 2.0
        p.pytest_runtest_logreport(Report(f"s/t{n}/a", "call"))  # not finished yet
        p.pytest_runtest_logreport(Report(f"s/t{n}/a"))
    p.pytest_runtest_logstart("s/b2/perf", None)
    assert p.line() == "plsql tests: 10/100 items (10%) | 30.0 items/min, ETA 3m00s"
    clock.now += 45.0  # one long item: no other item finishes meanwhile
    line = p.line()
    assert line.endswith("| running longest: s/b2/perf (45s)"), line
    assert "10/100 items" in line and "ETA" in line
    p.pytest_runtest_logreport(Report("s/b2/perf"))
    assert "running longest" not in p.line()


def test_lines_are_written_every_interval_from_a_thread() -> None:
    lines: list[str] = []
    p = RunProgress(lines.append, 0.2)
    p.total = 3
    p.start()
    try:
        assert not _wait_for(lambda: lines, 0.5), "no line before the first item started"
        p.pytest_runtest_logstart("s/slow/a", None)
        assert _wait_for(lambda: any("running longest: s/slow/a" in x for x in lines), 5.0), lines
    finally:
        p.stop()


def _wait_for(condition, seconds: float) -> bool:  # noqa: ANN001
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


SLOW_TASK = """
    id: slow
    prompt: Write nothing.
    reference: "SELECT 1;"
    tests:
      - id: waits
        kind: assert
        postgres: "SELECT pg_sleep(3)"
"""


def write_subset(root: Path) -> Path:
    tasks = root / "tasks"
    (tasks / "own").mkdir(parents=True)
    (tasks / "own.yaml").write_text("name: own\nloader: yaml\ndialects: [postgres]\noptions:\n  dir: own\n")
    (tasks / "own" / "slow.yaml").write_text(textwrap.dedent(SLOW_TASK))
    return tasks


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--plsql-model=reference",
         "--plsql-dialect=postgres", "--plsql-cache", str(tmp_path / "cache"), *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_long_item_shows_life_in_the_terminal(tmp_path: Path, workers: str) -> None:
    tasks = write_subset(tmp_path)
    proc = run(tmp_path, f"--plsql-tasks={tasks}", "--subset", "own,smoke", "--plsql-progress=1", "-n", workers)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    lines = [x for x in proc.stdout.splitlines() if x.startswith("plsql tests: ")]
    assert any("running longest: own/slow/waits (" in x for x in lines), proc.stdout[-3000:]
    assert all(x.split()[2].split("/")[1] == "88" for x in lines)  # 87 smoke items and the slow one
    # Quiet when asked.
    proc = run(tmp_path, f"--plsql-tasks={tasks}", "--subset", "own", "--plsql-progress=0", "-n", "0")
    assert proc.returncode == 0 and "plsql tests: " not in proc.stdout


def test_a_bad_interval_is_one_usage_error(tmp_path: Path) -> None:
    proc = run(tmp_path, "--subset", "smoke", "--plsql-progress=-1", "--collect-only")
    assert proc.returncode != 0
    assert "--plsql-progress must be 0 (none) or a number of seconds" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr

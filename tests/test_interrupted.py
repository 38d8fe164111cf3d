"""An interrupted run says so everywhere: summary, results header, HTML report, JUnit; and makes no
leaderboard entry, even with ``--allow-noncomparable``.

Ctrl-C and a killed controller are tested on real runs: the run waits inside the generation hook
of a chosen task (a ``conftest.py`` that touches a file and sleeps), the test signals it there.
The killed run is stopped before its database starts, so no server is left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_plsqlbench.cli import main
from pytest_plsqlbench.reporting.merge import merge_documents
from pytest_plsqlbench.reporting.render import html, markdown
from pytest_plsqlbench.results import build_document, read_document, write_document
from pytest_plsqlbench.results.collector import NOT_FINISHED
from pytest_plsqlbench.summary import summary_lines

from test_results import HEADER, PAPER, sample_tasks
from test_results_e2e import CONFTEST, _env, smoke_run

#: Waits in the generation hook of the task named in block.txt, after saying so in blocked.txt.
BLOCKING_CONFTEST = (
    CONFTEST
    + '''

_plain_generate = pytest_plsql_generate
BLOCK = (Path(__file__).parent / "block.txt").read_text().strip()


def pytest_plsql_generate(config, task, turn, history, sample):
    if task.id == BLOCK:
        (Path(__file__).parent / "blocked.txt").write_text("waiting")
        import time

        time.sleep(120)
    return _plain_generate(config, task, turn, history, sample)
'''
)

PAPER_MBPP = {"paper": {"leaderboard": "mbpp", "split": "dev", "comparable_metric": "suite_pass"}}


def start_blocking_run(folder: Path, block: str, *args: str) -> subprocess.Popen[str]:
    (folder / "conftest.py").write_text(BLOCKING_CONFTEST)
    (folder / "overrides.json").write_text("{}")
    (folder / "block.txt").write_text(block)
    cmd = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--subset", "smoke", "--plsql-model=reference",
        "--plsql-dialect=postgres", "-n", "0", f"--plsql-results={folder / 'r.json'}",
        f"--junitxml={folder / 'junit.xml'}", *args,
    ]
    return subprocess.Popen(
        cmd, cwd=folder, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, preexec_fn=ctrl_c_answered,
    )


def ctrl_c_answered() -> None:
    """In the child before its exec: SIGINT back to its default action. A run started in the
    background by a shell without job control (``cmd &``, as some CI runners start their steps)
    inherits SIGINT ignored, and a Ctrl-C test would then wait for nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {path.name}:\n{proc.stdout.read() if proc.stdout else ''}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"no {path.name} after {timeout}s")
        time.sleep(0.2)


def leaderboard(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["leaderboard", str(path), "--method", "m", "--allow-noncomparable", "-o", str(path.with_suffix(".lb"))])
    return code, capsys.readouterr().err


# --------------------------------------------------------------------------- a killed controller
@pytest.mark.slow
def test_a_killed_run_leaves_a_results_file_that_says_it_did_not_finish(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = start_blocking_run(tmp_path, "clamp_value", "-k", "clamp_value")
    try:
        wait_for(tmp_path / "blocked.txt", proc)
        os.killpg(proc.pid, signal.SIGKILL)  # nothing of the run's own code runs after this
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    doc = read_document(tmp_path / "r.json")  # a valid document, not a half-written file
    assert doc["header"]["interrupted"] == NOT_FINISHED
    assert doc["header"]["subsets"] == ["smoke"] and doc["tasks"] == []
    assert any(line.startswith(f"INTERRUPTED ({NOT_FINISHED})") for line in summary_lines(doc))
    code, err = leaderboard(tmp_path / "r.json", capsys)
    assert code == 2 and "interrupted" in err and not (tmp_path / "r.lb").exists()


def test_a_results_path_from_an_earlier_run_is_replaced_when_the_run_starts(tmp_path: Path) -> None:
    """The early write happens at session start: a stale complete file cannot outlive a killed run."""
    from types import SimpleNamespace

    from pytest_plsqlbench.results import ResultsCollector
    from pytest_plsqlbench.settings import Settings

    path = tmp_path / "r.json"
    write_document(build_document(HEADER, sample_tasks(), PAPER), path)
    settings = Settings.of(subsets=("mbpp",), results=path)
    config = SimpleNamespace(stash={}, getoption=lambda name, default=None: default, getini=lambda name: None)
    collector = ResultsCollector(config, settings, {})  # type: ignore[arg-type]
    collector.pytest_sessionstart(SimpleNamespace())  # type: ignore[arg-type]
    doc = read_document(path)
    assert doc["header"]["interrupted"] == NOT_FINISHED and doc["tasks"] == []


# --------------------------------------------------------------------------- Ctrl-C
@pytest.mark.slow
def test_ctrl_c_marks_the_summary_results_and_junit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proc = start_blocking_run(tmp_path, "clamp_value", "-k", "caesar_shift or clamp_value")
    try:
        wait_for(tmp_path / "blocked.txt", proc)  # caesar_shift has run
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 2, out
    doc = read_document(tmp_path / "r.json")
    header = doc["header"]
    assert header["interrupted"] == "interrupted by the user (Ctrl-C)"
    assert header["items_collected"] == 8  # caesar_shift's 4 tests and clamp_value's 4
    assert [t["task_id"] for t in doc["tasks"]] == ["caesar_shift"]
    assert "PLSQLBench summary (INTERRUPTED" in out
    assert "INTERRUPTED (interrupted by the user (Ctrl-C)): results for 1 task(s), 4 of 8 collected items" in out
    assert "as on the leaderboard" not in out
    props = junit_suite_properties(tmp_path / "junit.xml")
    assert props["plsql.interrupted"] == "interrupted by the user (Ctrl-C)"
    code, err = leaderboard(tmp_path / "r.json", capsys)
    assert code == 2 and "interrupted by the user" in err and "--allow-noncomparable" in err


# --------------------------------------------------------------------------- -x / --maxfail
@pytest.mark.slow
@pytest.mark.parametrize("workers", ["2", "0"])
def test_stopping_at_the_first_failure_is_an_interrupted_run(workers: str, capsys: pytest.CaptureFixture[str]) -> None:
    run = smoke_run("-x", "-n", workers)
    header = run["doc"]["header"]
    assert header["interrupted"].startswith("stopped early: stopping after 1 failures"), header["interrupted"]
    assert header["interrupted"].endswith("(-x/--maxfail)")
    assert "INTERRUPTED (stopped early" in run["stdout"]
    assert junit_suite_properties(run["junit"])["plsql.interrupted"] == header["interrupted"]
    page = html(run["doc"])
    assert 'id="interrupted"' in page and "stopped early" in page
    code, err = leaderboard(run["results"], capsys)
    assert code == 2 and "stopped early" in err


@pytest.mark.slow
def test_a_run_to_the_end_is_not_interrupted() -> None:
    run = smoke_run()
    assert run["doc"]["header"]["interrupted"] is None
    assert run["doc"]["header"]["items_collected"] == sum(len(t["tests"]) for t in run["doc"]["tasks"])
    assert "INTERRUPTED" not in run["stdout"]
    assert "plsql.interrupted" not in junit_suite_properties(run["junit"])


def junit_suite_properties(path: Path) -> dict[str, str]:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    props = suite.find("properties")
    return {p.get("name", ""): p.get("value", "") for p in (props if props is not None else [])}


# --------------------------------------------------------------------------- documents
def interrupted_document(reason: str = "interrupted by the user (Ctrl-C)") -> dict[str, Any]:
    header = {**HEADER, "dialect": "oracle", "assertions": "published", "interrupted": reason, "items_collected": 40}
    return build_document(header, sample_tasks(), PAPER)


def test_leaderboard_refuses_an_interrupted_run_even_with_allow_noncomparable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.json"
    whole = build_document({**HEADER, "dialect": "oracle", "assertions": "published"}, sample_tasks(), PAPER)
    write_document(whole, path)
    assert leaderboard(path, capsys)[0] == 0  # the same run, not interrupted, makes an entry
    write_document(interrupted_document(), path)
    code, err = leaderboard(path, capsys)
    assert code == 2 and "this run was interrupted (interrupted by the user (Ctrl-C))" in err


def test_summary_and_reports_mark_an_interrupted_run_and_leave_out_the_overall() -> None:
    doc = interrupted_document()
    lines = summary_lines(doc)
    mark = "INTERRUPTED (interrupted by the user (Ctrl-C)): results for 5 task(s), 16 of 40 collected items"
    assert lines[1].startswith(mark) and lines[-1] == lines[1]
    assert not [line for line in lines if "as on the leaderboard" in line]
    assert summary_lines(doc, -1)[0].startswith(mark)  # -q too
    assert [line for line in summary_lines({**doc, "header": HEADER}) if "as on the leaderboard" in line]
    page = html(doc)
    assert '<p id="interrupted" class="interrupted">' in page and "Development overall" not in page
    assert "**INTERRUPTED**" in markdown(doc)
    assert 'id="interrupted"' not in html({**doc, "header": HEADER})


def test_a_merge_with_an_interrupted_part_is_interrupted() -> None:
    tasks = sample_tasks()
    mbpp = [t for t in tasks if t["subset"] == "mbpp"]
    s2mt = [t for t in tasks if t["subset"] == "s2mt"]
    a = build_document({**HEADER, "interrupted": None, "items_collected": 10}, mbpp, PAPER)
    b = build_document({**HEADER, "interrupted": "stopped early: x", "items_collected": 5}, s2mt, PAPER)
    merged = merge_documents([("a.json", a), ("b.json", b)])
    assert merged["header"]["interrupted"] == "b.json: stopped early: x"
    assert merged["header"]["items_collected"] == 15
    clean = merge_documents([("a.json", a), ("b.json", {**b, "header": {**b["header"], "interrupted": None}})])
    assert clean["header"]["interrupted"] is None


def test_the_document_of_a_run_stopped_by_pytest_exit_names_the_reason() -> None:
    from pytest_plsqlbench.results.collector import interrupt_reason

    assert interrupt_reason(KeyboardInterrupt()) == "interrupted by the user (Ctrl-C)"
    assert interrupt_reason(pytest.Session.Interrupted("stopping after 2 failures")) == (
        "stopped early: stopping after 2 failures (-x/--maxfail)"
    )
    assert interrupt_reason(pytest.Session.Interrupted("[gw0] node down: received keyboard-interrupt")).startswith(
        "interrupted by the user (Ctrl-C)"
    )
    with pytest.raises(pytest.exit.Exception) as info:
        pytest.exit("the database went away")
    assert interrupt_reason(info.value) == "stopped: the database went away"




def test_maxfail_reached_at_the_last_item_is_not_an_interruption() -> None:
    """-x stops pytest only if items remain: a run whose last item was its first failure ran to the end."""
    from types import SimpleNamespace

    from pytest_plsqlbench.results import ResultsCollector
    from pytest_plsqlbench.results.record import TestOutcome
    from pytest_plsqlbench.settings import Settings

    def finish(collected: int, interrupted: str | None = None) -> str | None:
        config = SimpleNamespace(stash={}, getoption=lambda name, default=None: default, getini=lambda name: None)
        collector = ResultsCollector(config, Settings.of(subsets=("mbpp",)), {})  # type: ignore[arg-type]
        for n in range(3):
            collector.records[f"mbpp/m1/case-{n}"] = TestOutcome("mbpp", "m1", "m1", 1, f"case-{n}", passed=n < 2)
        session = SimpleNamespace(shouldfail="stopping after 1 failures", shouldstop=False, testscollected=collected)
        collector.interrupted = interrupted  # what pytest_keyboard_interrupt saw, under xdist
        collector.pytest_sessionfinish(session, 1)  # type: ignore[arg-type]
        return collector.document()["header"]["interrupted"]

    assert finish(3) is None
    assert finish(5) == "stopped early: stopping after 1 failures (-x/--maxfail)"
    xdist_stop = "stopped early: stopping after 1 failures (-x/--maxfail)"
    assert finish(3, xdist_stop) is None and finish(5, xdist_stop) == xdist_stop
    assert finish(3, "interrupted by the user (Ctrl-C)") == "interrupted by the user (Ctrl-C)"

"""Ctrl-C stops generation everywhere: once the controller has stopped, no worker asks the model
for another answer (issue 29, point 7)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_plsqlbench.generation.prefetch import Prefetcher

from stub_openai import StubServer
from test_generation_e2e import DIALECT, reference_responder
from test_interrupted import ctrl_c_answered


class FakeService:
    """Counts what the prefetcher asks; each answer takes a while."""

    def __init__(self) -> None:
        self.asked = 0
        self.lock = threading.Lock()

    def obtain(self, task, turn, history, sample, blocking=False):  # noqa: ANN001, ANN201
        with self.lock:
            self.asked += 1
        time.sleep(0.05)
        return None


def smoke_tasks() -> list:
    from pytest_plsqlbench.loaders.yaml_tasks import load
    from pytest_plsqlbench.manifests import load_manifest
    from pytest_plsqlbench.resources import tasks_dir
    from pytest_plsqlbench.settings import Settings

    return load(load_manifest(tasks_dir() / "smoke.yaml"), Settings.of(subsets=("smoke",)))


def test_a_prefetcher_whose_controller_is_gone_takes_no_new_work() -> None:
    service = FakeService()
    gone = threading.Event()
    p = Prefetcher(service, smoke_tasks(), concurrency=1, controller_alive=lambda: not gone.is_set())  # type: ignore[arg-type]
    p.start()
    time.sleep(0.2)
    gone.set()
    assert p.wait(5), "the threads did not end"
    asked = service.asked
    assert 0 < asked < 21  # it had begun, and it stopped long before the last task
    time.sleep(0.3)
    assert service.asked == asked


@pytest.mark.slow
@pytest.mark.parametrize("to", ["group", "controller"])
def test_ctrl_c_stops_every_worker_from_generating(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, to: str) -> None:
    """SIGINT to the whole process group (Ctrl-C in a terminal), or to the controller alone (a
    job runner cancelling the run): either way the workers stop asking."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stub-not-a-key")
    with StubServer(default=reference_responder(delay=1.0)) as stub:
        cmd = [sys.executable, "-m", "pytest", "--subset", "smoke", f"--plsql-dialect={DIALECT}",
               "--plsql-model=openai/stub", f"--plsql-api-base={stub.api_base}", "--plsql-concurrency=1",
               "--plsql-retries=0", "-n", "2", "-p", "no:cacheprovider"]
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True, preexec_fn=ctrl_c_answered)
        try:
            deadline = time.monotonic() + 300
            while stub.count < 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert stub.count >= 4, "generation never started"
            if to == "group":
                os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends: the whole group
            else:
                os.kill(proc.pid, signal.SIGINT)
            out, _ = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]
        # Requests in flight when Ctrl-C came may still arrive; then nothing more.
        time.sleep(3)
        after_exit = stub.count
        time.sleep(5)
        assert stub.count == after_exit, f"{stub.count - after_exit} request(s) after the run stopped"
        assert after_exit < 21, "every answer was generated: the interrupt did not stop generation"
        # No worker process of the run is left behind.
        with pytest.raises(ProcessLookupError):
            os.killpg(proc.pid, 0)

"""A generation killed half-way resumes from the cache without re-asking finished answers.

A subprocess prefetches N answers through the real litellm client from the stub; it is killed
(SIGKILL, no clean-up) once about half are answered. The second run must ask exactly for the
answers the cache does not hold -- the stub's request log is the proof.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from stub_openai import StubServer, echo, last_user_message

TESTS = Path(__file__).resolve().parent
N = 16

RUN = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, {tests!r})
    os.environ["OPENAI_API_KEY"] = "sk-stub-not-a-key"
    from pathlib import Path
    from stub_openai import demo_task
    from pytest_plsqlbench.generation.cache import AnswerCache
    from pytest_plsqlbench.generation.client import ModelClient
    from pytest_plsqlbench.generation.prefetch import Prefetcher
    from pytest_plsqlbench.generation.service import AnswerService
    svc = AnswerService(
        model="openai/stub", cache=AnswerCache(Path({cache!r})), run_id=sys.argv[1], concurrency=2,
        client_factory=lambda: ModelClient("openai/stub", api_base={api_base!r}, timeout=10, retries=1),
    )
    tasks = [demo_task(i) for i in range({n})]
    assert Prefetcher(svc, tasks, concurrency=2).start().wait(120)
    print("done", svc.requests, flush=True)
    """
)


def finished(cache: Path) -> set[str]:
    return {json.loads(p.read_text())["task_id"] for p in cache.rglob("*.json")}


def asked(stub: StubServer, since: int = 0) -> list[str]:
    """Task ids in the order the stub was asked for them."""
    return [last_user_message(b).split("(task ")[1].split(" ")[0] for b in stub.bodies()[since:]]


def test_killed_run_resumes_without_reasking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    with StubServer(default=echo(delay=0.25)) as stub:
        script = RUN.format(tests=str(TESTS), cache=str(cache), api_base=stub.api_base, n=N)
        proc = subprocess.Popen([sys.executable, "-c", script, "run-1"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while len(finished(cache)) < N // 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)
        first_requests = stub.count
        done = finished(cache)
        assert N // 2 <= len(done) < N, "the kill must land half-way"

        proc = subprocess.run([sys.executable, "-c", script, "run-2"], capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]
        second = asked(stub, since=first_requests)
        assert not set(second) & done, "finished answers were asked again"
        assert sorted(second) == sorted({f"T{i}" for i in range(N)} - done)
        assert finished(cache) == {f"T{i}" for i in range(N)}
        assert proc.stdout.strip() == f"done {N - len(done)}"

        # And a third run asks nothing at all.
        count = stub.count
        proc = subprocess.run([sys.executable, "-c", script, "run-3"], capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0 and proc.stdout.strip() == "done 0" and stub.count == count

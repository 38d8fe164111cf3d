"""End to end: the whole plugin with the stub server as the model (issue 4, "Done when").

Each test runs ``pytest --subset smoke --plsql-model=openai/stub --plsql-api-base=...`` in a
subprocess (the plugin is active through its pytest11 entry point) against a stub server running
in this process, and reads the stub's request log. The stub answers every turn with the task's
reference answer, so the runs score as the reference would and "identical results" means
something.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from stub_openai import Action, StubServer, last_user_message, ok

REPO = Path(__file__).resolve().parent.parent
SMOKE = REPO / "tasks" / "smoke"
DIALECT = "postgres"

pytestmark = pytest.mark.slow

#: Writes whether litellm was imported into this process, for every process of a run.
PROBE_CONFTEST = """
import os, sys
def pytest_unconfigure(config):
    wid = getattr(config, "workerinput", {}).get("workerid", "main")
    with open(os.path.join(os.environ["PLSQL_PROBE_DIR"], wid), "w") as fh:
        fh.write("1" if "litellm" in sys.modules else "0")
"""


def _per_dialect(value: Any) -> Any:
    return value.get(DIALECT) if isinstance(value, dict) else value


def smoke_turns() -> list[tuple[str, int, str, str | None]]:
    """``(task id, turn, prompt, reference)`` of every smoke task turn in the test dialect."""
    out = []
    for path in sorted(SMOKE.glob("*.yaml")):
        raw = yaml.safe_load(path.read_text())
        turns = raw.get("turns") or [raw]
        for index, turn in enumerate(turns, 1):
            prompt = _per_dialect(turn.get(f"prompt_{DIALECT}", turn.get("prompt")))
            out.append((raw["id"], index, prompt.strip(), _per_dialect(turn.get("reference"))))
    return out


def reference_responder(delay: float = 0.0):
    """Answer each request with the reference answer of the turn its last user message asks for."""
    turns = smoke_turns()

    def respond(body: Mapping[str, Any]) -> Action:
        asked = last_user_message(body)
        for _, _, prompt, reference in sorted(turns, key=lambda t: -len(t[2])):
            if prompt and prompt in asked:
                return ok(reference or "", delay=delay)
        return ok("-- no reference found", delay=delay)

    return respond


def asked_turns(stub: StubServer, since: int = 0) -> list[tuple[str, int]]:
    turns = smoke_turns()
    out = []
    for body in stub.bodies()[since:]:
        asked = last_user_message(body)
        match = [(t, i) for t, i, p, _ in sorted(turns, key=lambda t: -len(t[2])) if p in asked]
        out.append(match[0] if match else ("?", 0))
    return out


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch):
    if not (REPO / "pytest_plsqlbench" / "plugin.py").exists() or not (REPO / "tasks" / "smoke.yaml").exists():
        pytest.fail("the core plugin and the smoke subset are needed for the end-to-end generation tests")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stub-not-a-key")
    with StubServer(default=reference_responder()) as server:
        yield server


@pytest.fixture
def probe(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = pytester.path / "probe"
    directory.mkdir()
    monkeypatch.setenv("PLSQL_PROBE_DIR", str(directory))
    pytester.makeconftest(PROBE_CONFTEST)
    return directory


def litellm_imported(probe: Path) -> dict[str, bool]:
    return {p.name: p.read_text() == "1" for p in probe.iterdir()}


def run(pytester: pytest.Pytester, stub: StubServer, *args: str, results: str | None = None) -> Any:
    extra = [f"--plsql-results={results}"] if results else []
    return pytester.runpytest_subprocess(
        "--subset", "smoke", f"--plsql-dialect={DIALECT}", "--plsql-model=openai/stub",
        f"--plsql-api-base={stub.api_base}", "-p", "no:cacheprovider", *extra, *args, timeout=600,
    )


def cached_turns(cache: Path) -> set[tuple[str, int]]:
    """``(task id, turn)`` of the answer records in ``cache`` (not its hidden lock/progress files)."""
    out = set()
    for path in cache.rglob("*.json"):
        if not any(part.startswith(".") for part in path.relative_to(cache).parts):
            record = json.loads(path.read_text())
            out.add((record["task_id"], record["turn"]))
    return out


def outcomes(path: Path) -> dict[str, Any]:
    """What a run concluded, without timings and timestamps."""
    doc = json.loads(path.read_text())
    tasks = {
        t["task_id"]: [(x.get("turn"), x.get("test_id"), x.get("passed"), x.get("failure_class")) for x in t["tests"]]
        for t in doc["tasks"]
    }
    # Usage legitimately differs (answers came from the model, then from the cache).
    metrics = {name: {k: v for k, v in m.items() if k != "usage"} for name, m in doc["subsets"].items()}
    return {"subsets": metrics, "tasks": tasks}


def test_one_request_per_task_turn_then_none(pytester: pytest.Pytester, stub: StubServer, probe: Path) -> None:
    n_turns = len(smoke_turns())
    first = run(pytester, stub, "-n", "2", results="r1.json")
    assert first.ret == 0, first.stdout.str()[-3000:]
    assert stub.count == n_turns
    assert sorted(asked_turns(stub)) == sorted((t, i) for t, i, _, _ in smoke_turns())  # each turn exactly once
    imported = litellm_imported(probe)
    # The controller asks for the first answer itself (the fail-fast check, see preflight.py);
    # the workers ask for the rest -- still each turn exactly once.
    assert imported["main"] is True and (imported["gw0"] or imported["gw1"])
    assert "UserWarning" not in first.stdout.str()  # litellm's import warnings are silenced

    second = run(pytester, stub, "-n", "2", results="r2.json")
    assert second.ret == 0, second.stdout.str()[-3000:]
    assert stub.count == n_turns  # zero requests the second time
    assert not any(litellm_imported(probe).values())  # ... and not even litellm's import
    assert outcomes(pytester.path / "r1.json") == outcomes(pytester.path / "r2.json")
    doc = json.loads((pytester.path / "r2.json").read_text())
    usage = [a["usage"] for t in doc["tasks"] for a in t.get("answers", [])]
    assert usage and all(u.get("cached") for u in usage)


def test_cache_only_on_empty_cache_names_every_task_and_calls_nothing(
    pytester: pytest.Pytester, stub: StubServer, probe: Path
) -> None:
    result = run(pytester, stub, "-n", "2", "--plsql-cache-only", "--plsql-missing=exclude", results="r.json")
    assert stub.count == 0
    assert not any(litellm_imported(probe).values())
    doc = json.loads((pytester.path / "r.json").read_text())
    by_id = {t["task_id"]: t for t in doc["tasks"]}
    for task_id in {t for t, _, _, _ in smoke_turns()}:
        assert task_id in by_id
        assert by_id[task_id].get("excluded"), f"{task_id} is not reported as not generated"
    text = result.stdout.str()
    assert "not generated" in text
    for task_id in {t for t, _, _, _ in smoke_turns()}:
        assert task_id in text or task_id in json.dumps(doc["subsets"]), f"{task_id} is not named"


def test_reference_and_collection_runs_do_not_import_litellm(pytester: pytest.Pytester, probe: Path) -> None:
    result = pytester.runpytest_subprocess("--subset", "smoke", "--plsql-model=reference", "--collect-only",
                                           "-p", "no:cacheprovider", timeout=300)
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert litellm_imported(probe) == {"main": False}
    result = pytester.runpytest_subprocess("--subset", "smoke", "--plsql-model=reference", "-n", "2",
                                           "-p", "no:cacheprovider", timeout=600)
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert not any(litellm_imported(probe).values())


def test_killed_run_resumes_without_reasking(pytester: pytest.Pytester, stub: StubServer) -> None:
    """Kill a generating run (SIGKILL to its process group); the next completes, asking only the rest."""
    stub.default = reference_responder(delay=1.5)
    n_turns = len(smoke_turns())
    cache = pytester.path / ".plsql_cache"
    cmd = [sys.executable, "-m", "pytest", "--subset", "smoke", f"--plsql-dialect={DIALECT}",
           "--plsql-model=openai/stub", f"--plsql-api-base={stub.api_base}", "--plsql-concurrency=1",
           "-n", "2", "-p", "no:cacheprovider"]
    proc = subprocess.Popen(cmd, cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while len(cached_turns(cache) if cache.exists() else ()) < max(1, n_turns // 3) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    # Requests the killed run had in flight may still be logged by the stub (possibly as torn
    # bodies); let the log settle so they are not counted as the second run's.
    settled, before = time.monotonic(), stub.count
    while time.monotonic() - settled < 1.5:
        time.sleep(0.1)
        if stub.count != before:
            settled, before = time.monotonic(), stub.count
    done = cached_turns(cache)
    assert 0 < len(done) < n_turns, "the kill must land mid-generation"

    stub.default = reference_responder()
    result = run(pytester, stub, "-n", "2")
    assert result.ret == 0, result.stdout.str()[-3000:]
    again = asked_turns(stub, since=before)
    assert not set(again) & done, "finished answers were asked again"
    assert set(again) | done == {(t, i) for t, i, _, _ in smoke_turns()}


def test_show_prompt_prints_the_exact_messages(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--subset", "smoke", "--plsql-show-prompt", "customer_report_conversation",
                                           "-p", "no:cacheprovider", timeout=300)
    text = result.stdout.str()
    assert result.ret == 0, text[-2000:]
    assert "--- system ---" in text and "reference answer standing in" in text
    assert "Database schema (DDL):" in text


def test_a_provider_outage_never_costs_a_task(pytester: pytest.Pytester, stub: StubServer) -> None:
    """Issue 29: three runs against an unreachable endpoint (each stops, nothing scored), one more
    whose workers meet the outage on every task (``-k`` skips the start-of-run check), then the
    provider is back: every task turn is asked and scored as the model answered, none charged to it."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    base = ("--subset", "smoke", f"--plsql-dialect={DIALECT}", "--plsql-model=openai/stub", "-p", "no:cacheprovider",
            "--plsql-retries=0")
    for _ in range(3):
        offline = pytester.runpytest_subprocess(*base, f"--plsql-api-base={dead}", "-n", "0", timeout=600)
        assert offline.ret == pytest.ExitCode.USAGE_ERROR, offline.stdout.str()[-2000:]
        assert "could not be reached" in offline.stderr.str() and "nothing was scored" in offline.stderr.str()
    everywhere = pytester.runpytest_subprocess(*base, f"--plsql-api-base={dead}", "-n", "2", "-k", "not no_such_test",
                                               "--plsql-results=down.json", timeout=600)
    assert everywhere.ret != 0, everywhere.stdout.str()[-2000:]
    down = json.loads((pytester.path / "down.json").read_text())
    assert {a["status"] for t in down["tasks"] for a in t["answers"]} == {"error"}
    assert {x["failure_class"] for t in down["tasks"] for x in t["tests"]} == {"infrastructure"}
    cache = pytester.path / ".plsql_cache"
    assert cached_turns(cache) == set()  # no outage is an answer

    back = run(pytester, stub, "-n", "2", results="back.json")
    assert back.ret == 0, back.stdout.str()[-3000:]
    assert sorted(asked_turns(stub)) == sorted((t, i) for t, i, _, _ in smoke_turns())  # each turn, once
    doc = json.loads((pytester.path / "back.json").read_text())
    answers = [a for t in doc["tasks"] for a in t["answers"]]
    assert answers and {a["status"] for a in answers} == {"ok"} and all(not a["usage"].get("cached") for a in answers)
    assert {x["failure_class"] for t in doc["tasks"] for x in t["tests"]} == {"passed"}  # the stub gives the reference
    reference = pytester.runpytest_subprocess("--subset", "smoke", f"--plsql-dialect={DIALECT}", "--plsql-model=reference",
                                              "-p", "no:cacheprovider", "-n", "2", "--plsql-results=ref.json", timeout=600)
    assert reference.ret == 0
    assert outcomes(pytester.path / "back.json")["tasks"] == outcomes(pytester.path / "ref.json")["tasks"]
    # The cache now holds the run's answers (and no outage): exported, they score the same.
    from pytest_plsqlbench.cli import main as cli_main

    exported = pytester.path / "answers.jsonl"
    assert cli_main(["answers", "export", "--cache", str(cache), "-o", str(exported)]) == 0
    assert len(exported.read_text().splitlines()) == len(smoke_turns())
    rescored = pytester.runpytest_subprocess("--subset", "smoke", f"--plsql-dialect={DIALECT}", "-p", "no:cacheprovider",
                                             f"--plsql-answers={exported}", "-n", "2", "--plsql-results=again.json",
                                             timeout=600)
    assert rescored.ret == 0
    assert outcomes(pytester.path / "again.json") == outcomes(pytester.path / "back.json")

"""The answer cache: keys, readable records, atomic writes, corrupt entries, many writers."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_plsqlbench.generation.cache import AnswerCache, Record, Request

from stub_openai import StubServer, last_user_message, ok

TESTS = Path(__file__).resolve().parent


def req(**kw) -> Request:
    base = {"model": "openai/stub", "messages": ({"role": "user", "content": "hi"},), "temperature": 0.0,
            "max_tokens": 8192, "sample": 0, "task_id": "Mbpp/2", "subset": "mbpp", "turn": 1}
    base.update(kw)
    return Request(**base)  # type: ignore[arg-type]


def rec(r: Request, **kw) -> Record:
    base = {"key": r.key, "status": "ok", "raw": "```sql\nBEGIN NULL; END;\n```", "code": "BEGIN NULL; END;",
            "usage": {"prompt_tokens": 3}, "run_id": "run-1"}
    base.update(kw)
    return Record(**base)  # type: ignore[arg-type]


def test_key_covers_model_messages_params_sample_and_task() -> None:
    r = req()
    assert len(r.key) == 64 and r.key == req().key
    changes = ({"model": "openai/other"}, {"messages": ({"role": "user", "content": "hi!"},)},
               {"temperature": 0.2}, {"max_tokens": 100}, {"sample": 1},
               # Two tasks sharing a prompt are still two independent generations.
               {"task_id": "Mbpp/3"}, {"subset": "other"}, {"turn": 2})
    for change in changes:
        assert req(**change).key != r.key, change


def test_record_round_trip_is_one_readable_json_file(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path)
    r = req()
    path = cache.write(r, rec(r))
    assert path.parent == tmp_path / "openai-stub" / "mbpp"
    assert path.name.startswith("Mbpp-2.t1.s0.") and path.suffix == ".json"
    doc = json.loads(path.read_text())
    assert doc["task_id"] == "Mbpp/2" and doc["code"] == "BEGIN NULL; END;" and doc["raw"].startswith("```")
    assert doc["messages"] == [{"role": "user", "content": "hi"}] and doc["params"]["max_tokens"] == 8192
    assert "\n  " in path.read_text()  # indented for people
    back = cache.read(r)
    assert back is not None and back.code == "BEGIN NULL; END;" and back.run_id == "run-1"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary files left


@pytest.mark.parametrize(
    "content",
    ['{"format": 1, "key": "', "", "[]", '{"format": 999}', "not json at all"],
    ids=["torn", "empty", "list", "future-format", "garbage"],
)
def test_corrupt_entry_counts_as_missing_and_is_logged(
    tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    cache = AnswerCache(tmp_path)
    r = req()
    cache.path(r).parent.mkdir(parents=True)
    cache.path(r).write_text(content)
    with caplog.at_level(logging.WARNING, logger="pytest_plsqlbench.generation.cache"):
        assert cache.read(r) is None
    assert "corrupt entry" in caplog.text


def test_entry_with_another_key_is_not_trusted(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path)
    r = req()
    cache.write(r, rec(r, key="0" * 64))
    assert cache.read(r) is None


def test_regeneration_policy_failed_empty_retry_eligible() -> None:
    r = req()
    assert rec(r).regenerate_reason() is None
    assert "failed" in (rec(r, status="error", code=None, error="boom").regenerate_reason() or "")
    assert rec(r, code="  \n").regenerate_reason() == "empty answer"
    assert rec(r, retry_eligible=True).regenerate_reason() == "retry-eligible"


def test_failed_write_keeps_the_previous_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = AnswerCache(tmp_path)
    r = req()
    cache.write(r, rec(r, code="OLD"))

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        cache.write(r, rec(r, code="NEW"))
    monkeypatch.undo()
    assert cache.read(r).code == "OLD"  # type: ignore[union-attr]
    assert len(list(cache.path(r).parent.iterdir())) == 1


def test_killed_writer_leaves_no_torn_entry(tmp_path: Path) -> None:
    """SIGKILL a process rewriting large records in a loop: every record left is whole."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        from pathlib import Path
        from test_generation_cache import req, rec
        from pytest_plsqlbench.generation.cache import AnswerCache
        cache = AnswerCache(Path({str(tmp_path)!r}))
        print("ready", flush=True)
        i = 0
        while True:
            r = req(sample=i % 4)
            # Many small pieces: json.dump writes them one by one, so a kill lands mid-record.
            cache.write(r, rec(r, raw="x" * 100_000 + str(i), code=str(i), usage={{"pieces": ["y" * 50] * 20_000}}))
            i += 1
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    cache = AnswerCache(tmp_path)
    found = [cache.read(req(sample=s)) for s in range(4)]
    assert all(r is not None for r in found)
    assert all(len(r.usage["pieces"]) == 20_000 for r in found if r is not None)
    for path in tmp_path.rglob("*.json"):
        json.loads(path.read_text())  # every visible entry parses


WORKER = textwrap.dedent(
    """
    import json, random, sys, urllib.request
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from stub_openai import demo_task
    from pytest_plsqlbench.generation.cache import AnswerCache
    from pytest_plsqlbench.generation.client import Completion
    from pytest_plsqlbench.generation.service import AnswerService

    class HttpClient:
        # The stub over plain HTTP, without litellm's import cost: this test is about the cache.
        def complete(self, messages):
            body = json.dumps({{"model": "stub", "messages": list(messages)}}).encode()
            rq = urllib.request.Request({url!r} + "/chat/completions", body, {{"Content-Type": "application/json"}})
            with urllib.request.urlopen(rq, timeout=30) as resp:
                reply = json.load(resp)
            return Completion(reply["choices"][0]["message"]["content"], "stop", {{"model": "openai/stub"}})

    svc = AnswerService(model="openai/stub", cache=AnswerCache(Path({cache!r})), run_id="run-shared",
                        client_factory=HttpClient, concurrency=4)
    tasks = [demo_task(i) for i in range(20)]
    random.Random(int(sys.argv[1])).shuffle(tasks)
    answers = {{t.id: svc.obtain(t, 1, ()).code for t in tasks}}
    print(json.dumps({{"requests": svc.requests, "answers": answers}}))
    """
)


def test_eight_processes_share_one_request_per_key(tmp_path: Path) -> None:
    """Eight processes ask for the same 20 answers in different orders: 20 requests in total."""
    def answer(body: dict) -> object:
        return ok(f"-- answer to: {last_user_message(body)}", delay=0.05)

    with StubServer(default=answer) as stub:
        script = WORKER.format(tests=str(TESTS), url=stub.api_base, cache=str(tmp_path / "cache"))
        procs = [subprocess.Popen([sys.executable, "-c", script, str(i)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for i in range(8)]
        results = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err[-2000:]
            results.append(json.loads(out.strip().splitlines()[-1]))
        assert stub.count == 20
        prompts = [last_user_message(b) for b in stub.bodies()]
        assert len(set(prompts)) == 20
    assert sum(r["requests"] for r in results) == 20
    assert all(r["answers"] == results[0]["answers"] for r in results)
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 20


def test_unwritable_cache_still_answers(tmp_path: Path) -> None:
    """A read-only cache folder degrades to no sharing, not to a crash."""
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / ".locks").write_text("not a folder")  # mkdir fails like on a read-only disk
    cache = AnswerCache(tmp_path / "ro")
    with cache.lock(req()) as held:
        assert held is True

"""The real litellm client over real HTTP against the stub server: answers, retries, failures.

Nothing in litellm is patched: the stub speaks the OpenAI protocol on 127.0.0.1 and litellm talks
to it as it would to a provider (``openai/<name>`` with ``api_base``). Backoff is shortened through
the client's own parameters so the suite stays fast; Retry-After is honoured as sent.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_plsqlbench.generation.cache import AnswerCache
from pytest_plsqlbench.generation.client import ModelClient, ProviderError, parse_retry_after
from pytest_plsqlbench.generation.service import AnswerService

from stub_openai import StubServer, demo_task, error, fenced, malformed, ok, slow

MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Write p."}]


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stub-not-a-key")
    with StubServer() as server:
        yield server


def client(stub: StubServer, **kw) -> ModelClient:
    kw.setdefault("timeout", 5.0)
    kw.setdefault("retries", 3)
    kw.setdefault("backoff_base", 0.01)
    return ModelClient("openai/stub", api_base=stub.api_base, **kw)


def recording(slept: list[float]):
    """A sleep that really sleeps and records how long it was asked to."""

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        time.sleep(seconds)

    return sleep


def service(stub: StubServer, tmp_path: Path, **kw) -> AnswerService:
    ckw = {k: kw.pop(k) for k in list(kw) if k in ("timeout", "retries", "backoff_base", "sleep")}
    return AnswerService(model="openai/stub", cache=AnswerCache(tmp_path / "cache"), run_id="run-1",
                         client_factory=lambda: client(stub, **ckw), **kw)


def test_normal_answer_with_usage(stub: StubServer) -> None:
    stub.push(ok("CREATE OR REPLACE PROCEDURE p IS BEGIN NULL; END;\n/", prompt_tokens=120, completion_tokens=30))
    completion = client(stub).complete(MESSAGES)
    assert completion.text.startswith("CREATE OR REPLACE PROCEDURE p")
    u = completion.usage
    assert (u["prompt_tokens"], u["completion_tokens"], u["attempts"]) == (120, 30, 1)
    assert u["cost_usd"] is None  # openai/stub has no price in litellm's map
    assert u["latency_s"] >= 0 and u["model"] == "openai/stub"
    assert u["cost_map"] == "local" and u["litellm_version"]
    body = stub.bodies()[0]
    assert body["messages"] == MESSAGES and body["temperature"] == 0.0
    assert stub.count == 1


def test_cost_from_litellm_cost_map(stub: StubServer) -> None:
    """A priced model string gets its cost from the installed litellm's bundled map."""
    stub.push(ok("BEGIN NULL; END;", prompt_tokens=1000, completion_tokens=500))
    completion = ModelClient("openai/gpt-5.4", api_base=stub.api_base, timeout=5, retries=0).complete(MESSAGES)
    assert completion.usage["cost_usd"] == pytest.approx(0.01)


def test_fenced_answer_is_extracted_raw_kept(stub: StubServer, tmp_path: Path) -> None:
    code = "CREATE OR REPLACE FUNCTION f RETURN NUMBER IS BEGIN RETURN 1; END;\n/"
    stub.push(fenced(code, lang="sql"))
    answer = service(stub, tmp_path).obtain(demo_task(1), 1, ())
    assert answer is not None and answer.status == "ok"
    assert answer.code == code
    assert answer.raw is not None and answer.raw.startswith("```sql")


def test_prose_around_code(stub: StubServer, tmp_path: Path) -> None:
    code = "CREATE OR REPLACE PROCEDURE p IS\nBEGIN\n  DBMS_OUTPUT.PUT_LINE('x');\nEND;\n/"
    stub.push(ok(f"Here is the procedure you asked for:\n\n{code}\n\nThis procedure prints x.\nHope it helps!"))
    answer = service(stub, tmp_path).obtain(demo_task(1), 1, ())
    assert answer is not None and answer.code == code
    assert "Hope it helps" in (answer.raw or "")


def test_429_then_success_honours_retry_after(stub: StubServer) -> None:
    stub.push(error(429, retry_after=1), ok("BEGIN NULL; END;"))
    slept: list[float] = []
    completion = client(stub, backoff_base=0.01, sleep=recording(slept)).complete(MESSAGES)
    assert completion.text == "BEGIN NULL; END;"
    assert completion.usage["attempts"] == 2
    assert stub.count == 2
    first, second = stub.requests[0], stub.requests[1]
    # The backoff alone would be ~0.01 s: the wait is exactly the server's Retry-After.
    assert slept == [1.0]
    assert second.started - first.started >= 0.95


def test_500_forever_is_an_error_after_bounded_retries(stub: StubServer, tmp_path: Path) -> None:
    stub.default = error(500)
    slept: list[float] = []
    svc = service(stub, tmp_path, retries=2, backoff_base=0.05, sleep=recording(slept))
    answer = svc.obtain(demo_task(1), 1, ())
    assert answer is not None and answer.status == "error" and answer.code is None
    assert "InternalServerError" in (answer.error or "")
    assert stub.count == 3  # 1 + retries, no hidden retries inside litellm or the OpenAI SDK
    # Bounded: two waits, each within the configured exponential ceiling (0.05 s, then 0.1 s).
    assert len(slept) == 2 and 0.025 <= slept[0] <= 0.05 and 0.05 <= slept[1] <= 0.1, slept
    assert answer.usage["attempts"] == 3 and answer.usage["status"] == "error"


def test_non_retryable_error_is_not_retried(stub: StubServer) -> None:
    stub.default = error(400)
    with pytest.raises(ProviderError) as info:
        client(stub, retries=5).complete(MESSAGES)
    assert not info.value.transient and info.value.attempts == 1
    assert stub.count == 1


def test_slow_reply_past_the_timeout_is_retried(stub: StubServer) -> None:
    stub.push(slow(8.0), ok("BEGIN NULL; END;"))
    completion = client(stub, timeout=0.5, retries=2).complete(MESSAGES)
    assert completion.text == "BEGIN NULL; END;" and completion.usage["attempts"] == 2
    first, second = stub.requests[0], stub.requests[1]
    assert second.started - first.started < 6  # gave up on the 8 s reply, did not wait for it


def test_slow_forever_is_a_timeout_error_in_bounded_time(stub: StubServer) -> None:
    stub.default = slow(8.0)
    with pytest.raises(ProviderError) as info:
        client(stub, timeout=0.4, retries=1).complete(MESSAGES)
    assert info.value.transient and "Timeout" in str(info.value)
    assert stub.count == 2
    first, second = stub.requests[0], stub.requests[1]
    # Neither 8 s reply was waited for (measured from the requests, not including litellm's import).
    assert second.started - first.started < 6 and time.time() - second.started < 6


def test_malformed_json_is_retried_then_reported(stub: StubServer) -> None:
    stub.push(malformed(), ok("BEGIN NULL; END;"))
    assert client(stub).complete(MESSAGES).usage["attempts"] == 2
    stub.default = malformed()
    with pytest.raises(ProviderError) as info:
        client(stub, retries=1).complete(MESSAGES)
    assert info.value.transient and info.value.attempts == 2


def test_empty_reply_is_ok_not_an_error(stub: StubServer, tmp_path: Path) -> None:
    """An empty answer is the model's failure (scored by the tests), not an infrastructure error."""
    stub.push(ok(""))
    answer = service(stub, tmp_path).obtain(demo_task(1), 1, ())
    assert answer is not None and answer.status == "ok" and answer.code == ""


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after(None) is None


def test_only_the_model_endpoint_is_contacted(tmp_path: Path) -> None:
    """Importing litellm and generating opens no connection except to the stub (offline cost map)."""
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        os.environ["OPENAI_API_KEY"] = "sk-stub"
        for var in ("LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_OFFLINE_MODE"):
            os.environ.pop(var, None)
        seen = []
        def audit(event, args):
            if event in ("socket.connect", "socket.getaddrinfo"):
                seen.append((event, repr(args[1] if event == "socket.connect" else args[:2])))
        sys.addaudithook(audit)
        from stub_openai import StubServer, ok
        from pytest_plsqlbench.generation.client import ModelClient
        with StubServer(default=ok("BEGIN NULL; END;")) as stub:
            port = stub.port
            ModelClient("openai/stub", api_base=stub.api_base, timeout=5, retries=0).complete(
                [{{"role": "user", "content": "hi"}}])
        bad = [s for s in seen if "127.0.0.1" not in s[1] and "localhost" not in s[1]]
        assert not bad, bad
        assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
        print("OK", len(seen))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("OK")

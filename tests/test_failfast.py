"""A run that cannot work says so once, before any test runs (issue 16, "Fail fast").

Model problems (unknown model, missing key, refused key, unknown model at the provider) are one
usage error naming the fix, found with at most one request; answers files whose entries match no
task are named; ``--plsql-task`` selects by exact id.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_plsqlbench.answers import Answer
from pytest_plsqlbench.generation.progress import ProgressWriter, format_progress

from stub_openai import StubServer, error, ok

USAGE_ERROR = 4


def smoke(pytester: pytest.Pytester, *args: str, timeout: int = 300) -> pytest.RunResult:
    return pytester.runpytest_subprocess("--subset", "smoke", "-p", "no:cacheprovider", *args, timeout=timeout)


def one_error_line(result: pytest.RunResult) -> str:
    lines = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(lines) == 1, result.stderr.str()[-3000:]
    assert "Traceback" not in result.stderr.str() and "Traceback" not in result.stdout.str()
    return lines[0]


def test_unknown_model_is_a_usage_error_with_a_suggestion(pytester: pytest.Pytester) -> None:
    result = smoke(pytester, "--plsql-model=clade")
    assert result.ret == USAGE_ERROR
    line = one_error_line(result)
    assert "--plsql-model=clade" in line and "Did you mean claude" in line
    assert "passed" not in result.stdout.str() and "failed" not in result.stdout.str()


def test_missing_key_is_named(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with StubServer() as stub:
        result = smoke(pytester, "--plsql-model=openai/stub", f"--plsql-api-base={stub.api_base}", "-n", "2")
        assert stub.count == 0
    assert result.ret == USAGE_ERROR
    line = one_error_line(result)
    assert "OPENAI_API_KEY" in line and "export OPENAI_API_KEY" in line


@pytest.mark.parametrize(("status", "fix"), [(401, "the key was refused"), (404, "does not know"), (400, "check --plsql-model")])
def test_refused_requests_stop_the_run_after_one_request(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, status: int, fix: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    with StubServer(default=error(status, message="nope")) as stub:
        result = smoke(pytester, "--plsql-model=openai/stub", f"--plsql-api-base={stub.api_base}", "-n", "2")
        assert stub.count == 1  # never retried, and no second task asked
    assert result.ret == USAGE_ERROR
    line = one_error_line(result)
    assert "cannot be called" in line and fix in line
    # A configuration error is not an answer: nothing cached, so the fixed run asks again.
    cache = pytester.path / ".plsql_cache"
    assert not [p for p in cache.rglob("*.json") if ".progress" not in p.parts] if cache.exists() else True


def test_transient_errors_are_still_retried(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stub")
    with StubServer(default=ok("-- wrong")) as stub:
        stub.push(error(503))
        result = smoke(pytester, "--plsql-model=openai/stub", f"--plsql-api-base={stub.api_base}",
                       "--plsql-task=initials", "-q")
        assert stub.count == 2  # the 503, then its retry
    assert result.ret == 1  # the answer is wrong: tests fail, the run went on
    assert "pydantic" not in result.stdout.str().lower() and "UserWarning" not in result.stdout.str()


def test_plsql_task_selects_exact_ids(pytester: pytest.Pytester) -> None:
    result = smoke(pytester, "--plsql-model=reference", "--plsql-task=initials,clamp_value", "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str()[-2000:]
    items = [line for line in result.stdout.lines if line.startswith("smoke/")]
    assert items and {line.split("/")[1] for line in items} == {"initials", "clamp_value"}
    result = smoke(pytester, "--plsql-model=reference", "--plsql-task=initial")
    assert result.ret == USAGE_ERROR
    assert "no task initial (did you mean initials?)" in one_error_line(result)


def write_answers(path: Path, *ids: str) -> Path:
    path.write_text("".join(json.dumps({"task_id": i, "answer": "SELECT 1;"}) + "\n" for i in ids))
    return path


def test_answers_matching_no_task_are_an_error(pytester: pytest.Pytester) -> None:
    answers = write_answers(pytester.path / "a.jsonl", "smoke/initials", "Initials")
    result = smoke(pytester, f"--plsql-answers={answers}")
    assert result.ret == USAGE_ERROR
    line = one_error_line(result)
    assert "no entry matches a task" in line and "smoke/initials" in line and "Initials" in line


def test_answers_partly_unmatched_are_named_in_a_warning(pytester: pytest.Pytester) -> None:
    answers = write_answers(pytester.path / "a.jsonl", "initials", "smoke/initials", "nosuch")
    result = smoke(pytester, f"--plsql-answers={answers}", "--plsql-task=initials", "-q")
    text = result.stdout.str()
    assert "2 entries match no task" in text and "smoke/initials" in text and "nosuch" in text


def test_markers_are_listed_without_answers(pytester: pytest.Pytester) -> None:
    result = smoke(pytester, "--markers")
    assert result.ret == 0, result.stderr.str()[-2000:]
    assert "@pytest.mark.construct_function" in result.stdout.str()


def test_progress_line_has_rate_eta_tokens_and_cost() -> None:
    writer = ProgressWriter(None, "main", own_total=10, total=10)
    fresh = Answer(code="x", usage={"prompt_tokens": 100, "completion_tokens": 20, "cost_usd": 0.5})
    reused = Answer(code="x", usage={"prompt_tokens": 999, "completion_tokens": 999, "cost_usd": 9.0, "cached": True})
    writer.record("generated", [fresh])
    writer.record("cached", [reused])
    snap = writer.snapshot()
    assert (snap["prompt_tokens"], snap["completion_tokens"], snap["cost_usd"]) == (100, 20, 0.5)
    line = format_progress({**snap, "workers": 1}, rate=0.5)
    assert line.startswith("plsql generation: 2/10 tasks -- 1 generated, 1 cached, 0 failed")
    assert "30.0 tasks/min, ETA 16s" in line and "120 tokens, $0.50" in line


def test_oracle_without_its_driver_is_one_error(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # An importable stand-in that fails as an uninstalled package would.
    (pytester.path / "nodriver").mkdir()
    (pytester.path / "nodriver" / "oracledb.py").write_text("raise ImportError('No module named oracledb')\n")
    monkeypatch.setenv("PYTHONPATH", str(pytester.path / "nodriver"))
    result = smoke(pytester, "--plsql-dialect=oracle", "--plsql-model=reference", "-n", "2")
    assert result.ret == USAGE_ERROR
    assert "pip install 'pytest-plsqlbench[oracle]'" in one_error_line(result)


def test_container_without_docker_is_one_error(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{pytester.path}/no-docker.sock")
    result = smoke(pytester, "--plsql-db=container", "--plsql-model=reference")
    assert result.ret == USAGE_ERROR
    line = one_error_line(result)
    try:
        import testcontainers  # noqa: F401
    except ImportError:  # without the extra, that is what is missing first
        assert "pip install 'pytest-plsqlbench[container]'" in line
    else:
        assert "needs a running Docker" in line and "--plsql-dsn" in line


def test_unreachable_dsn_is_one_error(pytester: pytest.Pytester) -> None:
    result = smoke(pytester, "--plsql-dsn=postgresql://nobody@127.0.0.1:9/none?connect_timeout=2",
                   "--plsql-model=reference", "-n", "2")
    assert result.ret == USAGE_ERROR
    assert "--plsql-dsn: cannot connect to PostgreSQL" in one_error_line(result)


def test_a_provider_that_cannot_be_reached_stops_the_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """No reply at all (here: nothing listens on the port) after the first request's retries:
    one usage error, not every task waiting through the same retries to be left out."""
    import socket

    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = smoke(pytester, "--plsql-model=openai/stub", f"--plsql-api-base=http://127.0.0.1:{port}/v1",
                   "--plsql-retries=1", "-n", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    line = one_error_line(result)
    assert "could not be reached (2 attempt(s))" in line and "--plsql-api-base" in line
    assert "passed" not in result.stdout.str()

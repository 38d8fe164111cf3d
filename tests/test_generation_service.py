"""One request per key per run: the answer service and the prefetcher, over real litellm + stub."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from pytest_plsqlbench.answers import Answer
from pytest_plsqlbench.generation.cache import MAX_GENERATIONS, AnswerCache, Record
from pytest_plsqlbench.generation.client import ModelClient
from pytest_plsqlbench.generation.prefetch import Prefetcher, partition, worker_index
from pytest_plsqlbench.generation.progress import (
    ProgressReporter,
    ProgressWriter,
    classify,
    progress_dir,
    read_progress,
)
from pytest_plsqlbench.generation.prompts import rollout_exchange
from pytest_plsqlbench.generation.service import AnswerService

from stub_openai import StubServer, context_too_long, demo_task, echo, error, last_user_message, ok

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stub-not-a-key")
    with StubServer(default=echo()) as server:
        yield server


def make_service(stub: StubServer, cache_dir: Path, run_id: str = "run-1", **kw) -> AnswerService:
    retries = kw.pop("retries", 2)

    def factory() -> ModelClient:
        return ModelClient("openai/stub", api_base=stub.api_base, timeout=5, retries=retries, backoff_base=0.01)

    return AnswerService(model="openai/stub", cache=AnswerCache(cache_dir), run_id=run_id,
                         client_factory=factory, **kw)


def conversation(svc: AnswerService, task, sample: int = 0) -> list[Answer]:
    """What the core does: turn after turn, history from the model's own answers."""
    answers: list[Answer] = []
    for turn in task.turns:
        history = tuple(rollout_exchange(t, a) for t, a in zip(task.turns, answers))
        answer = svc.obtain(task, turn.index, history, sample)
        assert answer is not None
        answers.append(answer)
    return answers


TASKS = [demo_task(i, turns=1 + i % 3) for i in range(12)]
N_TURNS = sum(len(t.turns) for t in TASKS)


def test_prefetch_one_request_per_turn_then_zero(stub: StubServer, tmp_path: Path) -> None:
    stub.default = echo(delay=0.05)
    svc = make_service(stub, tmp_path, concurrency=3)
    prefetcher = Prefetcher(svc, TASKS, concurrency=3).start()
    assert prefetcher.wait(60)
    assert stub.count == N_TURNS and svc.requests == N_TURNS
    assert stub.max_in_flight <= 3
    first = {t.id: [a.code for a in conversation(svc, t)] for t in TASKS}  # the core's calls: memo hits
    assert stub.count == N_TURNS

    again = make_service(stub, tmp_path, run_id="run-2", concurrency=3)
    assert Prefetcher(again, TASKS, concurrency=3).start().wait(60)
    second = {t.id: [a.code for a in conversation(again, t)] for t in TASKS}
    assert stub.count == N_TURNS  # the second run asks nothing
    assert second == first
    cached = conversation(again, TASKS[0])[0]
    assert cached.source == "cache" and cached.usage["cached"] is True


def test_rollout_sends_the_models_own_earlier_answers(stub: StubServer, tmp_path: Path) -> None:
    task = demo_task(5, turns=3)
    answers = conversation(make_service(stub, tmp_path), task)
    bodies = stub.bodies()
    assert len(bodies) == 3
    third = bodies[2]["messages"]
    assert [m["role"] for m in third] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert third[2]["content"] == answers[0].code and third[4]["content"] == answers[1].code
    assert task.turns[0].reference not in str(third)  # never the reference answer


def test_test_asking_during_prefetch_does_not_ask_twice(stub: StubServer, tmp_path: Path) -> None:
    stub.default = echo(delay=0.3)
    svc = make_service(stub, tmp_path, concurrency=2)
    Prefetcher(svc, TASKS, concurrency=2).start()
    time.sleep(0.1)
    # The "core" wants the last task right away (not started by the prefetcher yet) and the first
    # (in flight): both come back once.
    for task in (TASKS[-1], TASKS[0]):
        conversation(svc, task)
    deadline = time.monotonic() + 30
    while svc.requests < N_TURNS and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    assert stub.count == N_TURNS
    prompts = [last_user_message(b) for b in stub.bodies()]
    assert len(prompts) == len(set(prompts))
    assert stub.max_in_flight <= 2


def test_two_workers_split_the_work_and_share_answers(stub: StubServer, tmp_path: Path) -> None:
    """Two services on one cache with one run id act as two xdist workers."""
    stub.default = echo(delay=0.05)
    workers = [make_service(stub, tmp_path, run_id="run-x", concurrency=2) for _ in range(2)]
    pre = [Prefetcher(w, TASKS, concurrency=2, worker_index=i, worker_count=2).start() for i, w in enumerate(workers)]
    # Meanwhile each "worker" runs the tests of some tasks, whoever prefetches them.
    results = [{t.id: [a.code for a in conversation(w, t)] for t in TASKS[i::2][::-1]} for i, w in enumerate(workers)]
    assert all(p.wait(60) for p in pre)
    assert stub.count == N_TURNS == sum(w.requests for w in workers)
    assert all(w.requests > 0 for w in workers)
    merged = {**results[0], **results[1]}
    assert len(merged) == len(TASKS)


def test_partition_is_deterministic_and_complete() -> None:
    shares = [partition(10, i, 3) for i in range(3)]
    assert [sum(s) for s in shares] == [4, 3, 3]
    assert all(sum(col) == 1 for col in zip(*shares))
    assert worker_index("gw7") == 7 and worker_index("main") == 0


def test_provider_error_is_final_within_the_run_and_retried_next_run(stub: StubServer, tmp_path: Path) -> None:
    stub.default = error(500)
    svc = make_service(stub, tmp_path, retries=1)
    task = demo_task(1)
    failed = svc.obtain(task, 1, ())
    assert failed is not None and failed.status == "error" and stub.count == 2
    # Another worker of the same run reads the failure instead of asking again.
    other = make_service(stub, tmp_path, retries=1)
    assert other.obtain(task, 1, ()).status == "error" and stub.count == 2  # type: ignore[union-attr]
    # The next run regenerates it (failed entries are retried), and succeeds.
    stub.default = echo()
    fresh = make_service(stub, tmp_path, run_id="run-2").obtain(task, 1, ())
    assert fresh is not None and fresh.status == "ok" and stub.count == 3


def test_empty_and_corrupt_entries_are_regenerated(
    stub: StubServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    t_empty, t_corrupt = demo_task(1), demo_task(2)
    stub.push(ok(""))
    svc = make_service(stub, tmp_path)
    assert svc.obtain(t_empty, 1, ()).code == ""  # type: ignore[union-attr]
    assert svc.obtain(t_corrupt, 1, ()).status == "ok"  # type: ignore[union-attr]
    path = svc.cache.path(svc.request(t_corrupt, 1, (), 0))
    path.write_text(path.read_text()[:40])  # torn by hand
    assert stub.count == 2
    with caplog.at_level(logging.WARNING):
        again = make_service(stub, tmp_path, run_id="run-2")
        assert again.obtain(t_empty, 1, ()).code.startswith("-- answer to")  # type: ignore[union-attr]
        assert again.obtain(t_corrupt, 1, ()).status == "ok"  # type: ignore[union-attr]
    assert stub.count == 4
    assert "corrupt entry" in caplog.text


def test_regenerate_asks_once_per_key_in_the_run(stub: StubServer, tmp_path: Path) -> None:
    task = demo_task(1)
    make_service(stub, tmp_path).obtain(task, 1, ())
    assert stub.count == 1
    regen = [make_service(stub, tmp_path, run_id="run-2", regenerate=True) for _ in range(2)]
    assert regen[0].obtain(task, 1, ()).source == "model"  # type: ignore[union-attr]
    assert regen[1].obtain(task, 1, ()).source == "model"  # type: ignore[union-attr]  # same run: read, not asked
    assert stub.count == 2


def test_cache_only_never_calls_nor_imports_litellm(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys, json
        sys.path.insert(0, {str(TESTS)!r})
        from pathlib import Path
        from stub_openai import demo_task
        from pytest_plsqlbench.generation.cache import AnswerCache
        from pytest_plsqlbench.generation.service import AnswerService
        from pytest_plsqlbench.generation.prefetch import Prefetcher
        def no_client():
            raise AssertionError("cache-only asked for a model client")
        svc = AnswerService(model="openai/stub", cache=AnswerCache(Path({str(tmp_path)!r})), run_id="r",
                            client_factory=no_client, cache_only=True)
        tasks = [demo_task(i, turns=2) for i in range(3)]
        Prefetcher(svc, tasks, steal=False).start().wait(30)
        a = svc.obtain(tasks[1], 1, ())
        print(json.dumps([a.status, a.error, "litellm" in sys.modules]))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    status, why, imported = json.loads(proc.stdout.strip().splitlines()[-1])
    assert status == "not_generated" and "demo/T1 turn 1" in why and "--plsql-cache-only" in why
    assert imported is False


def test_progress_counts_each_task_once(stub: StubServer, tmp_path: Path) -> None:
    run_dir = progress_dir(tmp_path, "run-p")
    svc = make_service(stub, tmp_path / "cache", run_id="run-p")
    writers = []
    for i in range(2):
        w = ProgressWriter(run_dir / f"gw{i}.json", f"gw{i}", 0, len(TASKS))
        p = Prefetcher(svc, TASKS, worker_index=i, worker_count=2, progress=w)
        w.own_total = p.own_total
        writers.append((w, p.start()))
    assert all(p.wait(60) for _, p in writers)
    total = read_progress(run_dir)
    assert total is not None and total["done"] == total["total"] == len(TASKS)
    assert total["generated"] == len(TASKS) and total["failed"] == 0
    assert classify([Answer(code="x", usage={"cached": True})]) == "cached"
    assert classify([Answer(code="x", usage={"cached": True}), Answer(code=None, status="error")]) == "failed"


def test_progress_reporter_prints_while_generation_runs(tmp_path: Path) -> None:
    lines: list[str] = []

    def wait_for(text: str) -> None:
        deadline = time.monotonic() + 20
        while not any(text in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert any(text in line for line in lines), lines

    writer = ProgressWriter(tmp_path / "gw0.json", "gw0", own_total=3, total=3, min_interval=0)
    reporter = ProgressReporter(tmp_path, lines.append, delay=0.05, interval=0.05, poll=0.01).start()
    writer.record("generated")
    wait_for("1/3 tasks -- 1 generated")
    writer.record("cached")
    wait_for("2/3 tasks")
    writer.record("failed")
    wait_for("3/3 tasks")
    reporter.stop(cleanup=False)
    assert lines[-1] == "plsql generation: 3/3 tasks -- 1 generated, 1 cached, 1 failed"


def test_quiet_when_generation_is_short(tmp_path: Path) -> None:
    lines: list[str] = []
    writer = ProgressWriter(tmp_path / "gw0.json", "gw0", own_total=1, total=1, min_interval=0)
    reporter = ProgressReporter(tmp_path, lines.append, delay=5, interval=5, poll=0.02).start()
    writer.record("generated")
    time.sleep(0.2)
    reporter.stop()
    assert lines == [] and not tmp_path.exists()


def test_obtain_is_thread_safe_for_one_key(stub: StubServer, tmp_path: Path) -> None:
    stub.default = echo(delay=0.2)
    svc = make_service(stub, tmp_path, concurrency=8)
    task = demo_task(9)
    out: list[str] = []
    threads = [threading.Thread(target=lambda: out.append(svc.obtain(task, 1, ()).code)) for _ in range(8)]  # type: ignore[union-attr]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stub.count == 1 and len(set(out)) == 1 and len(out) == 8


def test_samples_are_distinct_requests(stub: StubServer, tmp_path: Path) -> None:
    tasks = [demo_task(1), demo_task(2, turns=2)]
    svc = make_service(stub, tmp_path)
    assert Prefetcher(svc, tasks, samples=3).start().wait(60)
    assert stub.count == 3 * (1 + 2)
    keys = {a.cache_key for t in tasks for s in range(3) for a in conversation(svc, t, s)}
    assert len(keys) == 9 and stub.count == 9


def test_tasks_sharing_a_prompt_are_generated_and_cached_each(stub: StubServer, tmp_path: Path) -> None:
    """Identical prompts in two tasks: one request per task, and each has its own record."""
    a, b = demo_task(1), demo_task(1, subset="other")
    b = type(b)(**{**b.__dict__, "id": "T1-copy"})
    svc = make_service(stub, tmp_path)
    conversation(svc, a)
    conversation(svc, b)
    assert stub.count == 2
    again = make_service(stub, tmp_path, run_id="run-2")
    conversation(again, a)
    conversation(again, b)
    assert stub.count == 2


def test_a_prompt_the_model_cannot_take_is_its_failure_not_infrastructure(stub: StubServer, tmp_path: Path) -> None:
    """Context window exceeded (or a content-policy refusal): an empty answer, scored, not excluded."""
    stub.default = context_too_long()
    svc = make_service(stub, tmp_path, retries=3)
    answer = svc.obtain(demo_task(1), 1, ())
    assert answer is not None and answer.status == "ok" and answer.code == ""
    assert "context length" in (answer.error or "")
    assert stub.count == 1  # not retried: retrying cannot make the prompt fit


def test_regeneration_is_bounded_across_runs(stub: StubServer, tmp_path: Path) -> None:
    """The paper's policy asks again for empty answers, but not forever at temperature 0."""
    stub.default = ok("")
    task = demo_task(1)
    for run in range(1, 6):
        answer = make_service(stub, tmp_path, run_id=f"run-{run}").obtain(task, 1, ())
        assert answer is not None and answer.code == ""
    assert stub.count == MAX_GENERATIONS


def test_a_provider_failure_is_never_stored_nor_counted_however_many_runs(stub: StubServer, tmp_path: Path) -> None:
    """An outage (5xx after retries, a malformed reply) is the harness's trouble in every run that
    meets it: nothing is written as the answer, nothing counts towards the regeneration bound, and
    once the provider is back the task is asked and answered like any other."""
    from stub_openai import malformed

    task = demo_task(1)
    for run in range(1, MAX_GENERATIONS + 3):
        stub.default = error(503) if run % 2 else malformed()
        answer = make_service(stub, tmp_path, run_id=f"run-{run}", retries=0).obtain(task, 1, ())
        assert answer is not None and answer.status == "error", (run, answer)
        assert "the next run asks again" in (answer.error or "")
        only = make_service(stub, tmp_path, run_id=f"only-{run}", cache_only=True).obtain(task, 1, ())
        assert only is not None and only.status == "not_generated" and "no cached answer" in (only.error or "")
    assert stub.count == MAX_GENERATIONS + 2  # every run asked
    answer_files = [p for p in tmp_path.rglob("*.json") if not any(x.startswith(".") for x in p.relative_to(tmp_path).parts)]
    assert answer_files == []
    stub.default = echo()
    answer = make_service(stub, tmp_path, run_id="back").obtain(task, 1, ())
    assert answer is not None and answer.status == "ok" and answer.code and answer.source == "model"
    assert stub.count == MAX_GENERATIONS + 3
    (record,) = [p for p in tmp_path.rglob("*.json") if ".outages" not in p.parts and ".locks" not in p.parts]
    assert json.loads(record.read_text())["generations"] == 1


def test_an_outage_is_asked_once_per_run_but_again_by_the_next(stub: StubServer, tmp_path: Path) -> None:
    """Two processes of one run (two services, one run id): the second reads the first's note
    instead of waiting through the retries again; a later run does not read it."""
    stub.default = error(503)
    task = demo_task(1)
    first = make_service(stub, tmp_path, run_id="run-1", retries=0).obtain(task, 1, ())
    second = make_service(stub, tmp_path, run_id="run-1", retries=0).obtain(task, 1, ())
    assert first is not None and second is not None and first.status == second.status == "error"
    assert stub.count == 1 and "503" in (second.error or "")
    stub.default = echo()
    later = make_service(stub, tmp_path, run_id="run-2").obtain(task, 1, ())
    assert later is not None and later.status == "ok" and stub.count == 2
    assert not list((tmp_path / ".outages").glob("*.json"))  # the note is gone once answered


def test_an_error_record_of_an_older_version_is_asked_again_and_not_counted(stub: StubServer, tmp_path: Path) -> None:
    """Caches written before the fix hold ``status: error`` records counted up to the bound: such a
    record is asked again (not turned into the model's failure) and its count starts afresh."""
    task = demo_task(1)
    svc = make_service(stub, tmp_path, run_id="old")
    req = svc.request(task, 1, (), 0)
    svc.cache.write(req, Record(key=req.key, status="error", raw=None, code=None, error="ServiceUnavailableError: 503",
                                retry_eligible=True, run_id="old", generations=MAX_GENERATIONS))
    answer = make_service(stub, tmp_path, run_id="new").obtain(task, 1, ())
    assert answer is not None and answer.status == "ok" and stub.count == 1
    assert json.loads(svc.cache.path(req).read_text())["generations"] == 1


def test_a_reply_with_a_lone_surrogate_is_an_answer_not_a_crash(stub: StubServer, tmp_path: Path) -> None:
    """Valid JSON (``\\ud800``), not UTF-8: the answer comes back (the runner fails it as invalid);
    the next turn's request, which carries it in its history, still has a cache key."""
    stub.default = ok("SELECT 1; -- \ud800")
    answers = conversation(make_service(stub, tmp_path), demo_task(1, turns=2))
    assert [a.status for a in answers] == ["ok", "ok"] and "\ud800" in (answers[0].code or "")

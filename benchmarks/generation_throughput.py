"""Generation throughput: is prefetch latency-bound, with one worker and with two?

N single-turn tasks are answered by the stub OpenAI server (tests/stub_openai.py) with a fixed
latency L per request. With a total concurrency C the ideal wall time is N*L/C; this prints the
measured wall time divided by it (goal <= 1.15) for ``-n 1`` and ``-n 2``, side by side. The
total C is the same in both rows: ``-n 2`` runs ``--plsql-concurrency=C/2`` per worker, so the
ratio shows what splitting the work across workers costs.

Modes:
- ``prefetch``: the prefetcher itself, one process per simulated xdist worker (worker i of n
  prefetches its share while "its tests" ask for every n-th task), litellm imported before the
  clock starts (a fixed one-time cost per process, paid at the first cache miss of a real run).
- ``pytest``: the end-to-end path, ``pytest --subset <N generated tasks> --plsql-model=openai/stub
  -n 1|2`` against a cold cache, then again against the warm cache (which must make no request).

Both report the wall time and the generation window (first request in to last reply out, as the
stub saw them); the pytest wall includes start-up, litellm's import, the database and the tests.

    python benchmarks/generation_throughput.py                 # both modes, N=96 L=0.5 C=4
    python benchmarks/generation_throughput.py --mode prefetch --tasks 200 --latency 0.2 --concurrency 8
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from stub_openai import StubServer, ok

log = logging.getLogger("generation_throughput")
GOAL = 1.15

WORKER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from stub_openai import demo_task
    from pytest_plsqlbench.generation.cache import AnswerCache
    from pytest_plsqlbench.generation.client import ModelClient, load_litellm
    from pytest_plsqlbench.generation.prefetch import Prefetcher
    from pytest_plsqlbench.generation.service import AnswerService
    index, count, per_worker = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    load_litellm()
    Path({ready!r} + f".{{index}}").touch()
    while not os.path.exists({go!r}):
        time.sleep(0.005)
    svc = AnswerService(model="openai/stub", cache=AnswerCache(Path({cache!r})), run_id="bench",
                        concurrency=per_worker,
                        client_factory=lambda: ModelClient("openai/stub", api_base={api_base!r}, retries=2))
    tasks = [demo_task(i) for i in range({n})]
    Prefetcher(svc, tasks, concurrency=per_worker, worker_index=index, worker_count=count).start()
    for task in tasks[index::count]:  # the tests this worker runs
        assert svc.obtain(task, 1, ()).status == "ok"
    print(svc.requests, flush=True)
    """
)


def span(stub: StubServer, since: int) -> tuple[float, float]:
    """Wall-clock time of the first request of a run arriving and of its last reply leaving."""
    reqs = [r for r in stub.requests[since:] if r.finished is not None]
    if not reqs:
        return float("nan"), float("nan")
    return min(r.started for r in reqs), max(r.finished for r in reqs)  # type: ignore[type-var]


def window(stub: StubServer, since: int) -> float:
    """Seconds from the first request of a run arriving to its last reply leaving the stub."""
    first, last = span(stub, since)
    return last - first


def bench_prefetch(stub: StubServer, n: int, latency: float, total_c: int, workers: int) -> dict:
    per_worker = max(1, total_c // workers)
    with tempfile.TemporaryDirectory(prefix="plsql-bench-") as tmp:
        go, ready = os.path.join(tmp, "go"), os.path.join(tmp, "ready")
        script = WORKER.format(tests=str(REPO / "tests"), ready=ready, go=go, cache=os.path.join(tmp, "cache"),
                               api_base=stub.api_base, n=n)
        before = stub.count
        procs = [subprocess.Popen([sys.executable, "-c", script, str(i), str(workers), str(per_worker)],
                                  stdout=subprocess.PIPE, text=True, env={**os.environ, "OPENAI_API_KEY": "sk-bench"})
                 for i in range(workers)]
        while not all(os.path.exists(f"{ready}.{i}") for i in range(workers)):
            time.sleep(0.01)
        started = time.monotonic()
        Path(go).touch()
        outs = [p.communicate()[0] for p in procs]
        wall = time.monotonic() - started
        if any(p.returncode for p in procs):
            raise SystemExit("a benchmark worker failed")
    return {"mode": "prefetch", "workers": workers, "per_worker": per_worker, "wall": wall,
            "window": window(stub, before), "requests": stub.count - before,
            "reported": sum(int(o.split()[-1]) for o in outs)}


def write_tasks(folder: Path, n: int) -> None:
    (folder / "throughput").mkdir(parents=True)
    (folder / "throughput.yaml").write_text(
        "name: throughput\ndescription: generated tasks for the generation throughput benchmark\n"
        "loader: yaml\ndialects: [postgres]\noptions:\n  dir: throughput\n"
    )
    for i in range(n):
        (folder / "throughput" / f"t{i:04d}.yaml").write_text(textwrap.dedent(f"""\
            id: t{i:04d}
            prompt: |
              Write a PL/pgSQL function bench_one() RETURNS integer that returns 1 (task t{i:04d}).
            reference: |
              CREATE OR REPLACE FUNCTION bench_one() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;
            tests:
              - id: one
                kind: output
                postgres: SELECT bench_one();
                expected: ["1"]
            """))


def bench_pytest(stub: StubServer, n: int, latency: float, total_c: int, workers: int) -> dict:
    per_worker = max(1, total_c // workers)
    with tempfile.TemporaryDirectory(prefix="plsql-bench-") as tmp:
        write_tasks(Path(tmp) / "tasks", n)
        cmd = [sys.executable, "-m", "pytest", "--subset", "throughput", f"--plsql-tasks={tmp}/tasks",
               "--plsql-model=openai/stub", f"--plsql-api-base={stub.api_base}",
               f"--plsql-concurrency={per_worker}", f"--plsql-cache={tmp}/cache", "-n", str(workers),
               "-q", "-p", "no:cacheprovider", f"--plsql-results={tmp}/r.json"]
        env = {**os.environ, "OPENAI_API_KEY": "sk-bench"}
        walls = []
        before = stub.count
        for _ in ("cold", "warm"):
            started, started_wall = time.monotonic(), time.time()
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, env=env, check=False)
            walls.append(time.monotonic() - started)
            if _ == "cold":
                first, last = span(stub, before)
                lead, tail = first - started_wall, started_wall + walls[0] - last
            if proc.returncode != 0:
                sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-2000:])
                raise SystemExit(f"pytest -n {workers} failed with exit code {proc.returncode}")
            doc = json.loads(Path(f"{tmp}/r.json").read_text())
            if doc["subsets"]["throughput"].get("suite_pass") not in (1, 1.0):
                raise SystemExit("the benchmark tasks did not all pass")
            if _ == "cold":
                requests = stub.count - before
                gen_window = window(stub, before)
    return {"mode": "pytest", "workers": workers, "per_worker": per_worker, "wall": walls[0], "warm": walls[1],
            "window": gen_window, "lead": lead, "tail": tail,
            "requests": requests, "second_run_requests": stub.count - before - requests}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("prefetch", "pytest", "both"), default="both")
    parser.add_argument("--tasks", type=int, default=96, metavar="N")
    parser.add_argument("--latency", type=float, default=0.5, metavar="L", help="stub seconds per request")
    parser.add_argument("--concurrency", type=int, default=4, metavar="C", help="total requests in flight")
    parser.add_argument("--workers", default="1,2", help="xdist worker counts to compare")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    n, latency, c = args.tasks, args.latency, args.concurrency
    ideal = n * latency / c
    workers = [int(w) for w in args.workers.split(",")]
    modes = ("prefetch", "pytest") if args.mode == "both" else (args.mode,)
    rows = []
    with StubServer(default=ok("CREATE OR REPLACE FUNCTION bench_one() RETURNS integer LANGUAGE sql AS "
                               "$$ SELECT 1 $$;", delay=latency)) as stub:
        for mode in modes:
            for w in workers:
                stub.max_in_flight = 0
                row = (bench_prefetch if mode == "prefetch" else bench_pytest)(stub, n, latency, c, w)
                row["max_in_flight"] = stub.max_in_flight
                rows.append(row)
                log.info("%s -n %d: %.2fs", mode, w, row["wall"])
    print(f"\nN={n} tasks, L={latency}s per request, C={c} requests in flight in total: ideal N*L/C = {ideal:.2f}s")
    print("wall = the whole run (pytest: start-up, database, tests included); window = first request in to "
          "last reply out, as the stub saw them")
    print(f"{'mode':9} {'-n':>3} {'C/worker':>8} {'wall_s':>7} {'wall/ideal':>10} {'window_s':>8} "
          f"{'window/ideal':>12} {'requests':>8} {'max_inflight':>12}  extra")
    for r in rows:
        extra = ""
        if r["mode"] == "pytest":
            extra = (f"{r['lead']:.1f}s before the first request, {r['tail']:.1f}s after the last reply; "
                     f"warm-cache rerun {r['warm']:.2f}s with {r['second_run_requests']} requests")
        flag = "" if r["window"] / ideal <= GOAL else "  (window > goal)"
        print(f"{r['mode']:9} {r['workers']:>3} {r['per_worker']:>8} {r['wall']:>7.2f} {r['wall'] / ideal:>10.2f} "
              f"{r['window']:>8.2f} {r['window'] / ideal:>12.2f} {r['requests']:>8} {r['max_in_flight']:>12}  "
              f"{extra}{flag}")
    print(f"goal: window/ideal <= {GOAL} (and wall/ideal for the prefetch mode, whose wall has no start-up)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Gold against itself, measured several times: how much does each B2 task's score move?

For every PostgreSQL B2 task of a subset (default ``procarena-sample``), the ``perf`` item's
measurement is run ``--runs`` times (default 5) with gold submitted as the answer, on one
embedded server, exactly as the judge does it (fresh pristine copy per run, the backend's CPU
time, the acceleration read from per-round ratios). Printed per task: each run's acceleration, interval and bin, the spread of
the acceleration over the runs (CV, target <= 3 %), the per-run CPU-time CV of gold's own runs,
and the same acceleration computed from wall-clock times, for comparison. ``--hog`` adds as many
busy processes as cores while measuring.

Usage: ``PLSQLBENCH_SHARED_DATA=/work/shared/data python benchmarks/b2_spread.py [--runs 5]
[--hog] [--subset procarena-sample] [--task postgres_b2_001]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

TARGET_CV = 0.03


@contextlib.contextmanager
def hog(n: int) -> Iterator[None]:
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def perf_record(backend: Any, task: Any, answer: str) -> dict:
    from pytest_plsqlbench.judges import DEFAULT, JudgeRegistry
    from pytest_plsqlbench.procarena.judge import judges
    from pytest_plsqlbench.procarena.perf.judge import PerfJudge
    from pytest_plsqlbench.runner import TaskRun

    registry = JudgeRegistry(list(DEFAULT.values()) + judges() + [PerfJudge()])
    taskrun = TaskRun(backend, task, [answer], judges=registry)
    taskrun.start()
    try:
        return dict(taskrun.run_test(1, task.turns[0].tests[-1]).extra["b2"])
    finally:
        taskrun.finish()


def cv(values: list[float]) -> float:
    return statistics.pstdev(values) / statistics.mean(values) if len(values) > 1 else 0.0


def main() -> int:
    from embedded import started_backend
    from pytest_plsqlbench.manifests import load_manifest
    from pytest_plsqlbench.procarena.loader import load, spec_of
    from pytest_plsqlbench.settings import Settings

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--subset", default="procarena-sample")
    ap.add_argument("--task", default="")
    ap.add_argument("--hog", action="store_true")
    args = ap.parse_args()
    tasks = [t for t in load(load_manifest(REPO / "tasks" / f"{args.subset}.yaml"), Settings.of(subsets=(args.subset,)))
             if t.metadata.get("scenario") == "b2" and t.dialect == "postgres" and args.task in t.id]
    worst = 0.0
    with started_backend("b2spread", timeout=300) as backend, (hog(os.cpu_count() or 2) if args.hog
                                                                else contextlib.nullcontext()):
        for task in tasks:
            gold = spec_of(task).gold
            accs, walls, gold_cv = [], [], []
            for n in range(args.runs):
                rec = perf_record(backend, task, gold)
                acc, (lo, hi) = rec["acceleration"], rec["acceleration_interval"]
                wall = [g / c for g, c in zip(rec["wall_s"]["gold"], rec["wall_s"]["candidate"])]
                accs.append(acc)
                walls.append(statistics.median(wall))
                gold_cv.append(cv(rec["runs_s"]["gold"]))
                print(f"{task.id} run {n + 1}: acceleration {acc:.3f} [{lo:.3f}, {hi:.3f}] {rec['bin']} "
                      f"({rec['clock']}); wall clock {walls[-1]:.3f}; gold's runs CV {gold_cv[-1]:.1%}", flush=True)
            spread = cv(accs)
            worst = max(worst, spread)
            print(f"{task.id}: acceleration over {args.runs} runs: min {min(accs):.3f} max {max(accs):.3f} "
                  f"CV {spread:.1%} (target <= {TARGET_CV:.0%}); wall clock CV {cv(walls):.1%}; "
                  f"gold's run-to-run CPU CV median {statistics.median(gold_cv):.1%}", flush=True)
    print(f"worst spread {worst:.1%} ({'within' if worst <= TARGET_CV else 'above'} the {TARGET_CV:.0%} target)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

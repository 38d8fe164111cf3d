"""The controller's scheduling cost per item: this checkout's scheduler against a base's, side by side.

``TaskScheduling`` (``pytest_plsqlbench/scheduler.py``) is what the xdist controller calls on
every finished item. This drives it, and the scheduler of a base revision (``--base REF``,
default ``HEAD~1``, read with ``git show``) and, with ``--with-loadscope``, xdist's own ``loadscope``, through a whole
MBPP+-sized run with stand-in workers (as ``tests/test_batch_scheduler.py`` does: a worker runs
an item once it holds the next one), alternately, ``--repeat`` times each, and prints each
one's median time per run and per item, and the ratio to the base. Only the controller's
bookkeeping is timed: no worker, no database.

Usage: ``python benchmarks/scheduler_cost.py [--base REF] [--tasks 308] [--tests 90] [--repeat 5]
[--with-loadscope]``
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


class Node:
    def __init__(self, name: str) -> None:
        self.gateway = types.SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def config(workers: int) -> Any:
    option = types.SimpleNamespace(tx=[f"popen//id=gw{i}" for i in range(workers)], numprocesses=workers,
                                   loadscopereorder=True, dist="loadscope", maxworkerrestart=None)
    return types.SimpleNamespace(option=option, getoption=lambda name, default=None: getattr(option, name, default),
                                 getvalue=lambda name: getattr(option, name, None))


def run(cls: Any, items: list[str], workers: int) -> float:
    """Seconds for one whole run: collection to the last item finished."""
    t0 = time.perf_counter()
    quiet = types.SimpleNamespace(loadscopesched=lambda *a: None, taskscheduling=lambda *a: None)
    sched = cls(config(workers), quiet)
    nodes = [Node(f"gw{i}") for i in range(workers)]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, items)
    sched.schedule()
    done = [0] * workers
    moved = True
    while moved:
        moved = False
        for i, node in enumerate(nodes):
            while len(node.sent) - done[i] >= (1 if node.shutting_down else 2):
                sched.mark_test_complete(node, node.sent[done[i]])
                done[i] += 1
                moved = True
    assert sum(done) == len(items), (cls, sum(done), len(items))
    return time.perf_counter() - t0


def base_scheduler(ref: str, folder: Path) -> Any:
    source = subprocess.run(["git", "show", f"{ref}:pytest_plsqlbench/scheduler.py"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout
    path = folder / "base_scheduler.py"
    path.write_text(source.replace("from .nodeids import", "from pytest_plsqlbench.nodeids import"))
    spec = importlib.util.spec_from_file_location("base_scheduler", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TaskScheduling


def main() -> int:
    sys.path.insert(0, str(REPO))
    from xdist.scheduler import LoadScopeScheduling

    from pytest_plsqlbench.nodeids import scope_of
    from pytest_plsqlbench.scheduler import TaskScheduling

    class LoadScope(LoadScopeScheduling):  # xdist's loadscope with our scopes, nothing else
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD~1")
    ap.add_argument("--tasks", type=int, default=308)
    ap.add_argument("--tests", type=int, default=90)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--with-loadscope", action="store_true", help="also xdist's loadscope (about 60 s a run)")
    args = ap.parse_args()
    items = [f"mbpp-plus/t{t:04d}/case-{c:03d}" for t in range(args.tasks) for c in range(args.tests)]
    with tempfile.TemporaryDirectory() as tmp:
        contenders = {"this checkout": TaskScheduling, f"base {args.base}": base_scheduler(args.base, Path(tmp))}
        if args.with_loadscope:
            contenders["xdist loadscope"] = LoadScope
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for r in range(args.repeat):
            order = list(contenders) if r % 2 == 0 else list(reversed(contenders))
            for name in order:
                times[name].append(run(contenders[name], items, args.workers))
    base = statistics.median(times[f"base {args.base}"])
    print(f"{len(items)} items, {args.tasks} tasks, {args.workers} workers, {args.repeat} runs each")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:18} median {med:7.3f} s per run, {med / len(items) * 1e6:6.1f} us per item, "
              f"{med / base:5.2f}x the base  (runs: {', '.join(f'{t:.3f}' for t in ts)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What pristine copies cost: a subset's reference run before and after, side by side.

ProcArena runs gold, the candidate, B2's gate and Interactive episodes each on a server
started from a pristine copy of the task's database (``dialects/pg_pristine.py``,
docs/security.md). This runs ``pytest --subset NAME --plsql-model=reference`` on this checkout
with the copies switched off (the default base: ``shared_server_plugin.py``, same code and tasks,
every contender on the worker's database as before issue 28) or on the code of a base revision
(``--base REF``: exported with ``git archive`` into a temporary folder and put first on
``PYTHONPATH``; its own tasks), and on this checkout with the copies, alternately, ``--repeat`` times
each (the order flips every round, so a machine that slows down during the run burdens both),
and prints every wall time, both medians, their ratio and the issue's 1.3x cap. The
measurement lock B2 holds while timing (``procarena/perf/quiet.py``) is machine-wide: other
runs on the machine add waits to both sides alike.

Usage: ``python benchmarks/pristine_overhead.py [--subset procarena-sample] [--base REF]
[--repeat 2] [-n 0] [-- extra pytest args]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: Issue 28's cap on the reference run's slowdown.
RATIO_CAP = 1.3


def _export(ref: str, into: Path) -> Path:
    """The tree of ``ref`` (package, tasks, fixtures) in ``into``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _run(code: Path, subset: str, workers: str, extra: list[str], cwd: Path) -> tuple[float, int, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(code), str(REPO / "benchmarks")]))
    cmd = [sys.executable, "-m", "pytest", "--subset", subset, "--plsql-model=reference", "-n", workers,
           "-p", "no:cacheprovider", "-q", *extra]
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    tail = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    return wall, done.returncode, tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subset", default="procarena-sample")
    parser.add_argument("--base", default="", help="git revision to compare against (default: this checkout with "
                        "the pristine copies switched off)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("-n", dest="workers", default="0")
    args, extra = parser.parse_known_args(argv)
    extra = [a for a in extra if a != "--"]
    walls: dict[str, list[float]] = {"base": [], "pristine": []}
    with tempfile.TemporaryDirectory(prefix="pristine-bench-") as tmp:
        if args.base:
            ref = args.base
            (Path(tmp) / "base").mkdir()
            base, base_extra = _export(ref, Path(tmp) / "base"), []
        else:
            ref, base, base_extra = "copies off", REPO, ["-p", "shared_server_plugin"]
        cwd = Path(tmp) / "run"
        cwd.mkdir()
        sides = {"base": base, "pristine": REPO}
        for round_ in range(args.repeat):
            order = ["base", "pristine"] if round_ % 2 == 0 else ["pristine", "base"]
            for side in order:
                wall, code, tail = _run(sides[side], args.subset, args.workers,
                                        extra + (base_extra if side == "base" else []), cwd)
                walls[side].append(wall)
                print(f"round {round_ + 1} {side:8s} {wall:7.1f}s  exit {code}  {tail}", flush=True)
                if code != 0:
                    print(f"the {side} run failed (exit {code})", file=sys.stderr)
                    return 1
    before, after = statistics.median(walls["base"]), statistics.median(walls["pristine"])
    ratio = after / before
    print(f"{args.subset} reference run, -n {args.workers}: before ({ref[:12]}) median {before:.1f}s, "
          f"with pristine copies median {after:.1f}s, ratio {ratio:.2f} (cap {RATIO_CAP})")
    return 0 if ratio <= RATIO_CAP else 2


if __name__ == "__main__":
    sys.exit(main())

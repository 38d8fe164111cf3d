"""First-use conversion of full MBPP+: wall time and peak memory against the targets (issue 12).

The conversion runs from scratch -- a fresh cache folder, PostgreSQL with null-safe assertions,
as the subset loader does on a default first run -- in a child process; this script samples the resident
memory of that process and all its descendants (the forked children running the canonical
solutions) every 20 ms and reports the largest sum seen, plus the largest single process
(``getrusage``, which no sampling can miss).

Usage: ``python benchmarks/convert_speed.py [--input MbppPlus.jsonl] [--keep DIR] [--repeat N]``
(default input: ``$PLSQLBENCH_SHARED_DATA`` or ``../shared/data`` beside the checkout, then
``mbppplus/MbppPlus.jsonl``). ``--keep DIR`` leaves the converted cache there, for
``benchmarks/convert_compare.py OLD NEW``, after converting the other three dialect and
assertion-mode targets into it as well (timed and printed: those read the canonical solutions'
kept results instead of running them).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

WALL_TARGET = 30.0
RSS_TARGET_MB = 500.0
REPO = Path(__file__).resolve().parent.parent

CONVERT = """
import sys
from pathlib import Path
from pytest_plsqlbench.loaders.mbpp import load_converted
tasks = load_converted(sys.argv[1], Path(sys.argv[2]), sys.argv[5], subset=sys.argv[4],
                       assertions=sys.argv[6], cache_dir=Path(sys.argv[3]))
print(len(tasks), sum(t.n_tests for t in tasks))
"""


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    try:
        family = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in family:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: What a default run converts first, then the rest (``--keep``).
FIRST = ("postgres", "null-safe")
OTHERS = (("postgres", "published"), ("oracle", "null-safe"), ("oracle", "published"))


def run_once(source: str, path: Path, cache: Path, subset: str,
             target: tuple[str, str] = FIRST) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds, peak tree RSS in MB, the child's output) of one conversion.

    CPU is that of the whole tree (every process is waited for by its parent), so it does not
    depend on how busy the machine is; wall does.
    """
    cpu0 = _cpu()
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", CONVERT, source, str(path), str(cache), subset, *target],
        stdout=subprocess.PIPE,
        text=True,
    )
    proc = psutil.Process(child.pid)
    peak = 0
    while child.poll() is None:
        peak = max(peak, _tree_rss(proc))
        time.sleep(0.02)
    wall = time.perf_counter() - start
    out = child.stdout.read() if child.stdout else ""
    if child.returncode != 0:
        raise SystemExit(f"conversion failed (exit {child.returncode})")
    return wall, _cpu() - cpu0, peak / 2**20, out.strip()


def main() -> int:
    shared = Path(os.environ.get("PLSQLBENCH_SHARED_DATA", REPO.parent / "shared" / "data"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, default=shared / "mbppplus" / "MbppPlus.jsonl")
    parser.add_argument("--source", default="mbpp-plus", choices=["mbpp-plus", "mbpp", "plsqlbench-mbpp"])
    parser.add_argument("--subset", default="mbpp-plus")
    parser.add_argument("--keep", type=Path, help="keep the converted cache in this folder (emptied first)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    if not args.input.is_file():
        raise SystemExit(f"{args.input}: no such file (give --input)")
    print(f"converting {args.input} ({args.source}) from scratch, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}")
    walls, peaks, cpus = [], [], []
    for n in range(args.repeat):
        if args.keep and n == args.repeat - 1:
            shutil.rmtree(args.keep, ignore_errors=True)
            args.keep.mkdir(parents=True)
            cache = args.keep
            wall, cpu, peak, out = run_once(args.source, args.input, cache, args.subset)
            for target in OTHERS:
                w, c, _, _ = run_once(args.source, args.input, cache, args.subset, target)
                print(f"  then {'/'.join(target)} from the kept results: {w:.1f} s wall, {c:.1f} s CPU")
        else:
            with tempfile.TemporaryDirectory(prefix="convert-speed-") as tmp:
                wall, cpu, peak, out = run_once(args.source, args.input, Path(tmp), args.subset)
        walls.append(wall)
        peaks.append(peak)
        cpus.append(cpu)
        print(
            f"run {n + 1}: {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS of the process tree {peak:.0f} MB "
            f"({out} tasks/tests), load average now {os.getloadavg()[0]:.1f}"
        )
    largest = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    wall, peak = min(walls), max(peaks)
    print(f"wall (best of {len(walls)}): {wall:.1f} s  target <= {WALL_TARGET:.0f} s  ratio {wall / WALL_TARGET:.2f}")
    print(f"peak RSS, process tree: {peak:.0f} MB  target <= {RSS_TARGET_MB:.0f} MB  ratio {peak / RSS_TARGET_MB:.2f}")
    print(f"largest single process: {largest:.0f} MB")
    cores = os.cpu_count() or 1
    print(
        f"CPU of the tree: {min(cpus):.1f} s = {min(cpus) / cores:.1f} s of wall on {cores} idle cores at best "
        "(wall above also pays for whatever else the machine runs)"
    )
    ok = wall <= WALL_TARGET and peak <= RSS_TARGET_MB
    print("within targets" if ok else "OVER TARGET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

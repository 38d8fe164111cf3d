"""How much the plugin costs over a bare psycopg loop running the same statements.

Both sides run in this one invocation, on the same machine, against an embedded
PostgreSQL started by each side:

* **bare**: load the subset's tasks, start a server, then for each task BEGIN, load its
  fixtures, install the reference answer, run every unit test in a savepoint, ROLLBACK —
  one superuser connection, no pytest, no isolation beyond that, no reporting;
* **plugin**: ``pytest --subset NAME --plsql-model=reference`` in a subprocess (``-n`` as
  given), timed from process start to exit.

Printed: both walls, their ratio, the plugin's overhead per item in microseconds, each
process's peak RSS and CPU seconds (controller and xdist workers, read by the ``run_probe``
plugin), and the CPU seconds the whole machine was busy during the run (its database servers
included), which shows when a run is bound by the cores rather than by waiting. ``-n 0,2``
runs both worker counts interleaved with the bare loop and prints the ``-n 2 / -n 0`` wall
ratio; ``--first-item`` times instead how long after process start the first smoke item runs.
``--base DIR`` runs the plugin also from another checkout (a ``git worktree`` of an earlier
revision) beside this checkout's run in every round, each going first every other round (the run
right after the bare loop reads slower), and prints this checkout's wall and controller CPU over
the base's: a change's speed measured side by side on the same load (use an even ``--repeat``).

Beside them, pytest's own floor: as many no-op parametrized tests as the subset has unit tests,
run with the same options and worker counts but without this plugin (``--no-floor`` skips it).
What pytest costs per item with nothing to do bounds what any plugin can reach, and the floor's
``-n 2 / -n 0`` shows whether the machine can scale pytest's per-item work at all.

Usage: ``python benchmarks/plugin_overhead.py [--subset smoke] [-n 0[,2]] [--repeat 3] [--no-floor] [--first-item] [--base DIR] [-- extra pytest args]``
(e.g. ``--subset mbpp-plus -n 0,2 -- --plsql-source mbppplus=../shared/data/mbppplus/MbppPlus.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from pytest_plsqlbench.dialects.pg_server import EmbeddedServer
from pytest_plsqlbench.plugin import load_all_tasks, select_tasks
from pytest_plsqlbench.scripts import split
from pytest_plsqlbench.state import SETTINGS_KEY

HERE = str(Path(__file__).resolve().parent)
#: This checkout, put first on the plugin runs' path so they import its package, not an installed one.
CHECKOUT = str(Path(HERE).parent)
#: Issue 12's targets.
RATIO_TARGET = 1.5
SCALING_TARGET = 0.6
RSS_TARGET_MB = 300.0
FIRST_ITEM_TARGET = 3.0


def _tasks(subset: str, extra: list[str]):  # noqa: ANN202
    config = pytest.Config.fromdictargs({}, ["--subset", subset, "--plsql-model=reference", *extra])
    config._do_configure()  # noqa: SLF001 - a throwaway config to reuse the plugin's loaders
    try:
        settings = config.stash[SETTINGS_KEY]
        return [t for _, ts in select_tasks(load_all_tasks(config, settings), settings).values() for t in ts]
    finally:
        config._ensure_unconfigure()  # noqa: SLF001


def bare(subset: str, extra: list[str]) -> tuple[float, int, int]:
    """(wall seconds, statements, unit tests) of the bare loop."""
    tasks = _tasks(subset, extra)
    t0 = time.perf_counter()
    server = EmbeddedServer("bench")
    uri = server.start()
    statements = tests = 0
    try:
        with psycopg.connect(uri, autocommit=True) as conn:
            loaded: set[str] = set()
            for task in tasks:
                for fixture in task.fixtures:
                    if fixture.key not in loaded:
                        for st in split(fixture.script, "postgres"):
                            conn.execute(st.text)
                        loaded.add(fixture.key)
                conn.execute("BEGIN")
                for turn in task.turns:
                    for st in split(turn.reference or "", "postgres"):
                        conn.execute(st.text)
                        statements += 1
                    for test in turn.tests:
                        tests += 1
                        conn.execute("SAVEPOINT t")
                        for st in split(test.script or turn.reference or "", "postgres"):
                            cur = conn.execute(st.text)
                            if cur.description:
                                cur.fetchall()
                            statements += 1
                        conn.execute("ROLLBACK TO SAVEPOINT t")
                conn.execute("ROLLBACK")
    finally:
        server.stop()
    return time.perf_counter() - t0, statements, tests


@dataclass
class PluginRun:
    wall: float
    #: Peak RSS in MB by process role (``controller``, ``gw0`` ...).
    rss: dict[str, float] = field(default_factory=dict)
    #: Seconds from process start to the first benchmark item's start and end.
    first_item: tuple[float, float] | None = None
    #: CPU seconds by process role, and of the whole machine during the run (servers included).
    cpu: dict[str, float] = field(default_factory=dict)
    machine_cpu: float | None = None


def _machine_busy() -> float | None:
    """CPU seconds the machine has been busy since boot (Linux), to account for the servers too."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        ticks = [int(v) for v in fields]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def plugin(subset: str, workers: str, extra: list[str], checkout: str = CHECKOUT) -> PluginRun:
    """One ``pytest --subset`` run importing the package of ``checkout``."""
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as probe:
        env = dict(os.environ, BENCH_PROBE_DIR=probe,
                   PYTHONPATH=os.pathsep.join(p for p in (checkout, HERE, os.environ.get("PYTHONPATH")) if p))
        wall0, busy0 = time.time(), _machine_busy()
        elapsed = _pytest("plugin", ["--subset", subset, "--plsql-model=reference", "-p", "run_probe",
                                     "-n", workers, *extra], empty, env)
        busy1 = _machine_busy()
        run = PluginRun(elapsed)
        if busy0 is not None and busy1 is not None:
            run.machine_cpu = busy1 - busy0
        for path in sorted(Path(probe).glob("*.json")):
            data = json.loads(path.read_text())
            run.rss[data["role"]] = data["peak_rss_mb"]
            run.cpu[data["role"]] = data.get("cpu_s", 0.0)
            if data["role"] == "controller" and "first_item_start" in data:
                run.first_item = (data["first_item_start"] - wall0, data["first_item_end"] - wall0)
    return run


#: The floor's test module: one no-op test, parametrized as many times as the subset has tests.
_FLOOR_TEST = """import os
import pytest

@pytest.mark.parametrize("i", range(int(os.environ["BENCH_FLOOR_ITEMS"])))
def test_noop(i):
    pass
"""


def floor(items: int, workers: str) -> float:
    """Wall seconds of pytest running ``items`` no-op tests with the plugin's run options, without the plugin."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "test_floor.py").write_text(_FLOOR_TEST)
        env = dict(os.environ, BENCH_FLOOR_ITEMS=str(items))
        return _pytest("floor", ["-p", "no:plsqlbench", "-n", workers, "test_floor.py"], tmp, env)


def _pytest(what: str, args: list[str], cwd: str, env: dict[str, str]) -> float:
    """Wall seconds of ``pytest -q -p no:cacheprovider ARGS`` in a subprocess, start included; a failed run ends the benchmark."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=cwd, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{what} run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return elapsed


def first_item(extra: list[str], repeat: int) -> None:
    """Seconds from launching ``pytest --subset smoke -n 0`` to its first item (start included)."""
    runs = [plugin("smoke", "0", extra).first_item for _ in range(repeat)]
    starts = [r[0] for r in runs if r]
    ends = [r[1] for r in runs if r]
    if not ends:
        sys.exit("no benchmark item ran")
    end = statistics.median(ends)
    print(f"first smoke item, median of {repeat} runs: started {statistics.median(starts):.2f} s, "
          f"finished {end:.2f} s after process start  target < {FIRST_ITEM_TARGET:g} s  "
          f"{'ok' if end < FIRST_ITEM_TARGET else 'MISSED'}")


def compare_base(workers: str, head: list[PluginRun], base: list[PluginRun], where: str) -> None:
    """This checkout against the base, round by round (each pair ran one right after the other)."""
    walls = [h.wall / b.wall for h, b in zip(head, base, strict=True)]
    cpus = [h.cpu["controller"] / b.cpu["controller"] for h, b in zip(head, base, strict=True)
            if h.cpu.get("controller") and b.cpu.get("controller")]
    line = (f"this checkout / base ({where}) -n {workers}: wall {statistics.median(r.wall for r in head):.2f} s / "
            f"{statistics.median(r.wall for r in base):.2f} s, per-round ratios "
            f"{', '.join(f'{r:.2f}' for r in walls)} (median {statistics.median(walls):.2f})")
    if cpus:
        line += f"; controller CPU ratios {', '.join(f'{r:.2f}' for r in cpus)} (median {statistics.median(cpus):.2f})"
    peak = {side: max((r.rss.get("controller", 0.0) for r in runs), default=0.0) for side, runs in (("head", head), ("base", base))}
    line += f"; controller peak RSS {peak['head']:.0f} MB / {peak['base']:.0f} MB"
    totals = [sum(h.cpu.values()) / sum(b.cpu.values()) for h, b in zip(head, base, strict=True)
              if sum(b.cpu.values())]
    if totals and workers != "0":
        line += f"; all pytest processes' CPU ratios {', '.join(f'{r:.2f}' for r in totals)} (median {statistics.median(totals):.2f})"
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subset", default="smoke")
    parser.add_argument("-n", dest="workers", default="0",
                        help="worker counts, comma-separated: '-n 0,2' runs both side by side and compares their walls")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-floor", action="store_true",
                        help="do not time pytest's floor (the same number of no-op tests without the plugin)")
    parser.add_argument("--base", metavar="DIR",
                        help="another checkout (e.g. a git worktree of the base revision) run beside this one")
    parser.add_argument("--first-item", action="store_true",
                        help="instead: time from process start to the first smoke item")
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    if args.first_item:
        first_item(extra, args.repeat)
        return
    counts = [w.strip() for w in args.workers.split(",") if w.strip()]
    bare_runs: list[float] = []
    runs: dict[str, list[PluginRun]] = {w: [] for w in counts}
    floors: dict[str, list[float]] = {w: [] for w in counts}
    base_runs: dict[str, list[PluginRun]] = {w: [] for w in counts}
    statements = tests = 0
    for round_ in range(args.repeat):
        # Interleaved, so both sides see the same load on a shared machine.
        seconds, statements, tests = bare(args.subset, extra)
        bare_runs.append(seconds)
        for w in counts:
            if args.base and round_ % 2:  # every other round the base goes first: a run right
                base_runs[w].append(plugin(args.subset, w, extra, str(Path(args.base).resolve())))
                runs[w].append(plugin(args.subset, w, extra))  # after the bare loop is slower
            else:
                runs[w].append(plugin(args.subset, w, extra))
                if args.base:
                    base_runs[w].append(plugin(args.subset, w, extra, str(Path(args.base).resolve())))
            if not args.no_floor:
                floors[w].append(floor(tests, w))
    b = statistics.median(bare_runs)
    print(f"subset {args.subset}: {tests} unit tests, {statements} statements, median of {args.repeat} runs")
    print(f"bare psycopg loop (incl. server start): {b:7.2f} s")
    walls = {}
    for w in counts:
        p = walls[w] = statistics.median(r.wall for r in runs[w])
        over_us = (p - b) / max(tests, 1) * 1e6
        print(f"pytest plugin -n {w} (process wall):   {p:7.2f} s  ratio plugin / bare: {p / b:.2f} "
              f"(target <= {RATIO_TARGET:g})  overhead per item: {over_us:.0f} us")
        peaks: dict[str, float] = {}
        for r in runs[w]:
            for role, mb in r.rss.items():
                peaks[role] = max(peaks.get(role, 0.0), mb)
        shown = ", ".join(f"{role} {mb:.0f} MB" for role, mb in sorted(peaks.items()))
        worst = max(peaks.values(), default=0.0)
        print(f"  peak RSS per process: {shown}  (target <= {RSS_TARGET_MB:g} MB each: "
              f"{'ok' if worst <= RSS_TARGET_MB else 'MISSED'})")
        # Where the time goes: CPU per pytest process, and the whole machine's (the database
        # servers' included) against what its cores could give in that wall time.
        last = runs[w][-1]
        cpus = ", ".join(f"{role} {s:.1f} s" for role, s in sorted(last.cpu.items()))
        machine = (f"; whole machine busy {last.machine_cpu:.1f} CPU s of {last.wall * (os.cpu_count() or 1):.1f} "
                   f"available ({os.cpu_count()} cores x wall)" if last.machine_cpu is not None else "")
        print(f"  CPU (last run): {cpus}{machine}")
        if floors[w]:
            f = statistics.median(floors[w])
            print(f"  pytest floor -n {w} ({tests} no-op tests, no plugin): {f:7.2f} s  floor / bare: {f / b:.2f}  "
                  f"plugin / floor: {p / f:.2f}  plugin per item over the floor: {(p - f) / max(tests, 1) * 1e6:.0f} us")
    for w, base in base_runs.items():
        if base:
            compare_base(w, runs[w], base, args.base)
    if "0" in walls and len(walls) > 1:
        for w, p in walls.items():
            if w != "0":
                line = f"wall -n {w} / -n 0: {p / walls['0']:.2f} (target <= {SCALING_TARGET:g})"
                if floors[w] and floors["0"]:
                    # pytest alone, same items: what the machine allows any plugin.
                    ratio = statistics.median(floors[w]) / statistics.median(floors["0"])
                    line += f"; pytest's floor alone: {ratio:.2f}"
                print(line)


if __name__ == "__main__":
    main()

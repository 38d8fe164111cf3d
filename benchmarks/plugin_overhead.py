"""How much the plugin costs over a bare psycopg loop running the same statements.

Both sides run in this one invocation, on the same machine, against an embedded
PostgreSQL started by each side:

* **bare**: load the subset's tasks, start a server, then for each task BEGIN, load its
  fixtures, install the reference answer, run every unit test in a savepoint, ROLLBACK —
  one superuser connection, no pytest, no isolation beyond that, no reporting;
* **plugin**: ``pytest --subset NAME --plsql-model=reference`` in a subprocess (``-n`` as
  given), timed from process start to exit.

Usage: ``python benchmarks/plugin_overhead.py [--subset smoke] [-n 0] [--repeat 3] [-- extra pytest args]``
(e.g. ``--subset mbpp-plus -- --plsql-source mbppplus=../shared/data/mbppplus/MbppPlus.jsonl``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

import psycopg
import pytest

from pytest_plsqlbench.dialects.pg_server import EmbeddedServer
from pytest_plsqlbench.plugin import load_all_tasks, select_tasks
from pytest_plsqlbench.scripts import split
from pytest_plsqlbench.state import SETTINGS_KEY


def _tasks(subset: str, extra: list[str]):  # noqa: ANN202
    config = pytest.Config.fromdictargs({}, ["--subset", subset, "--plsql-model=reference", *extra])
    config._do_configure()  # noqa: SLF001 - a throwaway config to reuse the plugin's loaders
    try:
        settings = config.stash[SETTINGS_KEY]
        return [t for _, ts in select_tasks(load_all_tasks(config, settings), settings).values() for t in ts]
    finally:
        config._ensure_unconfigure()  # noqa: SLF001


def bare(subset: str, extra: list[str]) -> tuple[float, int]:
    tasks = _tasks(subset, extra)
    t0 = time.perf_counter()
    server = EmbeddedServer("bench")
    uri = server.start()
    statements = 0
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
    return time.perf_counter() - t0, statements


def plugin(subset: str, workers: str, extra: list[str]) -> float:
    with tempfile.TemporaryDirectory() as empty:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "--subset", subset, "--plsql-model=reference", "-q",
             "-p", "no:cacheprovider", "-n", workers, *extra],
            cwd=empty, capture_output=True, text=True,
        )
        elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"plugin run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subset", default="smoke")
    parser.add_argument("-n", dest="workers", default="0")
    parser.add_argument("--repeat", type=int, default=3)
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    bare_runs, plugin_runs, statements = [], [], 0
    for _ in range(args.repeat):
        seconds, statements = bare(args.subset, extra)
        bare_runs.append(seconds)
        plugin_runs.append(plugin(args.subset, args.workers, extra))
    b, p = statistics.median(bare_runs), statistics.median(plugin_runs)
    print(f"subset {args.subset}: {statements} statements, median of {args.repeat} runs")
    print(f"bare psycopg loop (incl. server start): {b:7.2f} s")
    print(f"pytest plugin -n {args.workers} (process wall):   {p:7.2f} s")
    print(f"ratio plugin / bare: {p / b:.2f}")


if __name__ == "__main__":
    main()

"""A run where every answer is wrong must cost about what a run where every answer is right costs.

Both runs go side by side in this one invocation, same subset, same ``-n``, the same answer
path (``--plsql-answers``): once with every task's reference answer, once with an answer that
installs but is wrong everywhere (it creates nothing the tests call, so every test fails). Each is
timed from process start to exit, output included (a run that prints a traceback section per
failure pays for it here), and the ratio wrong / right is printed against the target (<= 1.5).

Usage: ``python benchmarks/wrong_answers.py [--subset mbpp-plus] [-n 2] [-- extra pytest args]``,
e.g. ``--subset mbpp-plus -n 2 -- --plsql-source=mbppplus=../shared/data/mbppplus/MbppPlus.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from plugin_overhead import _tasks as tasks  # the same task loading as the overhead benchmark

TARGET = 1.5
WRONG = "SELECT 'this answer defines nothing the tests call';"


def answers_file(path: Path, subset_tasks: list, wrong: bool) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for task in subset_tasks:
            for turn in task.turns:
                answer = WRONG if wrong else (turn.reference or "")
                fh.write(json.dumps({"task_id": task.id, "subset": task.subset, "turn": turn.index,
                                     "answer": answer}) + "\n")
    return path


def timed_run(subset: str, workers: str, answers: Path, extra: list[str], log: Path) -> tuple[float, int, int]:
    """Seconds, exit code and bytes of output of one pytest run."""
    cmd = [sys.executable, "-m", "pytest", "--subset", subset, f"--plsql-answers={answers}", "-n", workers,
           "-p", "no:cacheprovider", *extra]
    t0 = time.perf_counter()
    with log.open("wb") as out:
        code = subprocess.run(cmd, cwd=log.parent, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    return time.perf_counter() - t0, code, log.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subset", default="smoke")
    parser.add_argument("-n", dest="workers", default="2")
    parser.add_argument("extra", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    subset_tasks = tasks(args.subset, args.extra)
    n_items = sum(t.n_tests for t in subset_tasks)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        right = answers_file(root / "right.jsonl", subset_tasks, wrong=False)
        wrong = answers_file(root / "wrong.jsonl", subset_tasks, wrong=True)
        t_right, code_right, out_right = timed_run(args.subset, args.workers, right, args.extra, root / "right.log")
        t_wrong, code_wrong, out_wrong = timed_run(args.subset, args.workers, wrong, args.extra, root / "wrong.log")
    ratio = t_wrong / t_right
    print(f"{args.subset}: {len(subset_tasks)} tasks, {n_items} items, -n {args.workers}")
    print(f"every answer right: {t_right:8.1f} s  exit {code_right}  output {out_right / 1024:9.1f} KiB")
    print(f"every answer wrong: {t_wrong:8.1f} s  exit {code_wrong}  output {out_wrong / 1024:9.1f} KiB")
    print(f"wrong / right: {ratio:.2f} (target <= {TARGET}) -> {'OK' if ratio <= TARGET else 'MISSED'}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())

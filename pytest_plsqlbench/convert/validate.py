"""Replay validation (paper App. B.5) through the core runner.

Every converted task's reference answer is its replay function. Installing it and running
every unit test against it must pass: that proves the emitted tests are executable and
satisfiable. ``jobs`` > 1 spreads the tasks over that many processes, each with its own
backend (one embedded server per process, as under xdist), because a full MBPP+ run is some
27,000 unit tests.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from ..dialects.base import Backend
from ..settings import Settings
from ..tasks import Task
from .model import FEW_CASES, few_cases_line, kept_of, left_out_lines


@dataclass
class ReplayReport:
    total: int
    valid: int = 0
    tests: int = 0
    seconds: float = 0.0
    #: One line per task that failed: id, how many tests failed, the first failure.
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.valid == self.total

    def summary(self) -> str:
        return f"replay-valid {self.valid} of {self.total}"


def case_report(tasks: Sequence[Task]) -> list[str]:
    """How many source cases the tasks kept, which kept few, and which one constant passes.

    A replay proves the tests satisfiable, not that they discriminate: a task whose every kept
    case expects the same value is passed by an answer returning that constant (the converter
    leaves such tasks out unless asked to keep them, and marks them).
    """
    kept = total = 0
    for task in tasks:
        k, n = kept_of(task)
        kept, total = kept + k, total + n
    share = f" ({100 * kept / total:.1f}%)" if total else ""
    lines = [f"cases kept {kept} of {total}{share} in {len(tasks)} task(s)"]
    few = few_cases_line(list(tasks))
    lines.append(few or f"few cases kept 0: no task keeps under half and fewer than {FEW_CASES} of its cases")
    constant = [t for t in tasks if t.metadata.get("left_out") == "constant-passable"]
    if constant:
        lines.extend(left_out_lines(constant, kept=True))
    else:
        lines.append("constant-passable 0: no task is passed by one constant answer")
    return lines


def _validate_on(backend: Backend, tasks: Sequence[Task], settings: Settings) -> tuple[int, list[str]]:
    from ..runner import evaluate_task

    valid, failures = 0, []
    for task in tasks:
        result = evaluate_task(backend, task, [turn.reference for turn in task.turns], settings)
        if result.passed:
            valid += 1
            continue
        bad = result.failures()
        first = bad[0] if bad else None
        why = f"{first.test_id}: {first.failure_class}: {first.message}" if first else "no outcome"
        failures.append(f"{task.id}: {len(bad)} of {len(result.outcomes)} test(s) failed; {why}")
    return valid, failures


def _validate(tasks: Sequence[Task], settings: Settings, worker: str) -> tuple[int, list[str]]:
    from ..runner import open_backend

    with open_backend(settings, worker) as backend:
        return _validate_on(backend, tasks, settings)


def replay_validate(
    tasks: Sequence[Task], settings: Settings, jobs: int = 1, backend: Backend | None = None
) -> ReplayReport:
    """Install each task's replay function and run all its tests against it (on ``backend``,
    or on backends started for the purpose)."""
    report = ReplayReport(total=len(tasks), tests=sum(t.n_tests for t in tasks))
    t0 = time.monotonic()
    jobs = max(1, min(jobs, len(tasks)))
    if backend is not None:
        report.valid, report.failures = _validate_on(backend, tasks, settings)
    elif jobs == 1:
        report.valid, report.failures = _validate(tasks, settings, "replay")
    else:
        # Balance by unit tests: biggest tasks first, each to the lightest chunk.
        chunks: list[list[Task]] = [[] for _ in range(jobs)]
        load = [0] * jobs
        for task in sorted(tasks, key=lambda t: -t.n_tests):
            i = load.index(min(load))
            chunks[i].append(task)
            load[i] += task.n_tests
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futures = [
                pool.submit(_validate, chunk, settings, f"replay{i}") for i, chunk in enumerate(chunks)
            ]
            for future in futures:
                valid, failures = future.result()
                report.valid += valid
                report.failures += failures
    report.failures.sort()
    report.seconds = time.monotonic() - t0
    return report

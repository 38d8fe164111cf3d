"""``plsqlbench validate --subset procarena-sample``: the call suite must discriminate.

Checks per task, on a real database: gold installs and passes its own calls, none of them timing
out or failing as a wrong call (an application error it raises on purpose is fine); every call changes
the state under gold (ProcArena keeps only calls that do, §3.1) -- the state after call k differs
from the state after call k-1, or the call raises as the task intends, which counts as a change
only when it is meant (a raising call is reported so a person can check it); gold is not a
no-op (the final state differs from the clean one); each of the task's ``mutants`` fails at
least one call. Hollow tasks are problems too (:mod:`.hollow`): a requirement or material that
asks for printed output, gold that prints, gold raising on every call, gold changing nothing, and a
procedure that does nothing passing every call (run for real).

With ``--mutants`` (:class:`MutationOptions`) each task's gold is mutated (:mod:`.mutate`) and
the report gives per task the mutation score, each survivor as a diff and the equivalent mutants
marked in the task file; a task below the threshold is a problem.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from .. import outcomes
from ..errors import UsageError
from ..manifests import Manifest
from ..runner import open_backend
from ..settings import Settings
from . import hollow
from . import mutate as mt
from . import state as st
from .dialects import adapter_for
from .evaluation import evaluate
from .judge import _gold_key
from .loader import load, spec_of


@dataclass(frozen=True)
class MutationOptions:
    """``validate --mutants``: which mutants, how many per task (quick mode), the score required."""

    threshold: float = 0.95
    limit: int | None = None
    operators: tuple[str, ...] = mt.OPERATORS
    diffs: bool = True


def check_task(backend, task) -> list[str]:  # noqa: ANN001 - Backend, Task
    """Problems of one task (empty: sound)."""
    spec = spec_of(task)
    problems: list[str] = []
    gold_out = evaluate(backend, task, spec.gold)
    run = backend.judge_cache.get("procarena-gold", {}).get(_gold_key(task))
    if run is None or run.error:
        return [f"{task.id}: gold does not run: {run.error if run else 'no gold run'}"]
    if not all(o.passed for o in gold_out):
        problems.append(f"{task.id}: gold fails its own calls (nondeterministic?)")
    previous = run.clean
    for n, call in enumerate(run.calls, 1):
        if call.error is not None and call.error.failure_class in (outcomes.TIMEOUT, outcomes.INVALID_ARTIFACT,
                                                                    outcomes.INTERFACE):
            problems.append(f"{task.id}: call-{n} fails under gold as {call.error.failure_class}: {call.error.short()}")
        if call.error is None and not st.diff(previous, call.state):
            problems.append(f"{task.id}: call-{n} does not change the state under gold")
        previous = call.state
    if not st.diff(run.clean, previous):
        problems.append(f"{task.id}: gold is a no-op (the final state equals the clean one)")
    why = hollow.of_gold_run(run)
    if why and "changes nothing" not in why:
        problems.append(f"{task.id}: hollow task: {why}")
    problems += [f"{task.id}: hollow task: {why}" for why in hollow.spec_problems(spec)]
    if all(o.passed for o in evaluate(backend, task, adapter_for(spec.dialect).do_nothing(spec.signature))):
        problems.append(f"{task.id}: hollow task: a procedure that does nothing passes every call")
    for mutant in spec.mutants:
        if all(o.passed for o in evaluate(backend, task, mutant.code)):
            problems.append(f"{task.id}: mutant '{mutant.why}' passes every call (the calls do not discriminate)")
    if spec.b2 is not None:  # B2 (issue 14): the degraded input must be slow at the task's scale
        from .perf.validate import check_speed

        line, slow = check_speed(backend, task, spec)
        backend.judge_cache.setdefault("b2-speed", []).append(line)
        problems += slow
    return problems


def mutation_lines(backend, task, options: MutationOptions,  # noqa: ANN001 - Backend, Task
                   progress: Callable[[int, int], None] | None = None) -> tuple[list[str], list[str], mt.TaskScore]:
    """The task's mutation report lines and its problems (below the threshold, stale marks)."""
    spec = spec_of(task)
    score = mt.score_task(backend, task, spec.gold, dict(spec.equivalent), operators=options.operators,
                          limit=options.limit, progress=progress)
    problems = []
    if score.score < options.threshold:
        problems.append(f"{task.id}: mutation score {score.score:.1%} is below {options.threshold:.0%} "
                        f"({len(score.survivors())} survivor(s); add calls or fixture rows that kill them, "
                        "or mark a provably equivalent one in equivalent_mutants)")
    problems += [f"{task.id}: equivalent_mutants: {key!r} is no mutant of the current gold" for key in score.stale]
    return mt.report_lines(score, spec.gold, options.threshold, options.diffs), problems, score


def validate_subset(manifest: Manifest, settings: Settings,
                    mutants: MutationOptions | None = None,
                    only: tuple[str, ...] = ()) -> tuple[list[str], bool]:
    """Check the subset's tasks (only those whose id is in ``only``, when given: one task's
    mutation run takes minutes, so a task author checks the task being edited)."""
    tasks = load(manifest, settings)
    if only:
        unknown = sorted(set(only) - {t.id for t in tasks})
        if unknown:
            raise UsageError(f"--task: no task {', '.join(unknown)} in {manifest.name} "
                             f"({settings.database.dialect}); its tasks: {', '.join(t.id for t in tasks)}")
        tasks = [t for t in tasks if t.id in only]
    problems: list[str] = []
    raising = 0
    mutation: list[str] = []
    scores: list[mt.TaskScore] = []
    with open_backend(settings, "validate") as backend:
        for n, task in enumerate(tasks, 1):
            problems += check_task(backend, task)
            run = backend.judge_cache.get("procarena-gold", {}).get(_gold_key(task))
            raising += sum(1 for c in (run.calls if run else []) if c.error is not None)
            if mutants is not None:
                lines, more, score = mutation_lines(backend, task, mutants, _Progress(task.id, n, len(tasks)))
                mutation += lines
                problems += more
                scores.append(score)
        speed = list(backend.judge_cache.get("b2-speed", []))
    lines = [f"{manifest.name} ({settings.database.dialect}): {len(tasks)} task(s), "
             f"{sum(1 for t in tasks for u in t.turns[0].tests if u.kind != 'procarena-b2')} call(s), {raising} raising under gold; "
             f"{len(problems)} problem(s)"]
    lines += [f"  B2 {line}" for line in speed]
    if mutants is not None:
        killed = sum(sc.count("killed") for sc in scores)
        counted = sum(sc.counted for sc in scores)
        mode = f"quick: at most {mutants.limit} per task" if mutants.limit else "full"
        lines.append(f"  mutants ({mode}): {killed} of {counted} non-equivalent killed "
                     f"({killed / counted if counted else 1:.1%}); "
                     f"{sum(sc.count('stillborn') for sc in scores)} stillborn, "
                     f"{sum(sc.count('equivalent') for sc in scores)} marked equivalent; "
                     f"{sum(1 for sc in scores if sc.score < mutants.threshold)} task(s) below {mutants.threshold:.0%}")
        lines += mutation
    lines += [f"  PROBLEM {p}" for p in problems]
    return lines, not problems


class _Progress:
    """One stderr line when a task's mutants start, then one every ``EVERY_S`` seconds and at the end:
    a full run takes minutes per task, and a silent one is taken for a hung one."""

    EVERY_S = 15.0

    def __init__(self, task_id: str, n: int, of: int) -> None:
        self.task_id, self.n, self.of = task_id, n, of
        self.started = self.last = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done and done < total and now - self.last < self.EVERY_S:
            return
        self.last = now
        print(f"mutants: {self.task_id} (task {self.n} of {self.of}): {done} of {total} run, "
              f"{now - self.started:.0f} s", file=sys.stderr, flush=True)

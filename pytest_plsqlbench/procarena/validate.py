"""``plsqlbench validate --subset procarena-sample``: the call suite must discriminate.

Checks per task, on a real database: gold installs and passes its own calls, none of them timing
out or failing as a wrong call (an application error it raises on purpose is fine); every call changes
the state under gold (ProcArena keeps only calls that do, §3.1) -- the state after call k differs
from the state after call k-1, or the call raises as the task intends, which counts as a change
only when it is meant (a raising call is reported so a person can check it); gold is not a
no-op (the final state differs from the clean one); each of the task's ``mutants`` fails at
least one call.
"""

from __future__ import annotations

from .. import outcomes
from ..manifests import Manifest
from ..runner import open_backend
from ..settings import Settings
from . import state as st
from .judge import _gold_key, evaluate
from .loader import load, spec_of


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
    for mutant in spec.mutants:
        if all(o.passed for o in evaluate(backend, task, mutant.code)):
            problems.append(f"{task.id}: mutant '{mutant.why}' passes every call (the calls do not discriminate)")
    if spec.b2 is not None:  # B2 (issue 14): the degraded input must be slow at the task's scale
        from .perf.validate import check_speed

        line, slow = check_speed(backend, task, spec)
        backend.judge_cache.setdefault("b2-speed", []).append(line)
        problems += slow
    return problems


def validate_subset(manifest: Manifest, settings: Settings) -> tuple[list[str], bool]:
    tasks = load(manifest, settings)
    problems: list[str] = []
    raising = 0
    with open_backend(settings, "validate") as backend:
        for task in tasks:
            problems += check_task(backend, task)
            run = backend.judge_cache.get("procarena-gold", {}).get(_gold_key(task))
            raising += sum(1 for c in (run.calls if run else []) if c.error is not None)
        speed = list(backend.judge_cache.get("b2-speed", []))
    lines = [f"{manifest.name} ({settings.database.dialect}): {len(tasks)} task(s), "
             f"{sum(1 for t in tasks for u in t.turns[0].tests if u.kind != 'procarena-b2')} call(s), {raising} raising under gold; "
             f"{len(problems)} problem(s)"]
    lines += [f"  B2 {line}" for line in speed]
    lines += [f"  PROBLEM {p}" for p in problems]
    return lines, not problems

"""One answer of a ProcArena task judged outside a run: every call's outcome (validate, mutate, tests).

Its own module, not :mod:`.judge`'s: it builds a judge registry with B2's judges
(:mod:`.perf.judge`), which import :mod:`.judge`, so :mod:`.judge` importing them would close a
circle.
"""

from __future__ import annotations

from ..answers import Answer
from ..dialects.base import Backend
from ..judges import DEFAULT, JudgeRegistry
from ..outcomes import Verdict
from ..runner import TaskRun
from ..tasks import Task
from .judge import KIND, judges
from .perf.judge import judges as b2_judges


def evaluate(backend: Backend, task: Task, answer: Answer | str | None) -> list[Verdict]:
    """Every call's outcome for one answer (tests, validate)."""
    registry = JudgeRegistry(list(DEFAULT.values()) + judges() + b2_judges())
    run = TaskRun(backend, task, [answer], judges=registry)
    run.start()
    try:
        return [run.run_test(1, t) for t in task.turns[0].tests if t.kind == KIND]  # the calls (not B2's perf)
    finally:
        run.finish()

"""The Interactive form of a ProcArena task: the paired Direct task with its requirement replaced.

Everything else -- database, description, attachments, gold, calls, initial state -- is the
Direct task's (paper §3.3: both stages modify only the requirement). The task keeps the Direct
id, so a Direct and an Interactive run pair by ``(task id, dialect)`` for retention. The ledger
and ``behaviour`` stay hidden: the episode reads them from the task file when it plays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ...tasks import Fixture, Task
from ..spec import ProcSpec

MODE = "interactive"


def build_interactive_task(spec: ProcSpec, subset: str, db_fixture: Fixture,
                           build_task: Callable[[ProcSpec, str, Fixture], Task]) -> Task:
    assert spec.interactive is not None
    task = build_task(dataclasses.replace(spec, requirement=spec.interactive.requirement), subset, db_fixture)
    metadata = {**task.metadata, "mode": MODE, "interactive": True, "ledger_size": len(spec.interactive.ledger)}
    # The Solver plays its turns on the worker, against the database: nothing to prefetch.
    return dataclasses.replace(task, metadata=metadata, markers=(*task.markers, "interactive"), prefetch=False)


def is_interactive(task: Task) -> bool:
    return bool(task.metadata.get("interactive"))

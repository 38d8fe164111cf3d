"""An xdist scheduler that keeps every item of a benchmark task on one worker.

It is xdist's ``loadscope`` with one change: a benchmark node id's scope is its task
(``subset/task``), so a task's answer is installed once, on one worker, and its items run
in order inside the task's isolation scope. Other node ids keep xdist's own scoping.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

from .nodeids import scope_of


class TaskScheduling(LoadScopeScheduling):
    def _split_scope(self, nodeid: str) -> str:
        if "::" in nodeid:
            return super()._split_scope(nodeid)
        return scope_of(nodeid)

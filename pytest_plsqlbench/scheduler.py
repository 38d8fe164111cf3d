"""An xdist scheduler that keeps every item of a benchmark task on one worker.

It is xdist's ``loadscope`` with one change of meaning: a benchmark node id's scope is its task
(``subset/task``), so a task's answer is installed once, on one worker, and its items run in
order inside the task's isolation scope. Other node ids keep xdist's own scoping.

And two of cost, which matter at benchmark sizes (MBPP+ is ~27,000 items): loadscope finds each
item's index in the worker's collection with ``list.index`` when it hands out a task, and on
every finished item sums the pending items of every task the worker ever had -- both grow with
the run, so the controller's work per item grew with the number of items. Here indexes come from
a dict built once per worker, and a task whose items have all finished leaves the worker's
bookkeeping (what loadscope would re-queue on a crash is only what is left to run).
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScopeScheduling

from .nodeids import scope_of


class TaskScheduling(LoadScopeScheduling):
    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        #: Per worker: (its collection list, node id -> index in it).
        self._positions: dict[Any, tuple[list[str], dict[str, int]]] = {}

    def _split_scope(self, nodeid: str) -> str:
        if "::" in nodeid:
            return super()._split_scope(nodeid)
        return scope_of(nodeid)

    def _index_of(self, node: Any) -> dict[str, int]:
        collection = self.registered_collections[node]
        cached = self._positions.get(node)
        if cached is None or cached[0] is not collection:
            cached = (collection, {nodeid: i for i, nodeid in enumerate(collection)})
            self._positions[node] = cached
        return cached[1]

    def _reschedule(self, node: Any) -> None:
        """loadscope's, but never for a worker whose collection has not arrived yet.

        A worker replacing a crashed one is a scheduler node from the moment it is ready, before
        it has collected; when another worker crashes meanwhile, loadscope reschedules every
        node, and handing this one a unit failed on its missing collection after the unit had
        left the queue (xdist swallows that ``KeyError``): the unit was never sent, the worker
        waited for work and the run for the worker, forever. Its work comes when its collection
        does (``schedule()`` reschedules every node then).

        And never leaving a worker holding a single item while work is queued (below).
        """
        if node not in self.registered_collections:
            return
        super()._reschedule(node)
        # loadscope hands out one unit per call, and tops a worker up when an item finishes.
        # A worker runs an item only once it holds the next one (or is told to stop), so a
        # worker holding a single item finishes none: a replacement that got a task with one
        # item left (the crashed item) would wait for more work, and the run for it.
        while self.workqueue and not node.shutting_down and self._pending_of(self.assigned_work.get(node, {})) < 2:
            queued = len(self.workqueue)
            super()._reschedule(node)
            if len(self.workqueue) == queued:
                break

    def _assign_work_unit(self, node: Any) -> None:
        """loadscope's, with dict lookups; a unit with nothing left to run is not handed out
        (an empty batch produces no event, and the scheduler would wait for it forever).

        A unit re-queued after a crash can be finished meanwhile by the worker that reran it;
        when only such units were left, the worker is shut down, as loadscope does when the queue
        is empty (it runs what it holds first): a worker with nothing, or one item, to run sends
        no more events, so nothing would ever do it later, and the run would wait forever.
        """
        assert self.workqueue
        scope, work_unit = self.workqueue.popitem(last=False)
        while all(work_unit.values()) and self.workqueue:
            scope, work_unit = self.workqueue.popitem(last=False)
        if all(work_unit.values()):
            node.shutdown()  # the queue is empty: as loadscope does, it runs what it holds and stops
            return
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        index = self._index_of(node)
        node.send_runtest_some([index[nodeid] for nodeid, completed in work_unit.items() if not completed])

    def mark_test_complete(self, node: Any, item_index: int | str, duration: float = 0) -> None:
        nodeid = self.registered_collections[node][item_index]
        scope = self._split_scope(nodeid)
        assigned = self.assigned_work[node]
        unit = assigned.get(scope)
        if unit is not None:
            unit[nodeid] = True
            if all(unit.values()):
                del assigned[scope]  # finished: nothing of it to count or to re-queue any more
        self._reschedule(node)

"""An xdist scheduler that keeps every item of a benchmark task on one worker.

It implements xdist's documented scheduler protocol (``xdist.scheduler.protocol.Scheduling``),
returned from the ``pytest_xdist_make_scheduler`` hook; it subclasses no xdist class and reads
or overrides no private xdist member. Its policy is xdist's ``loadscope``: the collection is cut
into work units by scope, each unit goes whole to one worker, a worker is topped up when it has
two items or fewer left. A benchmark node id's scope is its task (``subset/task``), so a task's
answer is installed once, on one worker, and its items run in order inside the task's isolation
scope; other node ids keep loadscope's scoping (the module or class).

What differs from loadscope, and why:

* Cost at benchmark sizes (MBPP+ is ~27,000 items): an item's index in a worker's collection
  comes from a dict built once per worker (loadscope: ``list.index`` per item handed out), and a
  task whose items have all finished leaves the worker's bookkeeping (loadscope sums the pending
  items of every task a worker ever had, on every finished item).
* Three hangs after a worker crash: no work for a worker whose collection has not arrived (the
  unit was lost inside xdist); never a worker holding a single item while work is queued (a
  worker runs an item only once it holds the next one); and a queued unit whose items all ran
  meanwhile is never sent (an empty batch brings no event, and the run waited forever).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from xdist.remote import Producer
from xdist.report import report_collection_diff
from xdist.workermanage import parse_tx_spec_config

from .nodeids import scope_of

#: A worker with this many items or fewer left is given the next unit (loadscope's heuristic).
LOW_WATERMARK = 2

Unit = dict[str, bool]  # node id -> finished


class TaskScheduling:
    """Whole tasks to workers; see the module's docstring."""

    def __init__(self, config: Any, log: Any = None) -> None:
        self.config = config
        self.numnodes = len(parse_tx_spec_config(config))
        self.collection: list[str] | None = None
        #: Units not handed out yet, by scope, in collection order (or largest first with
        #: ``--loadscopereorder``).
        self.workqueue: OrderedDict[str, Unit] = OrderedDict()
        #: Per worker: the units it holds that still have items to run.
        self.assigned_work: dict[Any, dict[str, Unit]] = {}
        self.registered_collections: dict[Any, list[str]] = {}
        #: Per worker: (its collection list, node id -> index in it).
        self._positions: dict[Any, tuple[list[str], dict[str, int]]] = {}
        self.log = Producer("taskscheduling") if log is None else log.taskscheduling

    # ----------------------------------------------------------------- the protocol's state
    @property
    def nodes(self) -> list[Any]:
        return list(self.assigned_work)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.registered_collections) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        """Every item ran, but at most one per worker (the one a worker runs as it stops)."""
        if not self.collection_is_completed or self.workqueue:
            return False
        return all(_pending(units) < 2 for units in self.assigned_work.values())

    @property
    def has_pending(self) -> bool:
        return bool(self.workqueue) or any(_pending(units) for units in self.assigned_work.values())

    # ----------------------------------------------------------------- workers come and go
    def add_node(self, node: Any) -> None:
        assert node not in self.assigned_work
        self.assigned_work[node] = {}

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        assert node in self.assigned_work
        if self.collection_is_completed:  # a replacement worker: its collection must be the run's
            assert self.collection is not None
            if list(collection) != self.collection:
                other = next(iter(self.registered_collections))
                self.log(report_collection_diff(self.collection, collection, other.gateway.id, node.gateway.id))
                return
        self.registered_collections[node] = list(collection)

    def remove_node(self, node: Any) -> str | None:
        """A worker left (finished or crashed): its unfinished units go back to the queue; the
        item it was running when it crashed, or None."""
        units = self.assigned_work.pop(node)
        self._positions.pop(node, None)
        crashed = next((nodeid for unit in units.values() for nodeid, done in unit.items() if not done), None)
        if crashed is None:
            return None
        self.workqueue.update(units)
        for other in self.assigned_work:
            self._reschedule(other)
        return crashed

    # ----------------------------------------------------------------- items
    def mark_test_complete(self, node: Any, item_index: int | str, duration: float = 0) -> None:
        nodeid = self.registered_collections[node][int(item_index)]
        scope = self._scope(nodeid)
        units = self.assigned_work[node]
        unit = units.get(scope)
        if unit is not None:
            unit[nodeid] = True
            if all(unit.values()):
                del units[scope]  # finished: nothing of it to count or to re-queue any more
        self._reschedule(node)

    def mark_test_pending(self, item: str) -> None:
        """Not supported, as in loadscope: a crashed worker's unit is re-queued whole by
        :meth:`remove_node`; one item is never re-queued alone (it would leave its task)."""
        raise NotImplementedError

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        raise NotImplementedError  # work stealing only; units are never split between workers

    # ----------------------------------------------------------------- handing out work
    def schedule(self) -> None:
        """The first distribution once every worker has collected; later calls (a replacement's
        collection arrived) top up every worker."""
        assert self.collection_is_completed
        if self.collection is not None:
            for node in self.nodes:
                self._reschedule(node)
            return
        collections = list(self.registered_collections.items())
        first, reference = collections[0]
        same = True
        for node, collection in collections[1:]:
            if collection != reference:
                same = False
                self.log(report_collection_diff(reference, collection, first.gateway.id, node.gateway.id))
        if not same:
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = list(reference)
        if not self.collection:
            return
        units: dict[str, Unit] = {}
        for nodeid in self.collection:
            units.setdefault(self._scope(nodeid), {})[nodeid] = False
        ordered = list(units.items())
        if getattr(self.config.option, "loadscopereorder", True):  # xdist's option: largest units first
            ordered.sort(key=lambda item: -len(item[1]))
        self.workqueue.update(ordered)
        extra = len(self.nodes) - len(self.workqueue)
        for _ in range(max(0, extra)):  # more workers than work: the last ones stop
            unused, _units = self.assigned_work.popitem()
            unused.shutdown()
        for node in self.nodes:
            self._assign_unit(node)
        for node in self.nodes:  # each starts with two units when there are enough (xdist #277)
            self._reschedule(node)
        if not self.workqueue:
            for node in self.nodes:
                node.shutdown()

    def _scope(self, nodeid: str) -> str:
        """A benchmark item's task; else loadscope's scope (the module or the class)."""
        return nodeid.rsplit("::", 1)[0] if "::" in nodeid else scope_of(nodeid)

    def _index_of(self, node: Any) -> dict[str, int]:
        collection = self.registered_collections[node]
        cached = self._positions.get(node)
        if cached is None or cached[0] is not collection:
            cached = (collection, {nodeid: i for i, nodeid in enumerate(collection)})
            self._positions[node] = cached
        return cached[1]

    def _reschedule(self, node: Any) -> None:
        """Top ``node`` up when it is nearly out of work; stop it when the queue is empty.

        Never for a worker whose collection has not arrived yet (a replacement for a crashed
        one): its work comes when its collection does (:meth:`schedule`). And never leaving a
        worker holding a single item while work is queued: a worker runs an item only once it
        holds the next one (or is told to stop), so a replacement given a task with one item
        left would wait for more work, and the run for it.
        """
        if node not in self.registered_collections or node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        if _pending(self.assigned_work[node]) > LOW_WATERMARK:
            return
        self._assign_unit(node)
        while self.workqueue and not node.shutting_down and _pending(self.assigned_work[node]) < 2:
            self._assign_unit(node)

    def _assign_unit(self, node: Any) -> None:
        """The next unit with items left to run, to ``node``. A unit re-queued after a crash
        may have been finished meanwhile by the worker that reran it; when only such units are
        left, ``node`` is stopped, as when the queue is empty (it runs what it holds first)."""
        assert self.workqueue
        scope, unit = self.workqueue.popitem(last=False)
        while all(unit.values()) and self.workqueue:
            scope, unit = self.workqueue.popitem(last=False)
        if all(unit.values()):
            node.shutdown()
            return
        self.assigned_work.setdefault(node, {})[scope] = unit
        index = self._index_of(node)
        node.send_runtest_some([index[nodeid] for nodeid, done in unit.items() if not done])


def _pending(units: dict[str, Unit]) -> int:
    return sum(1 for unit in units.values() for done in unit.values() if not done)

"""The task scheduler hands out whole tasks and forgets finished ones (issue 12: -n scaling).

xdist's loadscope looked up every handed-out item with ``list.index`` and, on every finished
item, summed the pending items of every task the worker ever had; ``TaskScheduling`` keeps the
same protocol with bookkeeping that does not grow with the run. Driven here with stand-in worker
nodes, as xdist's own tests drive its schedulers.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_plsqlbench.scheduler import TaskScheduling


class Node:
    """A stand-in xdist worker: records what it is asked to run."""

    def __init__(self, name: str) -> None:
        self.gateway = type("Gateway", (), {"id": name})()
        self.sent: list[list[int]] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.append(list(indices))

    def shutdown(self) -> None:
        self.shutting_down = True


def collection(tasks: int, tests: int) -> list[str]:
    return [f"mbpp-plus/t{t:03d}/case-{c:03d}" for t in range(tasks) for c in range(tests)]


def scheduler(pytestconfig: pytest.Config, nodes: list[Node], items: list[str]) -> TaskScheduling:
    sched = TaskScheduling(pytestconfig)
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, items)
    sched.schedule()
    return sched


def drain(sched: TaskScheduling, nodes: list[Node], items: list[str]) -> dict[str, list[str]]:
    """Run what was sent as xdist's workers and controller do, until nothing moves; what each node ran.

    A worker runs an item only once it holds the next one too (or is shutting down: then it runs
    what it holds), and the controller shuts every worker down once ``tests_finished`` says so.
    A node left holding work it never runs is a hung run; the tests' assertions see it.
    """
    ran: dict[str, list[str]] = {n.gateway.id: [] for n in nodes}
    done = {n.gateway.id: 0 for n in nodes}
    progress = True
    while progress:
        progress = False
        if sched.tests_finished:
            for node in nodes:  # DSession.triggershutdown, after every event
                node.shutdown()
        for node in nodes:
            queue = [i for batch in node.sent for i in batch]
            while len(queue) - done[node.gateway.id] >= (1 if node.shutting_down else 2):
                index = queue[done[node.gateway.id]]
                done[node.gateway.id] += 1
                ran[node.gateway.id].append(items[index])
                sched.mark_test_complete(node, index)
                progress = True
                # The worker's bookkeeping holds only tasks with items still to run.
                assert all(not all(unit.values()) for unit in sched.assigned_work[node].values())
                queue = [i for batch in node.sent for i in batch]
    return ran


@pytest.fixture(autouse=True)
def two_workers(pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pytestconfig.option, "tx", ["popen//id=gw0", "popen//id=gw1"], raising=False)
    monkeypatch.setattr(pytestconfig.option, "numprocesses", 2, raising=False)


def test_every_item_runs_once_with_its_task_on_one_worker(pytestconfig: pytest.Config) -> None:
    items = collection(tasks=9, tests=7)
    nodes = [Node("gw0"), Node("gw1")]
    sched = scheduler(pytestconfig, nodes, items)
    ran = drain(sched, nodes, items)
    every = [nodeid for r in ran.values() for nodeid in r]
    assert sorted(every) == sorted(items)
    assert all(ran.values()), ran  # both workers got work
    for node_items in ran.values():
        tasks = [nodeid.rsplit("/", 1)[0] for nodeid in node_items]
        # A task's items on one worker, in collection order, one task after another.
        assert node_items == sorted(node_items)
        assert all(tasks.count(t) == 7 for t in set(tasks))
    assert sched.tests_finished and not sched.has_pending
    assert all(n.shutting_down for n in nodes)


def test_a_crashed_worker_leaves_only_its_unfinished_task_to_run_again(pytestconfig: pytest.Config) -> None:
    items = collection(tasks=6, tests=4)
    nodes = [Node("gw0"), Node("gw1")]
    sched = scheduler(pytestconfig, nodes, items)
    first = nodes[0].sent[0]
    for index in first[:2]:  # gw0 finishes two items of its first task, then dies
        sched.mark_test_complete(nodes[0], index)
    crashed = sched.remove_node(nodes[0])
    assert crashed == items[first[2]]
    requeued: dict[str, Any] = dict(sched.workqueue)
    task = items[first[0]].rsplit("/", 1)[0]
    assert requeued[task] == {items[i]: n < 2 for n, i in enumerate(first)}
    # The survivor runs the rest, the re-queued task's remaining items included.
    ran = drain(sched, nodes[1:], items)
    assert set(items[i] for i in first[2:]) <= set(ran["gw1"])


def test_a_worker_is_shut_down_when_only_finished_units_were_left_in_the_queue(pytestconfig: pytest.Config) -> None:
    """A unit re-queued after a crash and finished by the worker that reran it must not leave a
    worker with nothing to run waiting for work forever (a hung run, seen under load)."""
    items = collection(tasks=2, tests=2)
    nodes = [Node("gw0"), Node("gw1")]
    sched = scheduler(pytestconfig, nodes, items)
    drain(sched, nodes, items)
    gw0, gw1 = nodes
    gw0.shutting_down = gw1.shutting_down = False  # as if both still waited for work
    # The queue holds only a unit whose items have all run (re-queued, then finished elsewhere).
    sched.workqueue["mbpp-plus/t000"] = {items[0]: True, items[1]: True}
    sent_before = len(gw0.sent)
    sched._reschedule(gw0)  # noqa: SLF001 - what a finished item or a crash elsewhere calls
    assert gw0.shutting_down and len(gw0.sent) == sent_before  # nothing empty sent, and told to stop
    assert not sched.workqueue


def test_a_replacement_worker_gets_no_work_before_its_collection_and_all_of_it_after(pytestconfig: pytest.Config) -> None:
    """A worker that crashes while its replacement is still collecting: the re-queued work waits
    for the replacement's collection instead of being lost to it (a run that hung forever)."""
    items = collection(tasks=3, tests=2)
    gw0, gw1 = Node("gw0"), Node("gw1")
    sched = scheduler(pytestconfig, [gw0, gw1], items)
    sent = {n.gateway.id: [items[i] for batch in n.sent for i in batch] for n in (gw0, gw1)}
    assert all(sent.values())
    gw2 = Node("gw2")
    sched.add_node(gw2)  # ready, still collecting
    crashed = sched.remove_node(gw0)  # gw0 dies with all its work still to run
    assert crashed == sent["gw0"][0]
    assert not gw2.sent  # nothing handed to a worker without a collection
    requeued = {nodeid for unit in sched.workqueue.values() for nodeid, done in unit.items() if not done}
    requeued |= {nodeid for unit in sched.assigned_work[gw1].values() for nodeid, done in unit.items() if not done}
    assert set(sent["gw0"]) <= requeued  # none of gw0's work is lost
    sched.add_node_collection(gw2, items)
    sched.schedule()  # what xdist calls when the replacement's collection arrives
    ran = drain(sched, [gw1, gw2], items)
    assert set(sent["gw0"]) <= set(ran["gw1"]) | set(ran["gw2"])
    assert not sched.workqueue and not sched.has_pending


def test_a_lone_replacement_worker_gets_enough_work_to_start(pytestconfig: pytest.Config) -> None:
    """A worker runs an item only once it holds the next one (or is told to stop). A replacement
    that finds a task with one item left at the head of the queue must be given more work too,
    or it waits for it, the controller waits for the worker, and the run hangs (seen under load
    when both original workers had crashed)."""
    items = ["s/a/case-1", "s/b/case-1", "s/b/case-2", "s/b/case-3", "s/c/case-1", "s/c/case-2", "s/c/case-3"]
    gw0, gw1 = Node("gw0"), Node("gw1")
    sched = scheduler(pytestconfig, [gw0, gw1], items)
    sched.remove_node(gw0)  # both workers crash before running anything
    sched.remove_node(gw1)
    assert set(sched.workqueue) == {"s/a", "s/b", "s/c"}
    sched.workqueue.move_to_end("s/a", last=False)  # re-queued first (the order crashes came in)
    gw2 = Node("gw2")
    sched.add_node(gw2)
    sched.add_node_collection(gw2, items)
    sched.schedule()  # what xdist calls when the replacement's collection arrives
    assert sum(map(len, gw2.sent)) >= 2
    ran = drain(sched, [gw2], items)
    assert sorted(ran["gw2"]) == sorted(items)
    assert sched.tests_finished and not sched.workqueue

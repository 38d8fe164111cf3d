"""Benchmark node ids, made and read in one place.

``subset/task/test`` for a single-turn task, ``subset/task/turn-2/test`` for a multi-turn one,
with ``sample-k`` after the task when several answers per task are scored. Everything before
the test part names the task's *scope*: what the xdist scheduler keeps on one worker.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeId:
    """The parts of a benchmark item's node id (``sample`` 0-based, ``turn`` 1-based)."""

    subset: str
    node: str
    test_id: str
    turn: int = 1
    sample: int = 0
    multi_turn: bool = False
    samples: int = 1

    @property
    def task_nodeid(self) -> str:
        return task_nodeid(self.subset, self.node, self.sample, self.samples)

    @property
    def item_name(self) -> str:
        return item_name(self.turn, self.test_id, self.multi_turn)

    def __str__(self) -> str:
        return f"{self.task_nodeid}/{self.item_name}"


def task_nodeid(subset: str, node: str, sample: int = 0, samples: int = 1) -> str:
    """``subset/task`` (``/sample-k`` added when ``samples`` > 1)."""
    base = f"{subset}/{node}"
    return f"{base}/sample-{sample + 1}" if samples > 1 else base


def item_name(turn: int, test_id: str, multi_turn: bool) -> str:
    """The item's name below its task node: ``test`` or ``turn-t/test``."""
    return f"turn-{turn}/{test_id}" if multi_turn else test_id


def is_benchmark(nodeid: str) -> bool:
    """Benchmark items have no ``::`` and at least two slashes."""
    return "::" not in nodeid and nodeid.count("/") >= 2


def parse(nodeid: str) -> NodeId | None:
    """``subset/task[/sample-k][/turn-t]/test`` -> its parts, or None for other node ids."""
    if not is_benchmark(nodeid):
        return None
    parts = nodeid.split("/")
    subset, node, rest = parts[0], parts[1], parts[2:]
    sample, samples, turn, multi = 0, 1, 1, False
    if rest and rest[0].startswith("sample-") and rest[0][7:].isdigit():
        sample = int(rest[0][7:]) - 1
        samples = max(2, sample + 1)
        rest = rest[1:]
    if len(rest) == 2 and rest[0].startswith("turn-") and rest[0][5:].isdigit():
        turn, multi = int(rest[0][5:]), True
        rest = rest[1:]
    if len(rest) != 1:
        return None
    return NodeId(subset, node, rest[0], turn, sample, multi, samples)


def scope_of(nodeid: str) -> str:
    """The task part of a benchmark node id (``subset/task``): one xdist work unit."""
    return "/".join(nodeid.split("/")[:2])


def junit_classname(nodeid: str) -> str:
    """JUnit's ``classname`` of an item: its task (``subset.task``, plus ``.sample-k``)."""
    parts = nodeid.split("/")
    task = parts[:3] if len(parts) > 3 and parts[2].startswith("sample-") else parts[:2]
    return ".".join(task)

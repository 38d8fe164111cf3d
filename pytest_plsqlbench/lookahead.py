"""Look-ahead: while pytest reports one task's items, a thread runs the next task in the database.

Without xdist (``-n 0``) the process otherwise waits for the server at every task: install,
the first test, the batch of the rest, the rollback. Here a task's whole evaluation -- its node
setup and :meth:`~pytest_plsqlbench.runner.TaskRun.outcomes` drained in the order pytest will
ask for the items -- runs as one block; the items then report the outcomes the block stored.
The next block runs on a thread as soon as this one's items start reporting, so the server's
work overlaps pytest's per-item work instead of adding to it.

Nothing about the evaluation changes, only when it happens: the same calls, on the same
connection, in the same order (finish the previous task, set up this one, each test in item
order), one block at a time. A stored exception is raised where pytest would have met it.

Only tasks whose every test is judged error-only (``Judge.error_only``: MBPP's ``assert``) take
part: the server alone decides them, so a thread sharing the interpreter with pytest's reporting
cannot change a verdict. Tasks judged
by client-side timing (ProcArena B2) or by other judges run as before. The order comes from
``session.items`` once. Tasks pytest skips before setting them up are stepped over (a run a
job already started for one is ended unused); if pytest asks for a task out of that order (a
plugin reordering at run time), or an interrupt reaches the main thread while it waits for the
thread, the look-ahead drains and stops for the rest of the session.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from .errors import InfrastructureError

if TYPE_CHECKING:
    from .outcomes import Verdict
    from .protocols import Judge
    from .runner import TaskRun
    from .tasks import Task, Turn, UnitTest


class TaskBlock(Protocol):
    """What the look-ahead needs of a task's node (``collect.TaskNode``): it sets the task up
    and ends its run, and never imports the collector that owns the node type."""

    @property
    def nodeid(self) -> str: ...

    @property
    def task(self) -> Task: ...

    @property
    def run(self) -> TaskRun | None: ...

    def setup_now(self) -> None: ...

    def finish_run(self) -> None: ...


class BlockItem(Protocol):
    """What the look-ahead needs of one test item (``collect.PlsqlItem``)."""

    @property
    def nodeid(self) -> str: ...

    @property
    def task_node(self) -> TaskBlock: ...

    @property
    def turn(self) -> Turn: ...

    @property
    def test(self) -> UnitTest: ...

    def get_closest_marker(self, name: str) -> Any: ...

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Block:
    """A run of consecutive items of one task node: what pytest sets up once and tears down once."""

    node: TaskBlock
    items: list[BlockItem]
    eligible: bool
    #: Set once setup and every item have run (by the thread, or inline for the first block).
    ready: threading.Event = field(default_factory=threading.Event)
    setup_error: BaseException | None = None
    outcomes: dict[str, Verdict | BaseException] = field(default_factory=dict)
    #: The next block's job finishes this block's run first; set once it has.
    finishing: threading.Event | None = None
    finish_error: BaseException | None = None
    #: A job runs it (started when the block before it began reporting).
    queued: bool = False
    #: Prepared by a job, and pytest has set it up (else it is an orphan to finish on drain).
    claimed: bool = False


def _passes_through(exc: BaseException) -> bool:
    return isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit))


def eligible(node: TaskBlock, judges: Mapping[str, Judge]) -> bool:
    """Tasks whose every test is judged error-only on an installed answer, and that can run."""
    task = node.task
    return (
        task.answer_mode == "install"
        and task.not_runnable is None
        and all(judges[test.kind].error_only for turn in task.turns for test in turn.tests)
    )


def enabled_for(config: pytest.Config) -> bool:
    """Only a process that runs every item itself in ``session.items`` order: no xdist, a run
    that calls the items (not ``--setup-only``/``--setup-plan``/``--collect-only``), and no
    per-test timeout."""
    option = config.option
    return (
        getattr(config, "workerinput", None) is None
        and not getattr(option, "numprocesses", None)
        and not getattr(option, "setuponly", False)
        and not getattr(option, "setupplan", False)
        and not getattr(option, "collectonly", False)
        # A per-test timeout (pytest-timeout) times each item; a block does a task's work in one
        # item's setup, or on a thread no signal reaches.
        and not _per_test_timeout(config)
    )


def _per_test_timeout(config: pytest.Config) -> bool:
    value = getattr(config.option, "timeout", None)
    if value is None:
        try:
            value = config.getini("timeout")
        except (ValueError, KeyError):
            value = None
    try:
        return float(value or 0) > 0
    except (TypeError, ValueError):
        return False


def blocks_of(items: Sequence[tuple[Any, TaskBlock | None]], judges: Mapping[str, Judge]) -> list[Block]:
    """Consecutive items of one task node, from ``(item, its task node)`` pairs in run order
    (the node is ``None`` for an item that is not a benchmark test); ``judges`` by kind."""
    blocks: list[Block] = []
    last = None
    for item, node in items:
        if node is None:
            last = None  # pytest tears the task down before a plain test: a new block after it
            continue
        if last is node:
            blocks[-1].items.append(item)
        else:
            # A task pytest will skip before setting it up (a skip mark) is not run ahead.
            blocks.append(Block(node, [item], eligible(node, judges) and item.get_closest_marker("skip") is None))
        last = node
    return blocks


class Lookahead:
    def __init__(self, items: Sequence[tuple[Any, TaskBlock | None]], judges: Mapping[str, Judge]) -> None:
        self.blocks = blocks_of(items, judges)
        #: Index of the block pytest sets up next.
        self.pos = 0
        self.active = True
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        self._by_node: dict[int, Block] = {}

    # ------------------------------------------------------------------ called by TaskNode
    def setup(self, node: TaskBlock) -> bool:
        """Set ``node`` up from its block (running it now if no job did); False: set it up as usual."""
        if not self.active:
            return False
        found = self._find(node)
        if found is None:
            log.info("look-ahead off: task %s was set up out of the collected order", node.nodeid)
            self.drain()
            return False
        self._skip_to(found)
        block = self.blocks[found]
        self.pos = found + 1
        self._by_node[id(node)] = block
        if not block.eligible:
            return False
        try:
            if block.queued:
                block.ready.wait()
                block.claimed = True
            else:
                self._prepare(block)
        except BaseException:
            # Interrupted while the thread may still be in this block (Ctrl-C, a signal handler
            # that raises): it must be done before pytest ends the task's run on this thread.
            self.drain()
            raise
        self._launch_next(block)
        if block.setup_error is not None:
            raise block.setup_error
        return True

    def outcome(self, item: BlockItem) -> Verdict | None:
        """The item's stored outcome (None: its task runs as usual); a stored error is raised."""
        block = self._by_node.get(id(item.task_node))
        if block is None or not block.ready.is_set():
            return None
        found = block.outcomes.get(item.nodeid)
        if found is None:
            # Not in the collected order (it was not run ahead), and its task's run is ended or
            # in use by the thread: never run it against the wrong scope.
            raise InfrastructureError(f"look-ahead: no outcome was prepared for {item.nodeid}")
        if isinstance(found, BaseException):
            raise found
        return found

    def teardown(self, node: TaskBlock) -> None:
        """Wait until a job has finished the node's run, if one took that over; raise its error."""
        block = self._by_node.pop(id(node), None)
        if block is None:
            return
        block.outcomes = {}  # each item kept its own; an MBPP+ run would hold them all again
        if block.finishing is None:
            return
        block.finishing.wait()
        if block.finish_error is not None:
            raise block.finish_error

    def _find(self, node: TaskBlock) -> int | None:
        """The block pytest sets up now: the next one, or a later one when pytest skipped those
        in between before setting their nodes up (a task the data cannot run, a skip mark)."""
        for index in range(self.pos, len(self.blocks)):
            if self.blocks[index].node is node:
                return index
        return None

    def _skip_to(self, index: int) -> None:
        """Blocks before ``index`` that pytest never set up: a job may have run one of them
        already; wait for it and end that run, as if it had never started."""
        skipped = self.blocks[self.pos : index]
        if not skipped:
            return
        self.wait()
        for block in skipped:
            self._end_unused(block)

    def _end_unused(self, block: Block) -> None:
        if block.ready.is_set() and not block.claimed:
            block.outcomes = {}
            try:
                block.node.finish_run()
            except Exception as exc:  # noqa: BLE001 - the task was not run: say so, go on
                log.warning("look-ahead: ending the unused run of %s failed: %s", block.node.nodeid, exc)

    # ------------------------------------------------------------------ the work
    def _prepare(self, block: Block) -> None:
        """The block's setup and every item's outcome, in the order pytest asks for them."""
        node = block.node
        try:
            try:
                node.setup_now()
            except BaseException as exc:  # noqa: BLE001 - raised again where pytest sets the node up
                if _passes_through(exc):
                    raise
                block.setup_error = exc
                return
            run = node.run
            assert run is not None
            plan = [(item.turn.index, item.test) for item in block.items]
            verdicts = run.outcomes(plan)
            for i, item in enumerate(block.items):
                if self._cancel.is_set():
                    return
                try:
                    block.outcomes[item.nodeid] = next(verdicts)
                except Exception as exc:  # noqa: BLE001 - raised again in the item's call
                    block.outcomes[item.nodeid] = exc
                    verdicts = run.outcomes(plan[i + 1 :])
        finally:
            block.ready.set()

    def _launch_next(self, block: Block) -> None:
        """Start the next block on a thread: finish this block's run, then run the next one."""
        nxt = self.blocks[self.pos] if self.pos < len(self.blocks) else None
        if nxt is None or not nxt.eligible or nxt.node is block.node or self._cancel.is_set():
            return
        self.wait()
        finishing = threading.Event()
        block.finishing = finishing
        nxt.queued = True

        def job() -> None:
            try:
                try:
                    if block.node.run is not None:
                        block.node.run.finish()
                except BaseException as exc:  # noqa: BLE001 - raised again in the node's teardown
                    block.finish_error = exc
                finally:
                    finishing.set()
                self._prepare(nxt)
            except BaseException:  # noqa: BLE001 - a thread must not die silently
                log.exception("look-ahead: preparing %s failed", nxt.node.nodeid)
                nxt.setup_error = nxt.setup_error or InfrastructureError(f"look-ahead failed for {nxt.node.nodeid}")
                finishing.set()
                nxt.ready.set()

        self._thread = threading.Thread(target=job, name="plsqlbench-lookahead", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def drain(self) -> None:
        """Stop looking ahead: let a running job end at its next item, and end the run of a block
        that was prepared but never set up (``-x``, an interrupt, a reordered session)."""
        self.active = False
        self._cancel.set()
        self.wait()
        for block in self.blocks[self.pos :]:
            self._end_unused(block)

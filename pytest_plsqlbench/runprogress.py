"""Progress of the test run itself: items done of all, rate, ETA, and the item running longest.

pytest's dots say nothing about time, and one long item (a ProcArena B2 measurement runs for a
minute) looks like a hang. The process that owns the terminal -- the xdist controller, which hears
every worker's ``logstart`` and reports, or the only process with ``-n 0`` -- counts finished items
and, from a daemon thread, prints one line every ``--plsql-progress`` seconds once the run has
lasted that long::

    plsql tests: 120/800 items (15%) | 3.2 items/s, ETA 3m32s | running longest: procarena-sample/postgres_b2_000/perf (1m04s)

The longest-running item is named once it has run for a full interval, whether or not anything
else finished meanwhile: a sign of life for long items of any family. ``--plsql-progress=0`` turns
the lines off; a run shorter than one interval prints none.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

log = logging.getLogger(__name__)


def _duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f}s"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class RunProgress:
    """Counts items as their last report arrives; prints a line every ``interval`` seconds."""

    def __init__(self, write: Callable[[str], None], interval: float, *, clock: Callable[[], float] = time.monotonic,
                 poll: float = 0.25) -> None:
        self._write = write
        self.interval = interval
        self._clock = clock
        self._poll = min(poll, interval / 2)
        self._lock = threading.Lock()
        self.total = 0
        self.done = 0
        self.started: float | None = None
        #: Node id -> when it started, for the items running now.
        self.running: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lines: list[str] = []

    # ----------------------------------------------------------------- pytest hooks (controller)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not self.total:
            self.total = len(session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.total = max(self.total, len(ids))  # every worker collects the same items

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.start()

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        with self._lock:
            now = self._clock()
            if self.started is None:  # the rate counts from the first item, not from start-up
                self.started = now
            self.running[nodeid] = now

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        with self._lock:
            self.running.pop(report.nodeid, None)
            self.done += 1

    def pytest_sessionfinish(self) -> None:
        self.stop()

    # ----------------------------------------------------------------- the line
    def line(self) -> str:
        """The progress line now."""
        now = self._clock()
        with self._lock:
            done, total, started = self.done, self.total, self.started if self.started is not None else now
            longest = min(self.running.items(), key=lambda kv: kv[1], default=None)
        elapsed = max(now - started, 1e-9)
        text = f"plsql tests: {done}/{total} items" + (f" ({100 * done // total}%)" if total else "")
        rate = done / elapsed
        if done and rate > 0:
            text += f" | {rate:.1f} items/s" if rate >= 1 else f" | {rate * 60:.1f} items/min"
            if total > done:
                text += f", ETA {_duration((total - done) / rate)}"
        if longest is not None and now - longest[1] >= self.interval:
            text += f" | running longest: {longest[0]} ({_duration(now - longest[1])})"
        return text

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="plsql-test-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=2)

    def _run(self) -> None:
        last = self._clock()
        while not self._stop.wait(self._poll):
            now = self._clock()
            if now - last < self.interval:
                continue
            last = now
            with self._lock:
                begun = self.started is not None
                finished = self.total and self.done >= self.total
            if finished:
                return
            if not begun:
                continue
            text = self.line()
            self.lines.append(text)
            log.info(text)
            try:
                self._write(text)
            except Exception:  # noqa: BLE001 - a progress line must never break the run
                log.debug("cannot write the test progress line", exc_info=True)


def uncaptured(config: pytest.Config) -> contextlib.AbstractContextManager[Any]:
    """Outside any test's captured output (as pytest's live logging writes): with ``-n 0`` a line
    is written while a test runs or waits, and would otherwise land in that test's capture."""
    capman = config.pluginmanager.get_plugin("capturemanager")
    return capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()


def terminal_writer(config: pytest.Config) -> Callable[[str], None]:
    """Write one line to pytest's terminal from any thread, outside any test's captured output,
    after a line of progress dots (as the generation progress does)."""

    def write(line: str) -> None:
        # Looked up when writing: at configure time pytest's terminal reporter may not exist yet.
        terminal = config.pluginmanager.get_plugin("terminalreporter")
        if terminal is None:
            return
        with uncaptured(config):
            writer = getattr(terminal, "_tw", None)
            if writer is not None and getattr(writer, "width_of_current_line", None):
                writer.line()
            terminal.write_line(line)

    return write


def register(config: pytest.Config, interval: float) -> RunProgress | None:
    """On the process that owns the terminal, for a run that executes items."""
    if interval <= 0 or getattr(config, "workerinput", None) is not None or config.getoption("collectonly", False):
        return None
    progress = RunProgress(terminal_writer(config), interval)
    config.pluginmanager.register(progress, "plsqlbench-run-progress")
    return progress

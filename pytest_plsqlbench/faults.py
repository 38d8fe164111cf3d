"""Faults above the database: a worker process that dies while running a benchmark item.

Database faults (a killed backend, a killed embedded server) are the runner's: it recovers
the backend and retries the test once (:meth:`~pytest_plsqlbench.runner.TaskRun.run_test`).
This module handles the process around it. When an xdist worker crashes, xdist replaces the
worker, puts the rest of the crashed task back in the queue (our scheduler is xdist's
``loadscope``, which re-queues the whole work unit) and asks ``pytest_handlecrashitem`` what
to report for the item that was running (xdist >= 2.2.1, hook semantics checked in 3.8):

* first crash of a benchmark item: reported as ``rerun`` (not a failure, not a result); the
  item runs again in a fresh worker with a fresh database;
* second crash: reported failed; the results collector records a report without a
  benchmark record as ``infrastructure``, which the metrics exclude and list.

An item crashes a worker "again" only in a later worker, so a bug that kills every worker it
touches costs two workers, not the run (xdist's ``--max-worker-restart`` still applies).
Other items keep xdist's default behaviour.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import pytest

from .nodeids import is_benchmark
from .state import is_active

log = logging.getLogger(__name__)

#: Runs of one item whose worker died before giving up on it.
MAX_CRASHES = 2
RERUN = "rerun"


#: Kept for callers of the old name.
is_benchmark_nodeid = is_benchmark


class CrashRetry:
    """Controller-side plugin: one more run for a benchmark item whose worker crashed."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.crashes: Counter[str] = Counter()

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> bool | None:
        _drop_finished_units(sched)
        if not is_benchmark_nodeid(crashitem):
            return None
        self.crashes[crashitem] += 1
        count = self.crashes[crashitem]
        if count < MAX_CRASHES and _will_run_again(sched, crashitem):
            log.warning("%s: its worker crashed; running it once more in a fresh worker", crashitem)
            report.outcome = RERUN  # type: ignore[assignment]
            report.longrepr = f"{report.longrepr}; running it once more in a fresh worker"
            return True
        _forget(sched, crashitem)
        log.error("%s: its worker crashed %d time(s); reporting it as an infrastructure error", crashitem, count)
        report.longrepr = f"[infrastructure] {report.longrepr} ({count} crash(es), not retried further)"
        return True

    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, Any] | None:
        if report.outcome == RERUN:
            return RERUN, "R", (RERUN.upper(), {"yellow": True})
        return None

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.outcome == RERUN:
            _drop_junit_testcase(self.config, report)


def _drop_junit_testcase(config: pytest.Config, report: pytest.TestReport) -> None:
    """Forget the empty ``<testcase>`` junitxml opened for a rerun report (it would read as passed)."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - pytest moved it
        return
    xml: Any = config.stash.get(xml_key, None)
    if xml is None:
        return
    try:
        reporter = xml.node_reporter(report)  # the one junitxml opened (its key differs by pytest version)
        for key in [k for k, v in xml.node_reporters.items() if v is reporter]:
            del xml.node_reporters[key]
        if reporter in xml.node_reporters_ordered:
            xml.node_reporters_ordered.remove(reporter)
    except (AttributeError, TypeError) as exc:  # junitxml internals changed: an extra empty testcase, no more
        log.debug("junitxml: cannot drop the rerun testcase of %s: %s", report.nodeid, exc)


def _will_run_again(sched: Any, nodeid: str) -> bool:
    """Whether the scheduler already re-queued ``nodeid``; else ask it to (load scheduling)."""
    if _pending_units(sched, nodeid):
        return True  # loadscope (our TaskScheduling) re-queues the crashed work unit itself
    try:
        sched.mark_test_pending(nodeid)
    except (NotImplementedError, AttributeError, ValueError):
        return False
    return True


def _pending_units(sched: Any, nodeid: str) -> list[dict[str, bool]]:
    """Work units (queued or handed to a live worker) in which ``nodeid`` is still to run."""
    units: list[dict[str, bool]] = []
    queued = getattr(sched, "workqueue", None)
    if isinstance(queued, dict):
        units.extend(queued.values())
    assigned = getattr(sched, "assigned_work", None)
    if isinstance(assigned, dict):
        for workload in assigned.values():
            units.extend(workload.values())
    return [u for u in units if isinstance(u, dict) and u.get(nodeid) is False]


def _drop_finished_units(sched: Any) -> None:
    """Take work units with nothing left to run out of loadscope's queue.

    On a crash, loadscope re-queues every unit the dead worker ever had, finished ones
    included; handing a finished unit to a worker sends it an empty batch, which produces no
    event, and the scheduler can then wait forever for the rest of the queue (seen with
    xdist 3.8 when the crashed worker had finished other tasks before).
    """
    queued = getattr(sched, "workqueue", None)
    if isinstance(queued, dict):
        for scope in [s for s, unit in queued.items() if isinstance(unit, dict) and all(unit.values())]:
            del queued[scope]


def _forget(sched: Any, nodeid: str) -> None:
    """Mark ``nodeid`` done wherever loadscope re-queued it, so it is not run a third time.

    A unit already handed to a live worker still reaches that worker (xdist cannot take it
    back); marking it keeps the scheduler's bookkeeping right.
    """
    for unit in _pending_units(sched, nodeid):
        unit[nodeid] = True
    _drop_finished_units(sched)


@pytest.hookimpl(trylast=True)  # after the plugin resolved the settings
def pytest_configure(config: pytest.Config) -> None:
    if is_active(config) and getattr(config, "workerinput", None) is None and config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(CrashRetry(config), "plsqlbench-crash-retry")

"""ProcArena's judge and metric-family hook implementations, kept out of :mod:`.loader` so the
loader (which the B2 judge reads task files through) imports neither the judges nor the metrics."""

from __future__ import annotations

from typing import Any

import pytest

from ..summary import shown_ids
from .loader import HOLLOW_KEY


def pytest_plsql_judges(config: pytest.Config) -> list:
    from .judge import judges  # noqa: PLC0415 - imported when a run asks, not at pytest's start

    return judges()


def pytest_plsql_metric_families() -> list:
    from .metrics import ProcArenaFamily  # noqa: PLC0415 - imported when a report asks

    return [ProcArenaFamily()]


#: The judge's mark on a task whose gold run showed it hollow (gold raised on every call, changed
#: nothing, ...): its calls are left out of the metrics as reference failures with this message.
_HOLLOW_AT_RUN = "hollow task: "


def _hollow_at_run(results: dict[str, Any]) -> dict[str, list[str]]:
    """subset -> "id: why" of the tasks the judge found hollow when it ran gold."""
    out: dict[str, dict[str, str]] = {}
    for task in results.get("tasks") or ():
        for test in task.get("tests") or ():
            message = str(test.get("message") or "")
            if (test.get("extra") or {}).get("reference_failed") and _HOLLOW_AT_RUN in message:
                why = message.split(_HOLLOW_AT_RUN, 1)[1].splitlines()[0]
                out.setdefault(str(task.get("subset")), {}).setdefault(str(task.get("task_id")), why)
    return {name: [f"{tid}: {why}" for tid, why in ids.items()] for name, ids in out.items()}


#: The run's data report, as the results document holds it (terminal summary reads it back).
_REPORT_KEY = pytest.StashKey[dict[str, dict[str, list[str]]]]()


def _report(config: pytest.Config, results: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    """subset -> the tasks left out as hollow at load (``left_out_hollow``) and when the judge
    ran gold (``hollow_at_run``)."""
    report: dict[str, dict[str, list[str]]] = {}
    for name, ids in sorted(config.stash.get(HOLLOW_KEY, {}).items()):
        report.setdefault(name, {})["left_out_hollow"] = list(ids)
    for name, ids in sorted(_hollow_at_run(results).items()):
        report.setdefault(name, {})["hollow_at_run"] = ids
    return report


def pytest_plsql_results(config: pytest.Config, results: dict[str, Any]) -> None:
    """The data report: ProcArena and PLForge tasks left out as hollow, by subset -- at load (what
    they ask no call can judge) and when the judge ran gold (``hollow_at_run``)."""
    report = config.stash[_REPORT_KEY] = _report(config, results)
    if report:
        results["procarena_report"] = report


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is not None:
        return
    report = config.stash.get(_REPORT_KEY, None)
    if report is None:  # no results document was built (nothing collected): what loading left out
        report = _report(config, {})
    if not report:
        return
    terminalreporter.write_sep("-", "ProcArena data report")
    for name, parts in sorted(report.items()):
        if parts.get("left_out_hollow"):
            ids = parts["left_out_hollow"]
            terminalreporter.write_line(
                f"{name}: {len(ids)} task(s) left out as hollow (part of what they ask, no call can judge; "
                f"'plsqlbench validate' says more): {shown_ids([i.split(':', 1)[0] for i in ids], 8)}")
        if parts.get("hollow_at_run"):
            ids = parts["hollow_at_run"]
            terminalreporter.write_line(
                f"{name}: {len(ids)} task(s) hollow when gold ran, left out of the metrics as reference failures: "
                + "; ".join(ids[:8]) + (f" ... (+{len(ids) - 8})" if len(ids) > 8 else ""))

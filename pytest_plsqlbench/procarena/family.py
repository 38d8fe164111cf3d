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


def pytest_plsql_results(config: pytest.Config, results: dict[str, Any]) -> None:
    """The data report: ProcArena and PLForge tasks left out at load as hollow, by subset."""
    left = config.stash.get(HOLLOW_KEY, {})
    if left:
        results["procarena_report"] = {name: {"left_out_hollow": list(ids)} for name, ids in sorted(left.items())}


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is not None:
        return
    left = config.stash.get(HOLLOW_KEY, {})
    if not left:
        return
    terminalreporter.write_sep("-", "ProcArena data report")
    for name, ids in sorted(left.items()):
        terminalreporter.write_line(
            f"{name}: {len(ids)} task(s) left out as hollow (part of what they ask, no call can judge; "
            f"'plsqlbench validate' says more): {shown_ids([i.split(':', 1)[0] for i in ids], 8)}")

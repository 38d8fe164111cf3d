"""ProcArena's judge and metric-family hook implementations, kept out of :mod:`.loader` so the
loader (which the B2 judge reads task files through) imports neither the judges nor the metrics."""

from __future__ import annotations

import pytest


def pytest_plsql_judges(config: pytest.Config) -> list:
    from .judge import judges  # noqa: PLC0415 - imported when a run asks, not at pytest's start

    return judges()


def pytest_plsql_metric_families() -> list:
    from .metrics import ProcArenaFamily  # noqa: PLC0415 - imported when a report asks

    return [ProcArenaFamily()]

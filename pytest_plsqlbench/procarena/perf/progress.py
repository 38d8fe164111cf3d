"""The marks a long ``perf`` item writes on pytest's progress line while it measures."""

from __future__ import annotations

import pytest

#: The running configs (the B2 plugin, :mod:`.b2`, adds and removes them).
CONFIGS: list[pytest.Config] = []


def progress(text: str) -> None:
    """Write ``text`` on pytest's progress line while a ``perf`` item measures (each run is a
    mark: an item of a minute shows it is alive). Only the process that owns the terminal
    (``-n 0``); an xdist worker has none -- its records carry the runs and their rate instead."""
    from ...runprogress import uncaptured
    from ...state import worker_id

    if not CONFIGS:
        return
    config = CONFIGS[-1]
    if worker_id(config) != "main" or config.get_verbosity() < 0:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    with uncaptured(config):
        reporter.write(text, flush=True)

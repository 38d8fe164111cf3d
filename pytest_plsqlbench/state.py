"""Per-run objects kept on ``config.stash``, reachable from any hook or plugin."""

from __future__ import annotations

import pytest

from .settings import Settings

SETTINGS_KEY = pytest.StashKey[Settings]()


def get_settings(config: pytest.Config) -> Settings:
    """The run's resolved settings (only set when ``--subset`` or the CLI configured them)."""
    return config.stash[SETTINGS_KEY]


def is_active(config: pytest.Config) -> bool:
    return SETTINGS_KEY in config.stash and bool(config.stash[SETTINGS_KEY].tasks.subsets)


def worker_id(config: pytest.Config) -> str:
    """``gw0``, ``gw1`` ... under xdist, ``main`` otherwise (one place derives per-worker names)."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput["workerid"] if workerinput else "main"


def worker_count(config: pytest.Config) -> int:
    workerinput = getattr(config, "workerinput", None)
    return int(workerinput.get("workercount", 1)) if workerinput else 1


def is_xdist_controller(config: pytest.Config) -> bool:
    """True on the xdist controller (which runs no tests, but aggregates their reports)."""
    return getattr(config, "workerinput", None) is None and bool(getattr(config.option, "numprocesses", None))

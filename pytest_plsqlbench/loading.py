"""Show what data loading and conversion do, and how long they take, on the terminal.

Tasks are loaded in ``pytest_configure``, before pytest's terminal reporter exists and while
output capture is off, so the ``pytest_plsqlbench.progress`` log is written to stderr by a
handler this plugin installs for the duration of the run. Only the process that owns the
terminal shows it -- the xdist controller, or the only process with ``-n 0`` -- so a line
appears once, not once per worker (workers load the controller's cached conversion anyway).
``-qq`` silences it.
"""

from __future__ import annotations

import logging
import sys

import pytest

from .state import worker_id

PROGRESS_LOGGER = "pytest_plsqlbench.progress"
_HANDLER = pytest.StashKey[logging.Handler]()


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (pytest swaps it while capturing)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.setStream(sys.stderr)
        super().emit(record)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("plsql_subset", None) or worker_id(config) != "main":
        return
    if config.get_verbosity() < -1:
        return
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger(PROGRESS_LOGGER)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    config.stash[_HANDLER] = handler


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    handler = config.stash.get(_HANDLER, None)
    if handler is not None:
        logger = logging.getLogger(PROGRESS_LOGGER)
        logger.removeHandler(handler)
        logger.propagate = True
        del config.stash[_HANDLER]

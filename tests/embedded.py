"""One embedded PostgreSQL backend for a test module (the fixture shape every backend test uses)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from pytest_plsqlbench.dialects.postgres import PostgresBackend
from pytest_plsqlbench.settings import Settings


@contextlib.contextmanager
def started_backend(worker: str, **settings: Any) -> Iterator[PostgresBackend]:
    """A started backend for ``worker`` with flat ``settings`` (``Settings.of``), stopped on exit."""
    backend = PostgresBackend(Settings.of(subsets=(), **settings), worker=worker)
    backend.start()
    try:
        yield backend
    finally:
        backend.stop()

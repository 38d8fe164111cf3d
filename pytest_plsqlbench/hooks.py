"""Hook specifications: where users plug in subsets, databases, models, judges, metrics and reports.

Our own implementations are ``trylast`` hookimpls, so a ``conftest.py`` or plugin that
implements the same hook wins without monkeypatching.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import argparse

    from .answers import Answer, Exchange
    from .episode import Episode
    from .judges import Judge
    from .manifests import Manifest
    from .protocols import BackendBase as Backend
    from .protocols import Dialect, Family
    from .settings import Settings
    from .tasks import Task


@pytest.hookspec(firstresult=True)
def pytest_plsql_load_subset(
    config: pytest.Config, manifest: Manifest, settings: Settings
) -> Sequence[Task] | None:
    """Return the tasks of ``manifest`` in ``settings.database.dialect``, or None if not your loader."""


@pytest.hookspec(firstresult=True)
def pytest_plsql_make_backend(config: pytest.Config, settings: Settings) -> Backend | None:
    """Return the database backend for ``settings.database.dialect``/``settings.database.kind`` (not started)."""


@pytest.hookspec(firstresult=True)
def pytest_plsql_generate(
    config: pytest.Config,
    task: Task,
    turn: int,
    history: Sequence[Exchange],
    sample: int,
) -> Answer | None:
    """Return the answer for ``task`` at ``turn`` (1-based) given the conversation so far."""


@pytest.hookspec
def pytest_plsql_prefetch(config: pytest.Config, tasks: Sequence[Task]) -> None:
    """Start obtaining answers for ``tasks`` ahead of their tests (optional, may be async)."""


@pytest.hookspec
def pytest_plsql_results(config: pytest.Config, results: dict[str, Any]) -> None:
    """Called on the controller with the final results document, before it is written."""


@pytest.hookspec
def pytest_plsql_judges(config: pytest.Config) -> Sequence[Judge]:
    """Return judges for unit-test kinds (a judge for a built-in kind replaces ours)."""


@pytest.hookspec
def pytest_plsql_dialects() -> Sequence[Dialect]:
    """Return the dialects you add (``--plsql-dialect NAME``, a manifest's ``dialects:``)."""


@pytest.hookspec
def pytest_plsql_families() -> Sequence[Family]:
    """Return the benchmark families you add (a manifest's ``metrics: NAME``)."""


@pytest.hookspec
def pytest_plsql_metric_families() -> Sequence[Family]:
    """Deprecated spelling of :func:`pytest_plsql_families`, kept for one release."""


@pytest.hookspec
def pytest_plsql_cli(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add your ``plsqlbench`` subcommands (``subparsers.add_parser``; ``set_defaults(func=...)``
    with a handler returning the exit code)."""


@pytest.hookspec(firstresult=True)
def pytest_plsql_episode(config: pytest.Config, task: Task, sample: int) -> Episode | None:
    """Return the Episode that plays ``task``'s turns on this worker (e.g. an interactive one), or None."""

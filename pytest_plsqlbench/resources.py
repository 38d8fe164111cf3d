"""Where the shipped ``tasks/`` and ``fixtures/`` folders are, installed or in a checkout.

The wheel maps the repository's top-level ``tasks/`` and ``fixtures/`` into the package
(``pytest_plsqlbench/bundled_tasks``, ``pytest_plsqlbench/bundled_fixtures``); an editable
install or a plain checkout finds them next to the package instead.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PKG = Path(__file__).resolve().parent


@cache
def _find(name: str) -> Path:
    for candidate in (_PKG / f"bundled_{name}", _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"pytest-plsqlbench is installed without its {name}/ folder")


def tasks_dir() -> Path:
    return _find("tasks")


def fixtures_dir() -> Path:
    return _find("fixtures")

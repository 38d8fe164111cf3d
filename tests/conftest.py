"""Shared fixtures for the project's own tests.

Real data lives in ``../shared/data`` beside the checkout (read-only, never copied into the
repository). Tests reach it the way a user would: through ``--plsql-data`` /
``--plsql-source NAME=PATH`` or the matching environment variables.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The read-only shared data folder (``PLSQLBENCH_SHARED_DATA`` or ``../shared/data``)."""
    path = Path(os.environ.get("PLSQLBENCH_SHARED_DATA", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        pytest.skip(f"shared benchmark data not found at {path} (set PLSQLBENCH_SHARED_DATA)")
    return path


@pytest.fixture(scope="session")
def mbppplus_file(shared_data: Path) -> Path:
    return shared_data / "mbppplus" / "MbppPlus.jsonl"


@pytest.fixture(scope="session")
def mbpp_sanitized_file(shared_data: Path) -> Path:
    return shared_data / "mbpp-sanitized" / "mbpp.jsonl"


@pytest.fixture(scope="session")
def plsqlbench_sample(shared_data: Path) -> Path:
    return shared_data / "plsqlbench-sample"

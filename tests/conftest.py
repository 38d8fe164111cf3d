"""Shared fixtures for the project's own tests.

Real data lives in ``../shared/data`` beside the checkout (read-only, never copied into the
repository). Tests reach it the way a user would: through ``--plsql-data`` /
``--plsql-source NAME=PATH`` or the matching environment variables.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
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


# --------------------------------------------------------------------------- tests that run alone
@contextlib.contextmanager
def _machine(folder: Path, alone: bool) -> Iterator[None]:
    """A reader-writer lock over the test run's xdist workers: every test holds it shared, an
    ``alone`` test exclusively. The gate makes a waiting ``alone`` test go before tests that ask
    after it (flock alone would let the other worker's next tests starve it)."""
    folder.mkdir(exist_ok=True)
    with open(folder / "gate", "a") as gate, open(folder / "machine", "a") as machine:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(machine, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(machine, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test marked ``alone`` (its subject is the machine's load: the B2 CPU-hog test) runs while
    no other xdist worker runs a test, its fixtures' setup and teardown included; the load it
    asserts against is then the one it makes itself."""
    uid = getattr(item.config, "workerinput", {}).get("testrunuid")
    if not uid:  # -n 0: one test at a time anyway
        yield
        return
    with _machine(Path(tempfile.gettempdir()) / f"plsqlbench-tests-{uid}", item.get_closest_marker("alone") is not None):
        yield

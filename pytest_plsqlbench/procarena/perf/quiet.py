"""One B2 measurement at a time on this machine.

Timing is only honest on a quiet core: two xdist workers timing at once would each slow the
other down by an amount neither can see. Every B2 measurement (scaling excluded, all rounds of
all contenders included) holds an exclusive lock on one file in the temporary directory, shared
by every worker of every pytest-plsqlbench run of this user on this machine; other items keep
running meanwhile (they are not timed). The time spent waiting is recorded with the result.
"""

from __future__ import annotations

import contextlib
import getpass
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock

#: Waiting longer than this for another worker's measurement is an infrastructure problem.
WAIT_S = 3600.0


def lock_path() -> Path:
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name (containers)
        user = "user"
    return Path(tempfile.gettempdir()) / f"plsqlbench-b2-{user}.lock"


@contextlib.contextmanager
def measuring(path: Path | None = None, timeout: float = WAIT_S) -> Iterator[dict[str, float]]:
    """Hold the measurement lock; yields ``{"waited_s": ...}`` (filled on entry)."""
    info = {"waited_s": 0.0}
    t0 = time.monotonic()
    with FileLock(str(path or lock_path()), timeout=timeout):
        info["waited_s"] = time.monotonic() - t0
        yield info

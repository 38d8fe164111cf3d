"""A pytest plugin the benchmarks load (``-p run_probe``) to see inside a run's processes.

Each process (the controller and every xdist worker) writes one JSON file into
``$BENCH_PROBE_DIR`` when it ends: its role, its peak RSS, its CPU seconds and, where benchmark items ran, the
wall-clock time the first one started and finished (``time.time()``, comparable with the
launching process's clock).
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path
from typing import Any

import pytest

_first: dict[str, float] = {}


def pytest_runtest_call(item: pytest.Item) -> None:
    _first.setdefault("first_item_start", time.time())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call":
        _first.setdefault("first_item_end", time.time())


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = os.environ.get("BENCH_PROBE_DIR")
    if not folder:
        return
    worker: Any = getattr(config, "workerinput", None)
    role = worker["workerid"] if worker else "controller"
    usage = resource.getrusage(resource.RUSAGE_SELF)
    data = {"role": role, "pid": os.getpid(), "peak_rss_mb": usage.ru_maxrss / 1024,
            "cpu_s": usage.ru_utime + usage.ru_stime, **_first}
    Path(folder, f"{role}-{os.getpid()}.json").write_text(json.dumps(data))

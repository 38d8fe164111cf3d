"""Compute expected outputs by running canonical Python solutions in a child process.

Conversion time only (nothing Python runs at evaluation time). Each batch of calls runs in
a fresh ``python -S -s -P _child.py`` (standard library only) in a temporary directory with sockets and subprocesses
disabled, a fixed hash seed (so set-derived outputs are reproducible), a per-call CPU-time
limit, and a parent-side wall-clock watchdog: a call that hangs in C code (where the alarm cannot
interrupt it) gets the child killed, is reported as timed out, and the remaining calls
continue in a new child.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._child import decode, encode

log = logging.getLogger(__name__)

CHILD = Path(__file__).with_name("_child.py")
#: Seconds a child may take to start and load the solution before its first result.
STARTUP_GRACE = 10.0


@dataclass(frozen=True)
class CallResult:
    ok: bool
    value: Any = None
    error: str | None = None
    timed_out: bool = False


def _child_env() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
        "LANG": "C.UTF-8",
    }


def run_calls(code: str, calls: Sequence[tuple[str, tuple[Any, ...]]], timeout: float) -> list[CallResult]:
    """Run ``function(*args)`` for each call against ``code``; one result per call, in order."""
    results: list[CallResult | None] = [None] * len(calls)
    pending = list(range(len(calls)))
    while pending:
        done = _run_batch(code, calls, pending, timeout, results)
        if done < len(pending):
            # The call at position ``done`` hung or crashed the child: record it, go on.
            stuck = pending[done]
            if results[stuck] is None:
                results[stuck] = CallResult(
                    False, error=f"no result within {timeout:g}s (child killed)", timed_out=True
                )
            pending = pending[done + 1 :]
        else:
            pending = []
    return [r if r is not None else CallResult(False, error="no result") for r in results]


def _run_batch(
    code: str,
    calls: Sequence[tuple[str, tuple[Any, ...]]],
    indices: list[int],
    timeout: float,
    results: list[CallResult | None],
) -> int:
    """Run ``indices`` in one child; return how many results arrived before it stopped."""
    request = json.dumps(
        {
            "code": code,
            "timeout": timeout,
            "calls": [[calls[i][0], encode(list(calls[i][1]))] for i in indices],
        }
    )
    received = 0
    with tempfile.TemporaryDirectory(prefix="plsqlbench-convert-") as tmp:
        proc = subprocess.Popen(
            [sys.executable, "-S", "-s", "-P", str(CHILD)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=tmp,
            env=_child_env(),
            start_new_session=True,
        )
        try:
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(request.encode("utf-8"))
                proc.stdin.close()
            except BrokenPipeError:
                pass
            buffer = b""
            deadline = time.monotonic() + STARTUP_GRACE + timeout * 4 + 2
            fd = proc.stdout.fileno()
            while received < len(indices):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                ready, _, _ = select.select([fd], [], [], remaining)
                if not ready:
                    break
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    record = json.loads(line)
                    idx = indices[record["i"]]
                    if record.get("ok"):
                        results[idx] = CallResult(True, value=decode(record["out"]))
                    else:
                        results[idx] = CallResult(
                            False, error=record.get("error"), timed_out=bool(record.get("timeout"))
                        )
                    received += 1
                    deadline = time.monotonic() + 3 * timeout + 5
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return received

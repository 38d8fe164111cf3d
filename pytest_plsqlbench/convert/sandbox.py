"""Compute expected outputs by running canonical Python solutions in a child process.

Conversion time only (nothing Python runs at evaluation time). Each batch of calls runs in
a fresh child (standard library only) in a temporary directory with sockets and subprocesses
disabled: a new ``python -S -s -P _child.py``, or -- inside :func:`zygotes`, which a whole
conversion uses -- a process forked from a long-lived ``_child.py --zygote`` that has done the
interpreter start and imports once (an interpreter start costs ~40 ms of CPU; MBPP+ runs over
a thousand batches). Either way each batch gets a process no solution code has run in, a fixed hash seed (so set-derived outputs are reproducible), a per-call CPU-time
limit, and a parent-side wall-clock watchdog: a call that hangs in C code (where the alarm cannot
interrupt it) gets the child killed, is reported as timed out, and the remaining calls
continue in a new child.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._child import decode, encode

log = logging.getLogger(__name__)

CHILD = Path(__file__).with_name("_child.py")
#: Address-space limit of a child. It bounds the memory of a conversion (a few MBPP+ inputs make
#: canonical solutions build results of over a gigabyte, which are dropped as too large anyway):
#: such a call fails with MemoryError, a reference-error, instead of exhausting the machine.
MEMORY_LIMIT_MB = 256
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


class Zygote:
    """A fork server: ``_child.py --zygote``, started once, forking one child per batch."""

    def __init__(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="plsqlbench-convert-")
        self.proc = subprocess.Popen(
            [sys.executable, "-S", "-s", "-P", str(CHILD), "--zygote"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self.tmp,
            env=_child_env(),
            start_new_session=True,
        )
        self.buffer = b""

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


_ZYGOTES: queue.Queue[Zygote] | None = None
_ZYGOTE_LOCK = threading.Lock()


@contextlib.contextmanager
def zygotes(count: int) -> Iterator[None]:
    """Within this block :func:`run_calls` forks its children from ``count`` fork servers."""
    global _ZYGOTES
    pool: queue.Queue[Zygote] = queue.Queue()
    for _ in range(count):
        pool.put(Zygote())
    with _ZYGOTE_LOCK:
        previous, _ZYGOTES = _ZYGOTES, pool
    try:
        yield
    finally:
        with _ZYGOTE_LOCK:
            _ZYGOTES = previous
        while not pool.empty():
            pool.get_nowait().close()


class CallStore:
    """The results of a source's reference calls, kept on disk beside its conversions.

    A conversion writes the dialect and assertion mode a run asks for; converting the same
    source into another one later types and emits again but runs no canonical solution twice
    (they are nearly all of a conversion's cost). One JSON line per call, appended as results
    arrive: a conversion cut short keeps what it had computed, and a torn last line is ignored.
    The key is the call itself (solution code, function, arguments, time limit); the file name
    carries the converter's fingerprint, so a changed sandbox never reads old results.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._known: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        torn = False
        try:
            with path.open(encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    torn = not line.endswith("\n")
                    try:
                        entry = json.loads(line)
                        self._known[entry["k"]] = entry["r"]
                    except (ValueError, KeyError, TypeError):
                        continue  # a torn line of an interrupted run
        except FileNotFoundError:
            pass
        self._out = path.open("a", encoding="utf-8")
        if torn:
            self._out.write("\n")  # what comes next starts a line of its own

    @staticmethod
    def key(code: str, call: tuple[str, tuple[Any, ...]], timeout: float) -> str:
        text = json.dumps([code, call[0], encode(list(call[1])), timeout], ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def get(self, key: str) -> CallResult | None:
        record = self._known.get(key)
        if record is None:
            return None
        if record.get("ok"):
            return CallResult(True, value=decode(record["out"]))
        return CallResult(False, error=record.get("error"), timed_out=bool(record.get("timeout")))

    def put(self, key: str, result: CallResult) -> None:
        try:
            record = ({"ok": True, "out": encode(result.value)} if result.ok
                      else {"ok": False, "error": result.error, "timeout": result.timed_out})
            line = json.dumps({"k": key, "r": record}, ensure_ascii=False)
        except (ValueError, TypeError):
            return  # not kept: computed again next time
        with self._lock:
            self._out.write(line + "\n")

    def close(self) -> None:
        self._out.close()


_STORE: CallStore | None = None


@contextlib.contextmanager
def call_store(path: Path) -> Iterator[CallStore]:
    """Within this block :func:`run_calls` reads and keeps results in the store at ``path``."""
    global _STORE
    store = CallStore(path)
    previous, _STORE = _STORE, store
    try:
        yield store
    finally:
        _STORE = previous
        store.close()


def run_calls(code: str, calls: Sequence[tuple[str, tuple[Any, ...]]], timeout: float) -> list[CallResult]:
    """Run ``function(*args)`` for each call against ``code``; one result per call, in order."""
    store = _STORE
    if store is None:
        return _run_pooled(code, calls, timeout)
    keys = [store.key(code, call, timeout) for call in calls]
    results: list[CallResult | None] = [store.get(k) for k in keys]
    missing = [i for i, r in enumerate(results) if r is None]
    if missing:
        for i, result in zip(missing, _run_pooled(code, [calls[i] for i in missing], timeout)):
            results[i] = result
            store.put(keys[i], result)
    return [r for r in results if r is not None]


def _run_pooled(code: str, calls: Sequence[tuple[str, tuple[Any, ...]]], timeout: float) -> list[CallResult]:
    pool = _ZYGOTES
    if pool is None:
        return _run_calls(code, calls, timeout, None)
    zygote = pool.get()
    try:
        if not zygote.alive:
            zygote.close()
            zygote = Zygote()
        return _run_calls(code, calls, timeout, zygote)
    finally:
        pool.put(zygote)


def _run_calls(
    code: str, calls: Sequence[tuple[str, tuple[Any, ...]]], timeout: float, zygote: Zygote | None
) -> list[CallResult]:
    results: list[CallResult | None] = [None] * len(calls)
    pending = list(range(len(calls)))
    while pending:
        if zygote is not None and not zygote.alive:
            zygote.close()
            zygote = None  # the fork server died: finish in fresh interpreters
        if zygote is not None:
            done = _run_forked(zygote, code, calls, pending, timeout, results)
        else:
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


def _request(code: str, calls: Sequence[tuple[str, tuple[Any, ...]]], indices: list[int], timeout: float) -> str:
    return json.dumps(
        {
            "code": code,
            "timeout": timeout,
            "memory_mb": MEMORY_LIMIT_MB,
            "calls": [[calls[i][0], encode(list(calls[i][1]))] for i in indices],
        }
    )


def _record(record: dict[str, Any], indices: list[int], results: list[CallResult | None]) -> None:
    idx = indices[record["i"]]
    if record.get("ok"):
        results[idx] = CallResult(True, value=decode(record["out"]))
    else:
        results[idx] = CallResult(False, error=record.get("error"), timed_out=bool(record.get("timeout")))


def _run_forked(
    zygote: Zygote,
    code: str,
    calls: Sequence[tuple[str, tuple[Any, ...]]],
    indices: list[int],
    timeout: float,
    results: list[CallResult | None],
) -> int:
    """Like :func:`_run_batch`, in a child forked by ``zygote``; a hung child is killed by pid."""
    assert zygote.proc.stdin is not None and zygote.proc.stdout is not None
    try:
        zygote.proc.stdin.write(_request(code, calls, indices, timeout).encode("utf-8") + b"\n")
        zygote.proc.stdin.flush()
    except (BrokenPipeError, OSError):
        zygote.proc.kill()
        zygote.proc.wait()
        return 0
    fd = zygote.proc.stdout.fileno()
    received, pid, ended = 0, None, False
    deadline = time.monotonic() + STARTUP_GRACE + timeout * 4 + 2
    while not ended:
        remaining = deadline - time.monotonic()
        ready = select.select([fd], [], [], remaining)[0] if remaining > 0 else []
        if not ready:
            # The child hung (or the zygote did): kill the child, then wait for the zygote's end line.
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                pid = None
                deadline = time.monotonic() + 10
                continue
            zygote.proc.kill()
            zygote.proc.wait()
            break
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            zygote.proc.wait()
            break
        zygote.buffer += chunk
        while b"\n" in zygote.buffer and not ended:
            line, zygote.buffer = zygote.buffer.split(b"\n", 1)
            record = json.loads(line)
            if "pid" in record:
                pid = record["pid"]
            elif "end" in record:
                ended = True
            elif pid is not None:
                _record(record, indices, results)
                received += 1
                deadline = time.monotonic() + 3 * timeout + 5
    return received


def _run_batch(
    code: str,
    calls: Sequence[tuple[str, tuple[Any, ...]]],
    indices: list[int],
    timeout: float,
    results: list[CallResult | None],
) -> int:
    """Run ``indices`` in one child; return how many results arrived before it stopped."""
    request = _request(code, calls, indices, timeout)
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
                    _record(json.loads(line), indices, results)
                    received += 1
                    deadline = time.monotonic() + 3 * timeout + 5
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return received

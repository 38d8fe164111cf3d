"""Progress of long generations: tasks generated / cached / failed, across xdist workers.

Workers cannot write to the controller's terminal, so each test-running process keeps its
counts in ``<cache>/.progress/<run id>/<worker>.json`` (rewritten atomically, at most twice a
second), and the process that owns the terminal -- the xdist controller, or the only process
with ``-n 0`` -- reads them in a background thread and prints a line now and then through the
terminal reporter (and the log). Short generations print nothing.

A task (conversation, per sample) is counted once, by the worker whose prefetch partition it is
in: ``generated`` if any of its turns was answered by the model during this run, ``cached`` if
all came from earlier runs, ``failed`` if a turn ended in a provider error, ``not_generated`` if a
turn had no answer (``--plsql-cache-only``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..answers import Answer

log = logging.getLogger(__name__)

KINDS = ("generated", "cached", "failed", "not_generated")
#: Usage summed for the progress line.
SPENDING = ("prompt_tokens", "completion_tokens", "cost_usd")


def progress_dir(cache_root: Path, run_id: str) -> Path:
    return Path(cache_root) / ".progress" / run_id


def prune_stale(cache_root: Path, max_age: float = 86400.0) -> None:
    """Remove progress folders of runs that ended without cleaning up (killed) a day ago or more."""
    try:
        folders = list((Path(cache_root) / ".progress").iterdir())
    except OSError:
        return
    cutoff = time.time() - max_age
    for folder in folders:
        try:
            if folder.stat().st_mtime < cutoff:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue


def classify(answers: Sequence[Answer]) -> str:
    """The progress kind of one conversation from its turns' answers."""
    if any(a.status == "error" for a in answers):
        return "failed"
    if any(a.status == "not_generated" for a in answers):
        return "not_generated"
    if any(not a.usage.get("cached") for a in answers):
        return "generated"
    return "cached"


class ProgressWriter:
    """This worker's counts, kept in memory and mirrored to its progress file."""

    def __init__(self, path: Path | None, worker: str, own_total: int, total: int, min_interval: float = 0.5) -> None:
        self.path = path
        self.worker = worker
        self.own_total = own_total
        self.total = total
        self.counts = dict.fromkeys(KINDS, 0)
        #: This run's spending so far (answers generated now, not those reused from the cache).
        self.spent: dict[str, float] = dict.fromkeys(SPENDING, 0)
        self._lock = threading.Lock()
        self._last_write = 0.0
        self._min_interval = min_interval

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def record(self, kind: str, answers: Sequence[Answer] = ()) -> None:
        with self._lock:
            self.counts[kind] += 1
            for answer in answers:
                if answer.usage.get("cached"):
                    continue
                for name in SPENDING:
                    value = answer.usage.get(name)
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        self.spent[name] += value
            due = self.done >= self.own_total or time.monotonic() - self._last_write >= self._min_interval
        if due:
            self.flush()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"worker": self.worker, "own_total": self.own_total, "total": self.total, "done": self.done,
                    **self.counts, **self.spent}

    def flush(self) -> None:
        if self.path is None:
            return
        data = self.snapshot()
        with self._lock:
            self._last_write = time.monotonic()
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump(data, fh)
                os.replace(tmp, self.path)
            except OSError as exc:
                log.debug("cannot write progress file %s: %s", self.path, exc)


def read_progress(directory: Path) -> dict[str, Any] | None:
    """Counts summed over the workers' files in ``directory``, or None if there are none."""
    try:
        files = sorted(directory.glob("*.json"))
    except OSError:
        return None
    if not files:
        return None
    out: dict[str, Any] = dict.fromkeys(KINDS, 0)
    out.update(dict.fromkeys(SPENDING, 0), done=0, total=0, workers=0)
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        out["workers"] += 1
        out["total"] = max(out["total"], int(data.get("total") or 0))
        for name in (*KINDS, "done"):
            out[name] += int(data.get(name) or 0)
        for name in SPENDING:
            out[name] += float(data.get(name) or 0)
    return out


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def format_progress(p: dict[str, Any], rate: float | None = None) -> str:
    """One line: done/total, the mix, and -- given ``rate`` (tasks per second) -- rate and ETA,
    then this run's tokens and cost so far."""
    line = (f"plsql generation: {p['done']}/{p['total']} tasks -- {p['generated']} generated, "
            f"{p['cached']} cached, {p['failed']} failed")
    if p.get("not_generated"):
        line += f", {p['not_generated']} not generated"
    left = max(0, p["total"] - p["done"])
    if rate and left:
        line += f" | {rate * 60:.1f} tasks/min, ETA {_duration(left / rate)}"
    tokens = int(p.get("prompt_tokens") or 0) + int(p.get("completion_tokens") or 0)
    if tokens:
        line += f" | {tokens:,} tokens"
        if p.get("cost_usd"):
            line += f", ${p['cost_usd']:.2f}"
    return line


class ProgressReporter:
    """A daemon thread that prints aggregated progress every ``interval`` seconds while
    generation runs, starting only after ``delay`` seconds (short generations stay quiet)."""

    def __init__(self, directory: Path, write: Callable[[str], None], *, delay: float = 5.0,
                 interval: float = 10.0, poll: float = 0.5) -> None:
        self.directory = directory
        self._write = write
        self._delay = delay
        self._interval = interval
        self._poll = poll
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="plsql-progress", daemon=True)
        self.lines: list[str] = []

    def start(self) -> ProgressReporter:
        self._thread.start()
        return self

    def stop(self, cleanup: bool = True) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        if cleanup:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _emit(self, line: str) -> None:
        self.lines.append(line)
        log.info(line)
        try:
            self._write(line)
        except Exception:  # a progress line must never break the run
            log.debug("cannot write progress line", exc_info=True)

    def _run(self) -> None:
        first_seen: float | None = None
        done_at_first = 0
        last_print = 0.0
        last_line = ""
        while not self._stop.wait(self._poll):
            progress = read_progress(self.directory)
            if progress is None:
                continue
            now = time.monotonic()
            if first_seen is None:
                first_seen, done_at_first = now, progress["done"]
            elapsed = now - first_seen
            rate = (progress["done"] - done_at_first) / elapsed if elapsed > 0 else None
            line = format_progress(progress, rate or None)
            complete = progress["total"] and progress["done"] >= progress["total"]
            if complete:
                if last_line and line != last_line:
                    self._emit(line)
                return
            if now - first_seen >= self._delay and now - last_print >= self._interval and line != last_line:
                self._emit(line)
                last_print, last_line = now, line

"""The answer cache: one human-readable JSON file per answer, safe for many writers.

Layout: ``<cache>/<model>/<subset>/<task>.t<turn>.s<sample>.<key16>.json`` -- a person finds the
answers of a task with ``ls``; the full key inside the record is what counts. The key is the
sha256 of the model string, the exact messages, the sampling parameters, and which task, turn
and sample the answer is for: a changed prompt, schema or earlier rollout answer never reuses a
stale answer, and two tasks that happen to share a prompt still get one generation each (they
are independent samples, as the benchmark counts them).

Guarantees:
- A record is written to a temporary file in the same directory and moved into place with
  ``os.replace``: readers see the old state or the whole new record, never a torn one, even if
  the writer is killed.
- A record that cannot be read (corrupt JSON, wrong key, unknown format) counts as missing; it is
  logged and regenerated.
- Per-key file locks (``<cache>/.locks``) let one process generate while others wait and then
  read the record instead of asking the model again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout

log = logging.getLogger(__name__)

#: Bump when the record layout changes incompatibly: older records are then regenerated.
FORMAT = 1

_SLUG = re.compile(r"[^A-Za-z0-9_.+\-]+")


def slug(text: str) -> str:
    """A file-name-safe spelling (``anthropic/claude-opus-4-8`` -> ``anthropic-claude-opus-4-8``)."""
    return _SLUG.sub("-", text).strip("-.") or "_"


@dataclass(frozen=True)
class Request:
    """Everything that determines a reply, and the task turn it answers: all hashed into the key."""

    model: str
    messages: Sequence[Mapping[str, str]]
    temperature: float
    max_tokens: int
    sample: int
    task_id: str = ""
    subset: str = ""
    turn: int = 1

    @property
    def params(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_tokens": self.max_tokens}

    @functools.cached_property
    def key(self) -> str:
        payload = {
            "model": self.model,
            "messages": [dict(m) for m in self.messages],
            "params": self.params,
            "sample": self.sample,
            "task": [self.subset, self.task_id, self.turn],
        }
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        # surrogatepass: a reply with a lone surrogate (valid JSON, not UTF-8) in a later
        # turn's history still has a key; every other text encodes exactly as before.
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()

    def describe(self) -> str:
        sample = f" sample {self.sample}" if self.sample else ""
        return f"{self.subset}/{self.task_id} turn {self.turn}{sample}"


RecordStatus = Literal["ok", "error"]
#: Runs whose model *replied* for one key that the regeneration policy may ask (an empty or
#: provider-truncated reply is asked again up to this bound; --plsql-regenerate ignores it).
#: Provider failures are never counted (see :attr:`.client.ProviderError.from_model`).
MAX_GENERATIONS = 3


@dataclass(frozen=True)
class Record:
    """One cached generation, as stored."""

    key: str
    status: RecordStatus
    raw: str | None
    code: str | None
    error: str | None = None
    #: The reply or failure was transient (rate limit, timeout, 5xx, truncated by the provider):
    #: the regeneration policy asks again next run.
    retry_eligible: bool = False
    usage: Mapping[str, Any] = field(default_factory=dict)
    #: The run (xdist ``testrunuid``) that wrote it: within that run the record is final.
    run_id: str = ""
    created: str = ""
    #: How many runs got a reply from the model for this key (regenerations included).
    generations: int = 1

    def regenerate_reason(self) -> str | None:
        """Why the paper's policy asks again (failed, empty, retry-eligible), or None to reuse.

        A provider failure (``status: error``, written only by older versions) is never an answer:
        always asked again, whatever its count. Replies are bounded: after MAX_GENERATIONS runs got
        one, the entry is final, so an empty reply at temperature 0 is not paid for on every run.
        """
        if self.status != "ok":
            return f"failed earlier ({self.error or 'provider error'})"
        if self.generations >= MAX_GENERATIONS:
            return None
        if not (self.code or "").strip():
            return "empty answer"
        if self.retry_eligible:
            return "retry-eligible"
        return None


class AnswerCache:
    """Records under ``root``; see the module docstring for the guarantees."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._locks = self.root / ".locks"
        self._reported: set[Path] = set()  # corrupt entries already logged (a miss reads twice)

    def path(self, req: Request) -> Path:
        key = req.key
        name = f"{slug(req.task_id or 'task')}.t{req.turn}.s{req.sample}.{key[:16]}.json"
        return self.root / slug(req.model) / slug(req.subset or "_") / name

    # ------------------------------------------------------------------ reading
    def read(self, req: Request) -> Record | None:
        """The record for ``req``, or None if missing or unreadable (logged)."""
        path = self.path(req)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("answer cache: cannot read %s (%s); regenerating", path, exc)
            return None
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"unknown record format {data.get('format') if isinstance(data, dict) else None!r}")
            if data.get("key") != req.key:
                raise ValueError("key does not match the request")
            if data.get("status") not in ("ok", "error"):
                raise ValueError(f"bad status {data.get('status')!r}")
            return Record(
                key=data["key"],
                status=data["status"],
                raw=data.get("raw"),
                code=data.get("code"),
                error=data.get("error"),
                retry_eligible=bool(data.get("retry_eligible")),
                usage=dict(data.get("usage") or {}),
                run_id=str(data.get("run_id") or ""),
                created=str(data.get("created") or ""),
                generations=int(data.get("generations") or 1),
            )
        except (ValueError, KeyError, TypeError) as exc:
            if path not in self._reported:
                self._reported.add(path)
                log.warning("answer cache: corrupt entry %s (%s); treating it as missing", path, exc)
            return None

    # ------------------------------------------------------------------ writing
    def write(self, req: Request, record: Record) -> Path:
        """Store ``record`` atomically (temporary file + ``os.replace``)."""
        path = self.path(req)
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "format": FORMAT,
            "key": record.key,
            "task_id": req.task_id,
            "subset": req.subset,
            "turn": req.turn,
            "sample": req.sample,
            "model": req.model,
            "params": req.params,
            "status": record.status,
            "error": record.error,
            "retry_eligible": record.retry_eligible,
            "code": record.code,
            "raw": record.raw,
            "usage": dict(record.usage),
            "run_id": record.run_id,
            "generations": record.generations,
            "created": record.created or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "messages": [dict(m) for m in req.messages],
        }
        write_json_atomic(path, doc, indent=2)
        return path

    # ------------------------------------------------------------------ outages
    def _outage_path(self, req: Request) -> Path:
        return self.root / ".outages" / f"{req.key}.json"

    def note_outage(self, req: Request, run_id: str, error: str) -> None:
        """Remember, for this run only, that the provider failed on ``req``: the other workers of
        the run do not wait through the same retries again, and no later run ever reads it (it is
        not an answer and counts towards nothing)."""
        path = self._outage_path(req)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(path, {"format": FORMAT, "key": req.key, "run_id": run_id, "error": error}, indent=1)
        except (OSError, ValueError) as exc:
            log.debug("answer cache: cannot note the outage on %s (%s)", req.describe(), exc)

    def clear_outage(self, req: Request) -> None:
        """Forget an earlier run's note once the provider answered ``req``."""
        with contextlib.suppress(OSError):
            self._outage_path(req).unlink(missing_ok=True)

    def outage(self, req: Request, run_id: str) -> str | None:
        """The provider error noted for ``req`` by run ``run_id``, or None."""
        try:
            data = json.loads(self._outage_path(req).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if isinstance(data, dict) and data.get("key") == req.key and run_id and data.get("run_id") == run_id:
            return str(data.get("error") or "provider error")
        return None

    # ------------------------------------------------------------------ locking
    @contextlib.contextmanager
    def lock(self, req: Request, blocking: bool = True) -> Iterator[bool]:
        """Hold the key's file lock; yields False (without holding it) if ``blocking`` is off and
        another process or thread has it."""
        lock = FileLock(str(self._locks / f"{req.key}.lock"), thread_local=False)
        try:
            self._locks.mkdir(parents=True, exist_ok=True)
            lock.acquire(timeout=-1 if blocking else 0)
        except Timeout:
            yield False
            return
        except OSError as exc:  # a read-only cache: answer anyway, without sharing across processes
            log.warning("answer cache: cannot lock %s (%s); generating without a lock", self._locks, exc)
            yield True
            return
        try:
            yield True
        finally:
            lock.release()


def write_json_atomic(path: Path, doc: Any, indent: int = 2) -> None:
    """Write ``doc`` as JSON to ``path`` so readers see the old file or the whole new one, never a
    torn one (a killed run leaves no half-written cache entry); the caller made ``path.parent``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=indent, ensure_ascii=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

"""One answer per key per run: cache first, then the model, under per-key locks.

:meth:`AnswerService.obtain` is what both the generate hook and the prefetch threads call. For a
key it returns, in order: the answer this process already has; a cached record that the
regeneration policy accepts; or -- holding the key's in-process lock and its file lock, and after
looking at the cache once more -- a fresh model answer, written to the cache before the lock is
released. A record written by the *current* run (any worker) is final for the run, errors
included, so a key is never asked twice in one run; records of earlier runs that are empty or
retry-eligible are asked again (paper App. G). A provider failure (no reply: outage, timeout, 5xx
after retries) is never stored as an answer nor counted towards that bound: the run reports it as
the harness's error and the next run asks again, however many runs failed before. With
``cache_only`` the model is never called and litellm never imported.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..answers import Answer, Exchange
from ..tasks import Task
from .cache import AnswerCache, Record, Request
from .client import ModelClient, ProviderError, runtime_info
from .extract import extract_code
from .prompts import build_messages

log = logging.getLogger(__name__)


class AnswerService:
    """Answers for one model and parameter set, shared by all threads of a process."""

    def __init__(
        self,
        *,
        model: str,
        cache: AnswerCache,
        run_id: str,
        client_factory: Callable[[], ModelClient],
        temperature: float = 0.0,
        max_tokens: int = 8192,
        concurrency: int = 4,
        cache_only: bool = False,
        regenerate: bool = False,
    ) -> None:
        self.model = model
        self.cache = cache
        self.run_id = run_id
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.cache_only = cache_only
        self.regenerate = regenerate
        self._client_factory = client_factory
        self._client: ModelClient | None = None
        self._slots = threading.BoundedSemaphore(concurrency)
        self._guard = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._memo: dict[str, Answer] = {}
        self._announced: set[str] = set()
        #: key -> how many runs will have asked once this run asks (for regenerated entries).
        self._generations: dict[str, int] = {}
        #: Model requests made by this process (each may include retries), for tests and logs.
        self.requests = 0
        #: The last error that said the configuration is wrong (key, model, request); see preflight.
        self.permanent_error: ProviderError | None = None
        #: The last failure that never reached the provider (see :func:`.preflight.preflight`).
        self.unreachable_error: ProviderError | None = None

    # ------------------------------------------------------------------ building requests
    def request(self, task: Task, turn: int, history: Sequence[Exchange], sample: int) -> Request:
        return Request(
            model=self.model,
            messages=tuple(build_messages(task, turn, history)),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            sample=sample,
            task_id=task.id,
            subset=task.subset,
            turn=turn,
        )

    def _key_lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._key_locks.setdefault(key, threading.Lock())

    @property
    def client(self) -> ModelClient:
        with self._guard:
            if self._client is None:
                self._client = self._client_factory()
            return self._client

    @contextlib.contextmanager
    def slot(self, *, count: bool = True) -> Iterator[None]:
        """Hold one of the process's concurrent model requests (``--plsql-concurrency``) for a
        caller that talks to a model itself (ProcArena's Interactive Solver and Simulator), so
        they share the limit with generation; ``count``: it is a request of this model."""
        with self._slots:
            if count:
                with self._guard:
                    self.requests += 1
            yield

    # ------------------------------------------------------------------ the one entry point
    def obtain(
        self, task: Task, turn: int, history: Sequence[Exchange], sample: int = 0, *, blocking: bool = True
    ) -> Answer | None:
        """The answer for ``task`` at ``turn``; None only when not ``blocking`` and another
        thread or process is generating it right now."""
        req = self.request(task, turn, history, sample)
        key = req.key
        if key in self._memo:
            return self._memo[key]
        key_lock = self._key_lock(key)
        if not key_lock.acquire(blocking=blocking):
            return None
        try:
            if key in self._memo:
                return self._memo[key]
            answer = self._from_cache(req, task)
            if answer is None and self.cache_only:
                answer = Answer.missing(
                    f"no cached answer for {req.describe()} from {self.model} in {self.cache.root} "
                    "(--plsql-cache-only never calls the model)",
                    source="cache",
                )
            if answer is None:
                with self.cache.lock(req, blocking=blocking) as held:
                    if not held:
                        return None
                    answer = self._from_cache(req, task) or self._generate(req, task)
            self._memo[key] = answer
            return answer
        finally:
            key_lock.release()

    def cached(self, task: Task, turn: int, history: Sequence[Exchange], sample: int = 0) -> bool:
        """Whether the answer can be served without calling the model (memo or cache)."""
        req = self.request(task, turn, history, sample)
        return req.key in self._memo or self._from_cache(req, task) is not None

    # ------------------------------------------------------------------ cache side
    def _from_cache(self, req: Request, task: Task) -> Answer | None:
        record = self.cache.read(req)
        if record is None:
            outage = self.cache.outage(req, self.run_id)
            if outage is not None:  # another worker of this run found the provider failing on it
                return _failed(outage, source="model", cache_key=req.key,
                               usage={**runtime_info(), "status": "error", "cached": False})
            return None
        this_run = bool(record.run_id) and record.run_id == self.run_id
        if self.cache_only and not this_run:
            return self._answer(record, req, cached=True)
        if not this_run:
            reason = "--plsql-regenerate" if self.regenerate else record.regenerate_reason()
            if reason:
                if req.key not in self._announced:  # a miss reads the cache twice
                    self._announced.add(req.key)
                    log.info("answer cache: regenerating %s (%s)", req.describe(), reason)
                # Only the model's replies count towards the bound, never a provider failure.
                self._generations[req.key] = record.generations + 1 if record.status == "ok" else 1
                return None
        return self._answer(record, req, cached=not this_run)

    def _answer(self, record: Record, req: Request, *, cached: bool) -> Answer:
        usage = {**record.usage, "status": record.status, "cached": cached}
        source = "cache" if cached else "model"
        if record.status != "ok":  # an older version's record of a provider failure
            return _failed(record.error, source=source, raw=record.raw, cache_key=record.key, usage=usage,
                           pending="a run without --plsql-cache-only asks again" if self.cache_only
                           else "the next run asks again")
        return Answer(code=record.code or "", status="ok", raw=record.raw, error=record.error, source=source,
                      cache_key=record.key, usage=usage)

    # ------------------------------------------------------------------ model side
    def _generate(self, req: Request, task: Task) -> Answer:
        key = req.key
        with self.slot():
            try:
                completion = self.client.complete(req.messages)
            except ProviderError as exc:
                generations = self._generations.get(key, 1)
                if exc.permanent:
                    # The key, the model name or the request is wrong, not this task's answer:
                    # nothing is cached, so the run after the fix asks again at no cost.
                    self.permanent_error = exc
                    log.warning("generation failed for %s: %s", req.describe(), exc)
                    usage = {**runtime_info(), **exc.usage, "status": "error", "cached": False}
                    return Answer(code=None, status="error", error=str(exc), source="model", cache_key=key,
                                  usage=usage)
                if exc.refused:
                    # The model cannot answer this prompt: an empty answer, scored as its failure.
                    log.warning("the model refused %s: %s", req.describe(), exc)
                    usage = {**runtime_info(), **exc.usage, "status": "ok", "cached": False}
                    record = Record(key=key, status="ok", raw=None, code="", error=str(exc), usage=usage,
                                    run_id=self.run_id, generations=generations)
                    self._store(req, record)
                    return Answer(code="", status="ok", error=str(exc), source="model", cache_key=key, usage=usage)
                if exc.unreachable:
                    self.unreachable_error = exc
                # No reply (see ProviderError.from_model): nothing is stored as the answer and
                # nothing counted; only this run remembers it, so its other workers do not wait
                # through the same retries again.
                log.warning("generation failed for %s after %d attempt(s): %s", req.describe(), exc.attempts, exc)
                usage = {**runtime_info(), **exc.usage, "status": "error", "cached": False}
                self.cache.note_outage(req, self.run_id, str(exc))
                return _failed(str(exc), source="model", cache_key=key, usage=usage)
        self.cache.clear_outage(req)
        code = extract_code(completion.text, task.dialect)
        usage = {**completion.usage, "status": "ok", "cached": False}
        record = Record(key=key, status="ok", raw=completion.text, code=code,
                        retry_eligible=completion.interrupted, usage=usage, run_id=self.run_id,
                        generations=self._generations.get(key, 1))
        self._store(req, record)
        return Answer(code=code, status="ok", raw=completion.text, source="model", cache_key=key, usage=usage)

    def _store(self, req: Request, record: Record) -> None:
        try:
            self.cache.write(req, record)
        except (OSError, ValueError) as exc:  # a full disk must not lose the answer for this run
            log.warning("answer cache: cannot write %s (%s); the answer is kept for this run only",
                        self.cache.path(req), exc)


def _failed(error: str | None, *, pending: str = "not stored; the next run asks again", **fields: Any) -> Answer:
    """A provider failure's answer: always the harness's trouble (``error``: reported, left out of
    the metrics, the run not green), never the model's -- however many runs it failed in."""
    return Answer(code=None, status="error", error=f"{error or 'provider error'} ({pending})", **fields)

"""Answers ahead of the tests: each worker generates its share of conversations in the background.

Every xdist worker collects every task but runs only some, chosen dynamically, so a worker cannot
know which answers it will need. Instead the conversations (task x sample) are split
deterministically by worker index: worker *i* of *n* prefetches conversation *k* when
``k % n == i``, with at most ``concurrency`` requests in flight, turn after turn (each turn needs the earlier
answers), conversations in parallel. When its share is done it helps with the others' shares from
their tail, skipping any key another process holds. A worker whose test needs an answer from
another share just asks :class:`AnswerService` for it: it waits on that key's file lock and reads
the cache, or generates it itself if nobody has started. Locks plus the re-read after locking are
what make it one request per key for the whole run; the split only spreads the work.

The threads are daemons: a run interrupted mid-generation exits without waiting for requests in
flight, and what was finished is in the cache (atomically written) for the next run. A worker
starts no new request once the run's controller has stopped (``controller_alive``: Ctrl-C there,
or the controller gone), though xdist lets it finish the test it is running.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..answers import Answer
from ..episode import Episode
from ..tasks import Task
from .progress import ProgressWriter, classify
from .service import AnswerService

log = logging.getLogger(__name__)


@dataclass
class Job:
    task: Task
    sample: int
    own: bool
    #: Tried once without waiting and found another thread/process on it: now wait.
    deferred: bool = False


def partition(n_items: int, worker_index: int, worker_count: int) -> list[bool]:
    """Which of ``n_items`` (in collection order) are this worker's own share."""
    if worker_count <= 1:
        return [True] * n_items
    return [k % worker_count == worker_index for k in range(n_items)]


def worker_index(worker_id: str) -> int:
    """``gw3`` -> 3; anything else (``main``) -> 0."""
    digits = worker_id[2:] if worker_id.startswith("gw") else ""
    return int(digits) if digits.isdigit() else 0


class Prefetcher:
    """Background generation of this worker's share; see the module docstring."""

    def __init__(
        self,
        service: AnswerService,
        tasks: Sequence[Task],
        *,
        samples: int = 1,
        concurrency: int = 4,
        worker_index: int = 0,
        worker_count: int = 1,
        progress: ProgressWriter | None = None,
        steal: bool = True,
        controller_alive: Callable[[], bool] | None = None,
    ) -> None:
        self.service = service
        #: False once the run's controller stopped (Ctrl-C, gone): no new request is started then.
        self.controller_alive = controller_alive or (lambda: True)
        self.concurrency = concurrency
        self.progress = progress
        conversations = [(task, s) for task in tasks for s in range(samples)]
        own = partition(len(conversations), worker_index, worker_count)
        jobs = [Job(t, s, True) for (t, s), mine in zip(conversations, own) if mine]
        if steal:
            jobs += [Job(t, s, False) for (t, s), mine in reversed(list(zip(conversations, own))) if not mine]
        self.own_total = sum(own)
        self._queue: collections.deque[Job] = collections.deque(jobs)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._done = threading.Event()
        self._running = 0

    def start(self) -> Prefetcher:
        # More threads than request slots (the service's semaphore keeps ``concurrency`` requests
        # in flight): while one thread extracts and writes an answer, another already waits for
        # the slot it frees, so replies arriving together do not leave slots idle.
        n = max(1, min(self.concurrency + max(2, self.concurrency // 2), len(self._queue)))
        if not self._queue:
            self._done.set()
            return self
        self._running = n
        for i in range(n):
            thread = threading.Thread(target=self._worker, name=f"plsql-prefetch-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()
        return self

    def stop(self) -> None:
        """Stop taking new work; requests in flight finish (or die with the process)."""
        self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every thread has finished; True if they have."""
        return self._done.wait(timeout)

    # ------------------------------------------------------------------ threads
    def _next(self) -> Job | None:
        if not self._stop.is_set() and not self.controller_alive():
            log.info("the run's controller stopped: no more prefetching")
            self._stop.set()
        with self._lock:
            return self._queue.popleft() if self._queue and not self._stop.is_set() else None

    def _worker(self) -> None:
        try:
            while (job := self._next()) is not None:
                try:
                    finished = self._run(job)
                except Exception:  # a prefetch bug must not kill the run; tests ask again
                    log.exception("prefetch of %s failed unexpectedly", job.task.id)
                    continue
                if not finished and job.own and not job.deferred:
                    job.deferred = True
                    with self._lock:
                        self._queue.append(job)
        finally:
            with self._lock:
                self._running -= 1
                if self._running == 0:
                    self._done.set()
                    if self.progress is not None:
                        self.progress.flush()

    def _run(self, job: Job) -> bool:
        """Generate one conversation; False if a key was busy elsewhere and we did not wait.

        The rollout is the :class:`~pytest_plsqlbench.episode.Episode` the task node plays, so
        every turn is asked with the history (and cache key) the tests will ask it with.
        """
        stopped = False

        def ask(task: Task, turn: int, history: tuple, sample: int) -> Answer | None:
            nonlocal stopped
            if self._stop.is_set() or not self.controller_alive():
                stopped = True
                return None
            return self.service.obtain(task, turn, history, sample, blocking=job.own and job.deferred)

        episode = Episode(job.task, job.sample)
        # A turn without a usable answer ends the rollout: a later turn needs it.
        if not episode.play(ask, carry_failures=False):
            return stopped
        if job.own and self.progress is not None:
            self.progress.record(classify(episode.answers), episode.answers)
        return True

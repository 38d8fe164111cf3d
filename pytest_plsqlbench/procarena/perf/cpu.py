"""The time charged to a B2 run: CPU time of the server processes that did its work.

Wall-clock time on a shared machine measures the machine (the issue-31 runs: gold against
itself read 0.65-1.11 with two busy cores). The CPU time a process spent is what the kernel
charged *that* process, whoever else ran: on PostgreSQL every statement of a run -- the
answer's, its triggers', the functions it calls -- executes in the session's backend, so the
backend's CPU time over the run is the run's cost, almost untouched by load (what load still
moves: cache and memory-bandwidth contention, a few percent).

* Backend: ``/proc/<pid>/schedstat``, first field, nanoseconds on a CPU (the scheduler's own
  accounting; ``/proc/<pid>/stat``'s utime+stime is in 10 ms ticks, too coarse for 50 ms runs).
* Parallel workers would spend CPU outside the backend: the embedded server cannot start any
  (``max_worker_processes = 0``, see :mod:`.work`); elsewhere the harness turns parallel plans
  off for every run, and an answer that turns them back on is not charged its workers (stated
  as a known limit). (Their time could be read from the postmaster's ``cutime``, but so would
  every autovacuum worker's that ends meanwhile: noise for every run, for a case the embedded
  server rules out.)

Where it works: the embedded server, and a ``--plsql-dsn`` server on this machine whose
processes this user may read (``/proc`` of the same host and PID namespace). Whether the
backend PID the server reports is a process here that burns CPU when the backend does is
checked once per bench (:func:`backend_clock`); otherwise -- a remote or containerised
``--plsql-dsn`` server -- the bench falls back to wall-clock time and says so in every record
(``clock: wall``). Oracle: wall-clock time (its session CPU statistic counts centiseconds).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CPU = "cpu"
WALL = "wall"


def _schedstat_ns(pid: int, proc: Path) -> int:
    return int((proc / str(pid) / "schedstat").read_text().split()[0])


@dataclass
class Clock:
    """Reads the charged time of one backend; ``kind`` is :data:`CPU` or :data:`WALL`."""

    kind: str
    read: Callable[[], float]
    why: str = ""


def wall_clock(why: str = "") -> Clock:
    return Clock(WALL, time.perf_counter, why)


def cpu_clock(pid: int, proc: Path = Path("/proc")) -> Clock:
    """Seconds of CPU backend ``pid`` has spent."""

    def read() -> float:
        return _schedstat_ns(pid, proc) / 1e9

    read()  # raises here, not in a run, when the files cannot be read
    return Clock(CPU, read)


#: The check that the reported PID is the backend: this much work must show as CPU time.
CHECK_SQL = "SELECT count(*) FROM pg_catalog.generate_series(1, 300000)"


#: Less CPU than this during :data:`CHECK_SQL` (about 30 ms of CPU in the backend, however
#: loaded the machine: CPU time does not stretch with load, wall-clock time does) means that the
#: process is not the one doing the work.
MIN_CHECK_CPU_S = 0.005


def backend_clock(pid: int | None, burn: Callable[[], None], proc: Path = Path("/proc")) -> Clock:
    """A CPU clock for backend ``pid`` when ``/proc`` shows a ``postgres`` process of that PID
    spending CPU while ``burn()`` has the backend work (about 30 ms of CPU); a wall clock
    otherwise, with the reason. (Not a share of the wall-clock time: on a loaded machine the
    backend gets a small share of it, and is still the backend.)"""
    if not pid:
        return wall_clock("the server did not report its backend process")
    try:
        clock = cpu_clock(pid, proc)
        comm = (proc / str(pid) / "comm").read_text().strip() if (proc / str(pid) / "comm").exists() else ""
        c0, t0 = clock.read(), time.perf_counter()
        burn()
        spent, took = clock.read() - c0, time.perf_counter() - t0
    except (OSError, ValueError, IndexError) as exc:
        return wall_clock(f"the backend's CPU time cannot be read here ({exc.__class__.__name__}: the server "
                          "runs on another host or in another PID namespace)")
    if comm and not comm.startswith("postgres"):
        return wall_clock(f"process {pid} here is {comm!r}, not the server's backend")
    if spent < MIN_CHECK_CPU_S or spent > 5 * took + 0.05:
        return wall_clock(f"process {pid} here is not the server's backend (it spent {spent * 1000:.1f} ms of CPU "
                          f"while the backend worked {took * 1000:.1f} ms)")
    return clock

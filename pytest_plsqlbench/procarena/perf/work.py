"""A deterministic work counter: what the database did for a run, not how long it took.

PostgreSQL -- the table statistics of the run's own backend, read before and after the run
inside the measuring transaction, summed over every user table (the task's, the answer's
scratch tables, temporary tables still present at the end of the run):

* ``scans``  = ``seq_scan + idx_scan`` -- every sequential or index scan started, including each
  rescan of a nested loop's inner side: one per-row lookup is one scan, one set-based statement
  is a few. This is the measure ``W`` (ProcArena's records: ``measure: scans``).
* ``tuples`` = ``seq_tup_read + idx_tup_fetch`` -- live rows returned by those scans. Reported,
  not used as ``W``: a scan that stops at the first match (``SELECT ... INTO``) returns as many
  rows as lie before the match *physically*, and row versions left by earlier rolled-back runs
  move rows around, so this count varies a little between runs of the same procedure.
* ``writes`` = ``n_tup_ins + n_tup_upd + n_tup_del`` -- rows written.

Why these are faithful and repeatable: ``pg_stat_xact_user_tables`` holds the backend's counts
not yet flushed to the shared statistics, and a backend flushes only between transactions, so
within the measuring transaction the difference after - before is exactly this run's work. The
counts are *attempted* actions: rolling back to the run's savepoint does not subtract them (the
next run starts from the same data, and its own difference is again its own work). Rows of
earlier, rolled-back runs are dead and never returned by a scan, so they do not inflate
``tuples`` beyond the early-stop effect above. Parallel workers report to the shared statistics when they exit, not to the leader's
pending counts; the harness disables parallel plans for every run (``SET LOCAL
max_parallel_workers_per_gather = 0``). Known limit: an answer that turns parallel query back on
inside its own body could move sequential reads into workers and out of ``W`` (its time ``T``
is still measured). Shared statistics are not used: other sessions' delayed flushes would make
the count vary from run to run. Same procedure, same data, same plans: the same counts (a test runs it
twice).

Oracle -- the session's statistics (``V$MYSTAT`` joined to ``V$STATNAME``): ``reads`` =
'session logical reads' (the measure ``W``), ``scans`` = table scans (short and long) + index
scans, ``writes`` = 'db block changes'. Needs SELECT on ``V_$MYSTAT``/``V_$STATNAME`` for the
candidate user (granted by the harness's setup, see docs/procarena-b2.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PG_MEASURE = "scans"
ORA_MEASURE = "reads"


@dataclass(frozen=True)
class Work:
    """Counts of one run; ``measure`` names the one the work ratio uses."""

    counts: Mapping[str, int] = field(default_factory=dict)
    measure: str = PG_MEASURE

    @property
    def value(self) -> int:
        return int(self.counts.get(self.measure, 0))

    def __sub__(self, other: Work) -> Work:
        keys = set(self.counts) | set(other.counts)
        return Work({k: int(self.counts.get(k, 0)) - int(other.counts.get(k, 0)) for k in sorted(keys)}, self.measure)


# --------------------------------------------------------------------------- PostgreSQL
PG_COUNTERS = (
    "SELECT COALESCE(SUM(seq_scan + COALESCE(idx_scan, 0)), 0)::int8, "
    "COALESCE(SUM(seq_tup_read + COALESCE(idx_tup_fetch, 0)), 0)::int8, "
    "COALESCE(SUM(n_tup_ins + n_tup_upd + n_tup_del), 0)::int8 "
    "FROM pg_catalog.pg_stat_xact_user_tables"
)


def pg_counts(conn: Any) -> Work:
    """The backend's counts so far (call before and after a run; the difference is the run's)."""
    scans, tuples, writes = conn.execute(PG_COUNTERS).fetchone()
    return Work({"scans": int(scans), "tuples": int(tuples), "writes": int(writes)}, PG_MEASURE)


# --------------------------------------------------------------------------- Oracle
ORA_STATS = {
    "session logical reads": "reads",
    "table scans (short tables)": "scans",
    "table scans (long tables)": "scans",
    "index scans kdiixs1": "scans",
    "db block changes": "writes",
}
ORA_COUNTERS = (
    "SELECT n.name, s.value FROM SYS.V_$MYSTAT s JOIN SYS.V_$STATNAME n ON n.statistic# = s.statistic# "
    "WHERE n.name IN (" + ", ".join(f"'{name}'" for name in ORA_STATS) + ")"
)


def ora_work(rows: Sequence[Sequence[Any]]) -> Work:
    """The counts from the rows of :data:`ORA_COUNTERS` (name, value)."""
    counts = {"reads": 0, "scans": 0, "writes": 0}
    for name, value in rows:
        key = ORA_STATS.get(str(name))
        if key:
            counts[key] += int(value or 0)
    return Work(counts, ORA_MEASURE)


def ora_counts(sql: Callable[[str, Sequence[Any]], list]) -> Work:
    """``sql`` runs on the *measured* session (V$MYSTAT is that session's own statistics)."""
    return ora_work(sql(ORA_COUNTERS, []))

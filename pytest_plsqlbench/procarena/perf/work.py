"""A deterministic work counter: what the database did for a run, not how long it took.

PostgreSQL -- buffers: every block of a user relation (table, index, TOAST, the answer's own
tables while they exist) that the run's backend asked the buffer manager for, found in shared
buffers or read in (``pg_stat_get_xact_blocks_fetched`` summed over ``pg_class`` rows with a
user oid, read before and after the run inside the measuring transaction: the backend's own
pending counts, which it flushes only between transactions). This is the measure ``W``
(ProcArena's records: ``measure: buffers``). Why buffers, not scans (the measure before issue
31): a scan count can be lowered without doing less -- one scan that reads everything, a TID or
TID-range scan (which counts no scan at all) -- while every block a procedure touches, in its
own statements, in triggers and in the functions it calls (all run in the same backend), is a
fetched buffer. Repeatable because every run starts from the same physical tables
(:class:`.timing.PgBench` refills them into fresh files before each run): the same plans over
the same pages fetch the same blocks, run after run, exactly. Also reported: ``scans`` =
``seq_scan + idx_scan`` (the old measure), ``tuples`` = ``seq_tup_read + idx_tup_fetch``,
``writes`` = ``n_tup_ins + n_tup_upd + n_tup_del`` (``pg_stat_xact_user_tables``).

Parallel workers would do blocks (and CPU) outside the backend: on the embedded server none
can start (``max_worker_processes = 0``, set when its data directory is made, a postmaster
setting no session can change); on a ``--plsql-dsn`` server the harness turns parallel plans
off for every run (``SET LOCAL max_parallel_workers_per_gather = 0``) and an answer that turns
them back on inside its body has its workers' blocks uncounted (known limit, stated in
docs/procarena-b2.md). Relations a run creates and drops (a temporary copy worked on, then
dropped) are gone from ``pg_class`` when the run ends, but the backend's pending counts for
their oids stay until the transaction ends: the run brackets itself with two allocations from
the OID counter (``lo_create(0)``, rolled back with the run), and every oid between them that
``pg_class`` no longer has is counted too (:func:`pg_dropped_blocks`). A relation created
*inside a subtransaction that is rolled back* (a PL/pgSQL block left through its EXCEPTION
handler) takes its pending counts with it. So on B2's fresh copies (:mod:`.fresh`, the embedded
server) ``buffers`` is counted over the run's whole window instead: every block the backend
found or read in (``pg_stat_get_backend_io``, PostgreSQL 18: all relations, flushed by a forced
flush at the transaction ends that open and close the window; reads are the backend's own with
``io_method = sync``) less the catalogs' blocks (their cumulative counts, through
:data:`WORK_SCHEMA`'s function) and the state snapshot's; for every other run it equals the
relations' own counts exactly (kept as ``relation_buffers``). On a ``--plsql-dsn`` server
(:class:`.timing.PgBench`, every run in one transaction) the rolled-back subtransaction's
relation stays a known limit: only the blocks read to fill it count.

Oracle -- the measured session's statistics (``V$MYSTAT`` joined to ``V$STATNAME``), read
before and after the task's calls (not around the installation: compiling a procedure runs
recursive dictionary SQL whose reads depend on the shared caches, and re-creating identical
source may skip the compile altogether):

* ``scans``  = 'table scans (short tables)' + 'table scans (long tables)' + 'index scans
  kdiixs1' (index range and full scans started) + 'index fetch by key' (unique-key lookups) +
  'index fast full scans (full)' -- every scan or lookup started, each iteration of a loop's statement included; the measure ``W``, as
  on PostgreSQL (``measure: scans``).
* ``reads``  = 'session logical reads' (buffer gets), reported, not ``W``: a full scan reads
  every block below the table's high-water mark, which the restores between runs (DELETE, then
  INSERT from the copies) and earlier runs' inserts leave wherever the largest run left it,
  and a scan that stops at its first match reads as many blocks as lie physically before it;
  the first reader after each restore's commit also cleans its blocks out.
* ``writes`` = 'db block changes'.

Why ``scans`` is repeatable: it counts operations, not blocks, so the physical layout does not
enter it; every run starts from the same restored rows with the same optimizer statistics
(gathered once after scaling), the SQL of the calls is soft-parsed after the warm-up rounds
(cursors depend on the tables, not on the re-created procedure), and parallel query is disabled
for the session (a parallel server's scans are not the session's; known limit as on
PostgreSQL: an answer that re-enables it inside its own body). The statistics are
session-wide: recursive SQL the calls trigger (e.g. a hard parse after a cache miss) counts
too, which the warm-up rounds settle.

Privileges: the candidate reads its own ``V$MYSTAT`` with SELECT on ``SYS.V_$MYSTAT`` and
``SYS.V_$STATNAME``; without them the admin reads ``V$SESSTAT`` for the candidate's SID (SELECT
on ``SYS.V_$SESSTAT``/``V_$STATNAME``, which a DBA account such as SYSTEM has through SELECT ANY
DICTIONARY); with neither, the task is *not measured* and the message names the GRANTs to run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PG_MEASURE = "buffers"
ORA_MEASURE = "scans"


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
#: User relations have oids from ``FirstNormalObjectId`` (16384) on; catalogs' blocks (cache
#: misses while planning) are the harness's, not the procedure's.
PG_COUNTERS = (
    "SELECT (SELECT COALESCE(SUM(pg_catalog.pg_stat_get_xact_blocks_fetched(c.oid)), 0)::int8 "
    "FROM pg_catalog.pg_class c WHERE c.oid >= 16384 AND c.relkind IN ('r', 'i', 't', 'm', 'p', 'I')), "
    "COALESCE(SUM(seq_scan + COALESCE(idx_scan, 0)), 0)::int8, "
    "COALESCE(SUM(seq_tup_read + COALESCE(idx_tup_fetch, 0)), 0)::int8, "
    "COALESCE(SUM(n_tup_ins + n_tup_upd + n_tup_del), 0)::int8 "
    "FROM pg_catalog.pg_stat_xact_user_tables"
)


def pg_counts(conn: Any) -> Work:
    """The backend's counts so far (call before and after a run; the difference is the run's)."""
    buffers, scans, tuples, writes = conn.execute(PG_COUNTERS).fetchone()
    return Work({"buffers": int(buffers), "scans": int(scans), "tuples": int(tuples), "writes": int(writes)},
                PG_MEASURE)


#: Schema of the harness's own function on B2's scaled copies (:data:`PG_BACKEND_SETUP`).
WORK_SCHEMA = "plsql_work"


def pg_backend_setup(role: str) -> list[str]:
    """What a B2 pristine's build runs (superuser, on the task database) for
    :data:`PG_BACKEND_BLOCKS`: a function that sums the catalogs' cumulative block counts (the
    candidate may not read per-relation statistics itself), callable by ``role``, and reads done
    by the backend itself (``io_method = sync``: not by I/O workers, whose reads would be counted
    as theirs -- and charged to no one's CPU clock)."""
    quoted = '"' + role.replace('"', '""') + '"'
    return [
        f"CREATE SCHEMA IF NOT EXISTS {WORK_SCHEMA}",
        f"REVOKE ALL ON SCHEMA {WORK_SCHEMA} FROM PUBLIC",
        f"CREATE OR REPLACE FUNCTION {WORK_SCHEMA}.catalog_blocks() RETURNS int8 LANGUAGE sql STABLE "
        "SECURITY DEFINER SET search_path = pg_catalog AS $f$ "
        "SELECT COALESCE(sum(pg_stat_get_blocks_fetched(c.oid)), 0)::int8 FROM pg_class c "
        "WHERE c.oid < 16384 AND c.relkind IN ('r', 'i', 't') $f$",
        f"REVOKE ALL ON FUNCTION {WORK_SCHEMA}.catalog_blocks() FROM PUBLIC",
        f"GRANT USAGE ON SCHEMA {WORK_SCHEMA} TO {quoted}",
        f"GRANT EXECUTE ON FUNCTION {WORK_SCHEMA}.catalog_blocks() TO {quoted}",
        "ALTER SYSTEM SET io_method = 'sync'",
    ]


#: Every block this backend found in shared or local buffers or read in, of any relation (its
#: I/O statistics, PostgreSQL 18), and the catalogs' share of all blocks fetched so far; both
#: cumulative, as flushed when the backend last went idle after a transaction.
PG_BACKEND_BLOCKS = (
    "SELECT COALESCE(sum(io.hits + io.read_bytes / current_setting('block_size')::int8), 0)::int8, "
    f"{WORK_SCHEMA}.catalog_blocks() "
    "FROM pg_catalog.pg_stat_get_backend_io(pg_catalog.pg_backend_pid()) io "
    "WHERE io.object IN ('relation', 'temp relation')"
)
#: Ends the transaction with every pending count flushed (the flush runs when the backend goes
#: idle after the ``ROLLBACK``, before it answers it).
PG_FLUSHED_ROLLBACK = ("SELECT pg_catalog.pg_stat_force_next_flush()", "ROLLBACK")


def pg_backend_blocks(conn: Any) -> tuple[int, int]:
    """(every block of the backend, the catalogs' blocks) so far, outside a transaction."""
    blocks, catalog = conn.execute(PG_BACKEND_BLOCKS).fetchone()
    return int(blocks), int(catalog)


#: An oid from the OID counter, now (a large object of the run's transaction: rolled back with it).
PG_OID_MARK = "SELECT pg_catalog.lo_create(0)::int8"
#: Blocks fetched from relations with oids in ``(%s, %s)`` that ``pg_class`` no longer lists:
#: relations the run created and dropped (their pending counts last until the transaction ends).
PG_DROPPED_BLOCKS = (
    "SELECT COALESCE(SUM(pg_catalog.pg_stat_get_xact_blocks_fetched(o::oid)), 0)::int8 "
    "FROM pg_catalog.generate_series(%s::int8 + 1, %s::int8 - 1) AS o "
    "WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = o::oid)"
)
#: More oids than this between the marks (a run that made millions of objects) are not scanned.
MAX_OID_SPAN = 2_000_000


def pg_oid_mark(conn: Any) -> int:
    """An oid freshly taken from the OID counter: a mark before or after a run."""
    return int(conn.execute(PG_OID_MARK).fetchone()[0])


def pg_dropped_blocks(conn: Any, first: int, last: int) -> int:
    """Blocks the backend fetched from relations made after oid ``first`` and dropped before
    oid ``last`` was taken (0 when the span wrapped around or exceeds :data:`MAX_OID_SPAN`)."""
    if not 0 < last - first <= MAX_OID_SPAN:
        return 0
    return int(conn.execute(PG_DROPPED_BLOCKS, (first, last)).fetchone()[0])


# --------------------------------------------------------------------------- Oracle
ORA_STATS = {
    "session logical reads": "reads",
    "table scans (short tables)": "scans",
    "table scans (long tables)": "scans",
    "index scans kdiixs1": "scans",
    "index fetch by key": "scans",
    "index fast full scans (full)": "scans",
    "db block changes": "writes",
}
_ORA_NAMES = ", ".join(f"'{name}'" for name in ORA_STATS)
#: On the measured session itself.
ORA_COUNTERS = (
    "SELECT n.name, s.value FROM SYS.V_$MYSTAT s JOIN SYS.V_$STATNAME n ON n.statistic# = s.statistic# "
    f"WHERE n.name IN ({_ORA_NAMES})"
)
#: On the admin's connection, for the measured session's SID (``:1``).
ORA_SESSION_COUNTERS = (
    "SELECT n.name, s.value FROM SYS.V_$SESSTAT s JOIN SYS.V_$STATNAME n ON n.statistic# = s.statistic# "
    f"WHERE s.sid = :1 AND n.name IN ({_ORA_NAMES})"
)


def ora_work(rows: Sequence[Sequence[Any]]) -> Work:
    """The counts from the rows of :data:`ORA_COUNTERS` (name, value)."""
    counts = {"reads": 0, "scans": 0, "writes": 0}
    for name, value in rows:
        key = ORA_STATS.get(str(name))
        if key:
            counts[key] += int(value or 0)
    return Work(counts, ORA_MEASURE)


class CounterUnavailable(Exception):
    """Neither the session nor the admin may read the session statistics (the message says why
    and which GRANTs to run)."""


@dataclass
class OraCounter:
    """Reads the measured session's statistics; ``source`` says from where (``V$MYSTAT`` or
    ``V$SESSTAT``)."""

    read_rows: Callable[[], list]
    source: str

    def read(self) -> Work:
        return ora_work(self.read_rows())


def ora_counter(session_sql: Callable[[str, Sequence[Any]], list], admin_sql: Callable[[str, Sequence[Any]], list],
                sid: Callable[[], int], candidate: str, admin: str) -> OraCounter:
    """The session's own ``V$MYSTAT`` if it may read it, else the admin's ``V$SESSTAT`` for the
    session's current SID (``sid`` is asked on every read: a timed-out call reconnects).
    Both are tried once here; a source that fails or returns no rows does not count as working
    (``admin_sql`` may turn a missing privilege into no rows)."""
    problems = []
    for source, read in (
        ("V$MYSTAT", lambda: session_sql(ORA_COUNTERS, [])),
        ("V$SESSTAT", lambda: admin_sql(ORA_SESSION_COUNTERS, [sid()])),
    ):
        try:
            rows = read()
        except Exception as exc:  # noqa: BLE001 - the harness's query failed: try the next source
            problems.append(f"{source}: {str(exc).strip()[:200]}")
            continue
        if any(str(name) == "session logical reads" for name, _ in rows):
            return OraCounter(read, source)
        problems.append(f"{source}: no rows (no privilege)")
    raise CounterUnavailable(
        "the work counter cannot read the session statistics (" + "; ".join(problems) + "). As SYS, run "
        f"GRANT SELECT ON SYS.V_$SESSTAT TO {admin}; GRANT SELECT ON SYS.V_$STATNAME TO {admin}; "
        "(the admin account reads the candidate session's statistics), or "
        "GRANT SELECT ON SYS.V_$MYSTAT TO PUBLIC; GRANT SELECT ON SYS.V_$STATNAME TO PUBLIC; "
        f"(each session reads its own; the candidate user {candidate} is created per run)")

"""ProcArena B2 on Oracle: the bench (scale, restore the scaled rows between runs and the fixture's
at the end, time, count work from the session statistics) against stand-ins that record every
statement; and, where an Oracle is reachable (``PLSQL_ORACLE_DSN``), the reference answer's work
ratio of exactly 1.0 on procarena-sample's B2 tasks.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_plsqlbench import outcomes
from pytest_plsqlbench.dialects.base import DbError, Execution
from pytest_plsqlbench.dialects.oracle import OracleBackend, OracleSession
from pytest_plsqlbench.dialects.postgres import PostgresBackend
from pytest_plsqlbench.errors import InfrastructureError
from pytest_plsqlbench.procarena import oracle_restore as orr
from pytest_plsqlbench.procarena import state as st
from pytest_plsqlbench.procarena.perf import timing
from pytest_plsqlbench.procarena.perf.oracle import OraBench
from pytest_plsqlbench.settings import Settings

REPO = Path(__file__).resolve().parent.parent
OWNER = "WAREHOUSE"
CALLS = ["BEGIN p(1); END;", "BEGIN p(2); END;"]
#: Statistics one call of each contender adds (scans, logical reads, block changes).
PER_CALL = {"gold": (3, 40, 5), "slow": (50, 900, 60), "cand": (3, 40, 5), "other": (1, 10, 1)}
RESTORE_SCALED = orr.restore_statements(OWNER, ["LOCATIONS", "ITEMS"], orr.SCALED_PREFIX)
RESTORE_CLEAN = orr.restore_statements(OWNER, ["LOCATIONS", "ITEMS"])


# --------------------------------------------------------------------------- stand-ins
class FakeSession(OracleSession):
    """The candidate session: runs scripts by name, keeps session statistics, logs to ``events``
    (an OracleSession whose driver-facing members are stand-ins; its public ones are real)."""

    def __init__(self, events: list[str], mystat: bool) -> None:
        self.events = events
        self.mystat = mystat
        self.sid = (42, 7)
        self.conn = object()
        self.stats = Counter({"session logical reads": 100, "table scans (short tables)": 10,
                              "index fetch by key": 5, "db block changes": 1, "parse count (total)": 3})
        self.installed: str | None = None

    def connect(self) -> None:
        self.events.append("connect")
        self.sid = (self.sid[0] + 1, 1)  # a new session: its statistics start afresh
        self.stats = Counter({"session logical reads": 7, "table scans (short tables)": 2})

    def begin_task(self) -> None:
        self.events.append("begin_task")

    def end_task(self) -> None:
        self.events.append("end_task")
        self.installed = None

    def _sql(self, text: str, params: Any = ()) -> list:
        if "V_$MYSTAT" in text:
            if not self.mystat:
                raise InfrastructureError("harness query failed: ORA-00942: table or view does not exist")
            return list(self.stats.items())
        self.events.append(f"session {text}")
        return []

    def run(self, script: str, *, isolated: bool, phase: str) -> Execution:  # type: ignore[override]
        if phase == "install":
            self.events.append(f"install {script}")
            if script == "boom":
                raise InfrastructureError("database connection lost: ORA-03113")
            if script == "broken":
                return Execution(error=DbError("PROCEDURE P has compilation errors", "PLS-00103",
                                               outcomes.INVALID_ARTIFACT))
            # compiling runs recursive SQL: counted by the session, never in W
            self.stats.update({"session logical reads": 1000, "index fetch by key": 7, "db block changes": 30})
            self.installed = script
            return Execution()
        self.events.append(f"call {script}")
        assert self.installed is not None
        if self.installed == "late":
            self.sid = (self.sid[0] + 1, 1)  # cancelled: the session is replaced, its counts start afresh
            self.stats = Counter({"session logical reads": 1})
            return Execution(error=DbError("statement ran longer than 5s and was cancelled", "DPY-4024",
                                           outcomes.TIMEOUT))
        scans, reads, writes = PER_CALL[self.installed]
        self.stats.update({"table scans (short tables)": 1, "index fetch by key": scans - 1,
                           "session logical reads": reads, "db block changes": writes})
        if script == CALLS[1] and self.installed == "slow":
            return Execution(error=DbError("ORA-20001: no such item", "ORA-20001", outcomes.WRONG_OUTPUT))
        return Execution()


class FakeBackend(OracleBackend):
    """An OracleBackend whose driver-facing private members are stand-ins: admin SQL (catalog
    answers canned), the registry lock, the candidate session; OraBench runs through its real
    public members. Every statement goes to ``events``."""

    def __init__(self, mystat: bool = True, sesstat: bool = True, fail_insert: bool = False,
                 fail_drop: bool = False) -> None:
        self.events: list[str] = []
        self.fail_drop = fail_drop
        self.sesstat = sesstat
        self.fail_insert = fail_insert
        self._session = FakeSession(self.events, mystat)
        self.candidate = "PLSQLB_T_1"
        self.admin_dsn = SimpleNamespace(user="system")
        self.admin = SimpleNamespace(commit=lambda: self.events.append("COMMIT"), cursor=self._cursor)
        self._loaded = [SimpleNamespace(key="procarena:warehouse:oracle:abc")]
        self.registry: dict[str, str] = {}
        self.rows: list[tuple[str, list]] = []

    def session(self) -> FakeSession:
        return self._session

    def ensure_fixtures(self, fixtures: Any) -> None:
        self.events.append("ensure_fixtures")

    def allow_writes(self, schemas: list) -> None:
        self.events.append(f"allow_writes {schemas}")

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[Any]:
        backend = self

        class Cur:
            def executemany(self, text: str, rows: list) -> None:
                backend.events.append(f"admin {text}")
                if backend.fail_insert:
                    raise RuntimeError("ORA-00001: unique constraint violated")
                backend.rows.append((text, rows))

        yield Cur()

    def _admin_sql(self, text: str, params: Any = (), ignore: Any = ()) -> list:
        if text == orr.TABLES_SQL:
            return [("ITEMS",), ("LOCATIONS",)]
        if text == orr.FK_SQL:
            return [("ITEMS", "LOCATIONS")]
        if "ALL_TAB_COLS" in text:
            return [("LOCATIONS", "LOCATION_ID", "NUMBER", None, "Y", None, None, None),
                    ("LOCATIONS", "CODE", "VARCHAR2", None, "Y", 10, None, None),
                    ("ITEMS", "ITEM_ID", "NUMBER", None, "Y", None, None, None),
                    ("ITEMS", "LOCATION_ID", "NUMBER", None, "Y", None, None, None)]
        if "ALL_CONSTRAINTS" in text:
            return [("ITEMS", "p", "ITEM_ID", None, None),
                    ("ITEMS", "f", "LOCATION_ID", "WAREHOUSE.LOCATIONS", "LOCATION_ID"),
                    ("LOCATIONS", "p", "LOCATION_ID", None, None)]
        if text.startswith('SELECT "LOCATION_ID", "CODE"'):
            return [(1, "A-01"), (2, "A-02")]
        if text.startswith('SELECT "ITEM_ID"'):
            return [(10, 1)]
        if "V_$SESSTAT" in text:
            assert "ORA-01031" in ignore and "ORA-00942" in ignore  # a missing privilege is no rows
            session = self._session
            return list(session.stats.items()) if self.sesstat and params == [session.sid[0]] else []
        self.events.append(f"admin {text}")
        if self.fail_drop and "DROP TABLE" in text:
            raise InfrastructureError("ORA-00054: resource busy")
        return []

    @contextlib.contextmanager
    def _database_lock(self, key: str) -> Iterator[str | None]:
        self.events.append(f"lock {key}")
        # the call-suite judge made the clean shadows when the task started
        yield "loaded" if key.startswith("procarena-shadow:") else self.registry.get(key)
        self.events.append(f"unlock {key}")

    def _lock_conn_sql(self, text: str, params: list) -> None:
        self.registry[params[0]] = "loaded"


@pytest.fixture(autouse=True)
def _snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    """The state at scale: what the installed contender leaves (gold and cand alike)."""

    def snapshot(conn: Any, owners: list) -> dict:
        session = _CURRENT["session"]
        assert owners == [OWNER, "PLSQLB_T_1"]
        session.events.append("snapshot")
        by = "gold" if session.installed in ("gold", "cand") else session.installed
        return {"warehouse.items": st.table_state("warehouse.items", ("by",), [(by,)])}

    monkeypatch.setattr(st, "ora_snapshot", snapshot)


_CURRENT: dict[str, Any] = {}


def _backend(**kw: Any) -> FakeBackend:
    backend = FakeBackend(**kw)
    _CURRENT["session"] = backend._session
    return backend


def _bench(backend: FakeBackend, **kw: Any) -> OraBench:
    return OraBench(backend, "warehouse", CALLS, 4, {"warehouse.locations": 3}, **kw)


def _runs(events: list[str]) -> list[list[str]]:
    """The events of each run: from its new connection to the next one (or to the bench's end)."""
    starts = [i for i, e in enumerate(events) if e == "connect"]
    return [events[a:b] for a, b in zip(starts, starts[1:] + [len(events)])]


def _admin(events: list[str]) -> list[str]:
    return [e[6:] for e in events if e.startswith("admin ")]


# --------------------------------------------------------------------------- the bench (stand-ins)
def test_bench_scales_copies_rotates_restores_between_runs_and_at_the_end() -> None:
    backend = _backend()
    with _bench(backend) as bench:
        assert bench.counter_source == "V$MYSTAT" and bench.MEASURE == "scans"
        assert bench.plan.counts == {"warehouse.locations": 3, "warehouse.items": 4}
        setup = list(backend.events)
        backend.events.clear()
        got = timing.measure(bench.run, {"gold": "gold", "baseline": "slow", "candidate": "cand"}, 3)
        during = list(backend.events)
        backend.events.clear()
    # entering: the fixture's rows first, then grown parents first and committed, then copied
    admin = _admin(setup)
    assert admin[:len(RESTORE_CLEAN)] == RESTORE_CLEAN
    inserts = [s for s in admin if s.startswith('INSERT INTO "WAREHOUSE"') and "VALUES" in s]
    assert [s.split()[2] for s in inserts] == ['"WAREHOUSE"."LOCATIONS"', '"WAREHOUSE"."ITEMS"']
    assert any("GATHER_TABLE_STATS" in s for s in admin)
    copies = [s for s in admin if s.startswith("CREATE TABLE")]
    assert copies == [f'CREATE TABLE "WAREHOUSE"."PA$${t}" AS SELECT * FROM "WAREHOUSE"."{t}"'
                      for t in ("LOCATIONS", "ITEMS")]
    assert setup.index("admin " + copies[-1]) > setup.index("admin " + inserts[-1])
    assert not any(e.startswith("lock procarena-run") for e in setup)  # inside a task run: already held
    # two warm-up rounds, then rounds starting with gold, baseline, candidate
    installs = [e.split()[1] for e in during if e.startswith("install ")]
    assert installs == ["gold", "slow", "cand"] * 2 + ["gold", "slow", "cand", "slow", "cand", "gold",
                                                       "cand", "gold", "slow"]
    runs = _runs(during)
    assert len(runs) == 15
    for run in runs:  # every run: a new session, parallel off, install, calls, scope ended, scaled rows back
        assert run[1] == "begin_task" and run[2:4] == ["session ALTER SESSION DISABLE PARALLEL QUERY",
                            "session ALTER SESSION DISABLE PARALLEL DML"]
        end = run.index("end_task")
        assert [e for e in run[end + 1:] if e.startswith("admin ")] == [f"admin {s}" for s in RESTORE_SCALED]
        assert run[-1] == "COMMIT"
    # leaving: the copies dropped, the fixture's rows restored, statistics gathered again
    admin = _admin(backend.events)
    assert [s for s in admin if "DROP TABLE" in s] == [orr.drop_statement(OWNER, t, orr.SCALED_PREFIX)
                                                       for t in ("LOCATIONS", "ITEMS")]
    assert admin[2:2 + len(RESTORE_CLEAN)] == RESTORE_CLEAN and "GATHER_TABLE_STATS" in admin[-1]
    # the record's numbers: medians, the first measured run's state, what each call raised
    assert [len(m.runs) for m in got.values()] == [3, 3, 3]
    assert got["gold"].runs[0].state == got["candidate"].runs[0].state != got["baseline"].runs[0].state
    assert got["gold"].runs[1].state is None
    assert got["baseline"].runs[0].raised == (None, "ORA-20001") and got["gold"].runs[0].raised == (None, None)


def test_work_is_the_delta_around_the_calls_only() -> None:
    backend = _backend()
    with _bench(backend) as bench:
        gold = [bench.run("gold") for _ in range(3)]
        slow = bench.run("slow")
    # two calls of 3 scans each; the install's recursive work (7 lookups, 1000 reads) is not counted
    assert {tuple(sorted(r.work.counts.items())) for r in gold} == {(("reads", 80), ("scans", 6), ("writes", 10))}
    assert gold[0].work.value == 6 and gold[0].work.measure == "scans"
    assert slow.work.counts == {"reads": 1800, "scans": 100, "writes": 120}
    assert all(r.seconds >= 0 and r.install_error is None for r in gold)
    from pytest_plsqlbench.procarena.perf import metrics as bm

    assert bm.work_ratio(gold[0].work.value, slow.work.value) == 0.06


def test_a_run_that_raises_still_restores_the_scaled_rows_and_the_fixture() -> None:
    backend = _backend()
    with pytest.raises(InfrastructureError, match="connection lost"), _bench(backend) as bench:
        bench.run("gold")
        backend.events.clear()
        bench.run("boom")
    run = backend.events
    end = run.index("end_task")
    assert run[end + 1:end + 1 + len(RESTORE_SCALED)] == [f"admin {s}" for s in RESTORE_SCALED]
    admin = _admin(run)
    tail = admin[admin.index(orr.drop_statement(OWNER, "ITEMS", orr.SCALED_PREFIX)) + 1:]
    assert tail[:len(RESTORE_CLEAN)] == RESTORE_CLEAN  # the fixture's rows, after the failure too


def test_a_call_past_the_timeout_stops_the_contender_and_restores() -> None:
    backend = _backend()
    with _bench(backend) as bench:
        got = timing.measure(bench.run, {"gold": "gold", "candidate": "late"}, 3)
    late = got["candidate"].runs
    assert len(late) == 1 and late[0].timed_out and late[0].state is None
    assert late[0].work.counts == {}  # the replaced session's counts are not a delta of this run
    assert [e.split()[1] for e in backend.events if e.startswith("install ")].count("late") == 1
    assert len(got["gold"].runs) == 3
    runs = _runs(backend.events)
    timed = next(r for r in runs if "install late" in r)
    assert timed.count("call BEGIN p(1); END;") == 1 and "call BEGIN p(2); END;" not in timed  # stops at the timeout
    assert [e for e in timed[timed.index("end_task") + 1:] if e.startswith("admin ")] == [
        f"admin {s}" for s in RESTORE_SCALED]


def test_scaling_inserts_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_plsqlbench.procarena.perf import oracle

    monkeypatch.setattr(oracle, "BATCH", 3)
    backend = _backend()
    with OraBench(backend, "warehouse", CALLS, 8, {"warehouse.locations": 2}):
        pass
    assert [len(rows) for _, rows in backend.rows] == [3, 3, 1]  # ITEMS: 7 new rows, 3 at a time
    assert len({r[0] for _, rows in backend.rows for r in rows}) == 7  # fresh keys


def test_an_answer_that_does_not_install_is_timed_without_calls() -> None:
    backend = _backend()
    with _bench(backend) as bench:
        run = bench.run("broken", keep_state=True)
    assert run.install_error and "compilation errors" in run.install_error
    assert run.raised == () and run.state is None and not run.timed_out


def test_a_failed_drop_of_the_copies_still_puts_the_fixture_back() -> None:
    backend = _backend()
    with pytest.raises(InfrastructureError, match="resource busy"), _bench(backend) as bench:
        bench.run("gold")
        backend.fail_drop = True
        backend.events.clear()
    admin = _admin(backend.events)
    drop = admin.index(orr.drop_statement(OWNER, "LOCATIONS", orr.SCALED_PREFIX))
    assert admin[drop + 1:drop + 1 + len(RESTORE_CLEAN)] == RESTORE_CLEAN


def test_scaling_failure_puts_the_fixture_back() -> None:
    backend = _backend(fail_insert=True)
    with pytest.raises(InfrastructureError, match="B2 scaling failed"), _bench(backend):
        pytest.fail("the bench must not open")
    admin = _admin(backend.events)
    n = len(RESTORE_CLEAN)
    assert admin[:n] == RESTORE_CLEAN and admin[n].startswith('INSERT INTO "WAREHOUSE"."LOCATIONS"')
    assert admin[n + 1:n + 1 + n] == RESTORE_CLEAN and all("GATHER_TABLE_STATS" in s for s in admin[n + 1 + n:])
    assert not any(s.startswith("CREATE TABLE") for s in admin)


def test_hold_takes_the_schema_for_the_whole_bench() -> None:
    backend = _backend()
    with _bench(backend, hold=True) as bench:
        bench.run("gold")
    locks = [e for e in backend.events if e.startswith(("lock procarena-run", "unlock procarena-run"))]
    assert locks == [f"lock procarena-run:{OWNER}", f"unlock procarena-run:{OWNER}"]
    events = backend.events
    assert events.index(locks[0]) < events.index("begin_task")
    assert events.index(locks[1]) > max(i for i, e in enumerate(events) if e == "admin " + RESTORE_CLEAN[-1])


def test_counter_falls_back_to_the_admins_view_of_the_session() -> None:
    backend = _backend(mystat=False)
    with _bench(backend) as bench:
        assert bench.counter_source == "V$SESSTAT"
        gold = bench.run("gold")
    assert gold.work.counts == {"reads": 80, "scans": 6, "writes": 10}


def test_no_access_to_session_statistics_is_not_measured_with_the_grants() -> None:
    backend = _backend(mystat=False, sesstat=False)
    with pytest.raises(timing.NotMeasured) as info, _bench(backend):
        pytest.fail("the bench must not open")
    msg = str(info.value)
    assert "GRANT SELECT ON SYS.V_$SESSTAT TO SYSTEM" in msg and "GRANT SELECT ON SYS.V_$STATNAME" in msg
    assert "GRANT SELECT ON SYS.V_$MYSTAT TO PUBLIC" in msg and "ORA-00942" in msg
    assert _admin(backend.events) == []  # asked before anything changed: nothing scaled, nothing to restore


def test_perf_judge_on_oracle_measures_or_says_not_measured() -> None:
    from pytest_plsqlbench.procarena.perf.judge import PerfJudge

    b2 = SimpleNamespace(degraded="slow", scale_rows=4, scale={}, repeats=2, min_speedup=1.1)
    spec = SimpleNamespace(gold="gold", calls=CALLS, schema="warehouse", b2=b2)
    ctx = SimpleNamespace(backend=_backend())
    rec = PerfJudge()._measure(ctx, spec, "cand")  # type: ignore[arg-type]
    assert rec["same_state_as_gold"] and rec["work_ratio"] == 1.0 and rec["work_ratio_vs_baseline"] == 100 / 6
    assert rec["measure"] == "scans" and rec["work_source"] == "V$MYSTAT" and rec["repeats"] == 2
    assert rec["work"]["baseline"] == {"reads": 1800, "scans": 100, "writes": 120}
    assert all(rec["work_stable"].values()) and rec["scaled"] == {"warehouse.locations": 4, "warehouse.items": 4}
    rec = PerfJudge()._measure(SimpleNamespace(backend=_backend()), spec, "other")  # type: ignore[arg-type]
    assert rec["rejection"] == "wrong_state" and not rec["admitted"] and "scale" in rec["why"]
    ctx = SimpleNamespace(backend=_backend(mystat=False, sesstat=False))
    rec = PerfJudge()._measure(ctx, spec, "cand")  # type: ignore[arg-type]
    assert rec["admitted"] and rec["acceleration"] is None and "GRANT SELECT ON SYS.V_$SESSTAT" in rec["why"]


def test_validate_times_gold_and_the_degraded_input_on_oracle() -> None:
    from pytest_plsqlbench.procarena.perf.validate import check_speed

    task = SimpleNamespace(id="oracle_b2_000", fixtures=())

    def spec(degraded: str) -> Any:
        b2 = SimpleNamespace(degraded=degraded, scale_rows=4, scale={})
        return SimpleNamespace(gold="gold", calls=CALLS, schema="warehouse", b2=b2)

    backend = _backend()
    line, problems = check_speed(backend, task, spec("slow"), repeats=1)
    assert "work 6 vs 100 scans" in line and "at 8 rows" in line
    assert "does not leave gold's state" in " ".join(problems)  # the stand-in's slow call raises
    assert not any("no more work" in p for p in problems)
    assert f"lock procarena-run:{OWNER}" in backend.events  # outside a task run: validate holds the schema
    _, problems = check_speed(_backend(), task, spec("gold"), repeats=1)
    assert any("does no more work than gold (6 vs 6 scans; needs >= 1.05x)" in p for p in problems)
    line, problems = check_speed(_backend(), task, spec("late"), repeats=1)
    assert "speed not checked (baseline ran past the statement timeout)" in line
    assert problems == [("oracle_b2_000: baseline ran past the statement timeout at the task's scale "
                         "(raise --plsql-timeout, or a smaller b2.scale_rows)")]
    line, problems = check_speed(_backend(mystat=False, sesstat=False), task, spec("slow"), repeats=1)
    assert line.startswith("oracle_b2_000: speed not checked (oracle: the work counter cannot read")
    assert "GRANT SELECT ON SYS.V_$SESSTAT TO SYSTEM" in line and problems == []


def test_bench_for_picks_the_dialects_bench() -> None:
    b2 = SimpleNamespace(scale_rows=7, scale={"warehouse.items": 9})
    spec = SimpleNamespace(schema="warehouse", calls=CALLS, b2=b2)
    ora = timing.bench_for(FakeBackend(), spec, hold=True)
    assert isinstance(ora, OraBench) and ora.hold and ora.owner == OWNER and ora.scale == {"warehouse.items": 9}
    pg = timing.bench_for(PostgresBackend(Settings.of(subsets=(), dialect="postgres")), spec)  # not started
    assert isinstance(pg, timing.PgBench) and pg.scale_rows == 7
    with pytest.raises(timing.NotMeasured, match="sqlite"):
        timing.bench_for(SimpleNamespace(dialect="sqlite"), spec)  # type: ignore[arg-type]


def test_scaled_copies_never_collide_with_clean_shadows_and_stay_hidden() -> None:
    assert orr.shadow_name("ITEMS", orr.SCALED_PREFIX) == "PA$$ITEMS" != orr.shadow_name("ITEMS")
    assert orr.SCALED_PREFIX.startswith(orr.SHADOW_PREFIX)  # every "NOT LIKE 'PA$%'" skips them
    assert orr.restore_statements(OWNER, ["ITEMS"], orr.SCALED_PREFIX)[-1] == (
        'INSERT INTO "WAREHOUSE"."ITEMS" SELECT * FROM "WAREHOUSE"."PA$$ITEMS"')


# --------------------------------------------------------------------------- the real session, scripted driver
def test_bench_drives_the_real_oracle_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """OraBench with OracleSession itself on tests/test_oracle_session.py's scripted python-oracledb:
    a new connection per run, parallel query off, the contender dropped by the janitor after its
    run, an install past the call timeout ending the server session; the counter falls back to the
    admin's V$SESSTAT (the scripted driver grants the candidate no V$MYSTAT)."""
    from pytest_plsqlbench.dialects import oracle

    import test_oracle_session as scripted

    db = scripted.FakeDb()
    driver = SimpleNamespace(Error=scripted.Error, DatabaseError=scripted.DatabaseError,
                             IntegrityError=scripted.IntegrityError,
                             connect=lambda **kw: scripted.Connection(db), **vars(scripted.DB))
    monkeypatch.setitem(sys.modules, "oracledb", driver)
    backend = _backend()
    session = oracle.OracleSession(scripted.FakeBackend(db, timeout=2.0))  # type: ignore[arg-type]
    backend._session = session  # type: ignore[assignment]
    stats = Counter({"session logical reads": 1, "table scans (short tables)": 1})  # V$SESSTAT, SID 57
    real_admin = backend._admin_sql

    def admin_sql(text: str, params: Any = (), ignore: tuple = ()) -> list:
        if "V_$SESSTAT" in text:
            assert params == [57]
            stats["table scans (short tables)"] += 2  # each read sees the session's work so far
            return list(stats.items())
        return real_admin(text, params, ignore)

    monkeypatch.setattr(backend, "_admin_sql", admin_sql)
    gold = "CREATE OR REPLACE PROCEDURE p(n NUMBER) IS BEGIN NULL; END;\n/\n"
    late = "BEGIN LOOP NULL; END LOOP; END;\n/\n"
    connects = db.connects
    with _bench(backend) as bench:
        assert bench.counter_source == "V$SESSTAT"
        got = timing.measure(bench.run, {"gold": gold, "candidate": late}, 2, warmup=1)
    assert [len(m.runs) for m in got.values()] == [2, 1] and got["candidate"].runs[0].timed_out
    assert all(r.work.counts["scans"] == 2 and r.raised == (None, None) for r in got["gold"].runs)
    assert db.connects - connects == 4 + 1  # a new connection per run, one more after the timeout
    assert db.killed == [(57, 999)]
    assert db.executed.count("ALTER SESSION DISABLE PARALLEL QUERY") == 4
    assert db.objects == {}  # the janitor dropped every contender's procedure
    assert sum(1 for x in db.executed if x.startswith('DROP PROCEDURE "P"')) == 3
    assert sum(1 for e in backend.events if e == "admin " + RESTORE_SCALED[-1]) == 4  # after every run


# --------------------------------------------------------------------------- live Oracle
SKIP_REASON = "no Oracle reachable: set PLSQL_ORACLE_DSN (user/password@host:port/service of an admin account)"
needs_oracle = pytest.mark.skipif(not os.environ.get("PLSQL_ORACLE_DSN"), reason=SKIP_REASON)


@needs_oracle
@pytest.mark.oracle
@pytest.mark.slow
def test_oracle_reference_work_ratio_is_exactly_one(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--subset", "procarena-sample",
         "--plsql-dialect=oracle", f"--plsql-dsn={os.environ['PLSQL_ORACLE_DSN']}", "--plsql-model=reference",
         "-m", "scenario_b2", "--plsql-b2-repeats=2", "--plsql-timeout=300", "-n", "0", f"--plsql-results={out}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=3600, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    perfs = [t for task in doc["tasks"] for t in task["tests"] if t["test_id"] == "perf"]
    assert len(perfs) == 3, [t["test_id"] for task in doc["tasks"] for t in task["tests"]]
    for perf in perfs:
        rec = perf["extra"]["b2"]
        assert rec["admitted"] and rec["same_state_as_gold"], rec
        assert rec["work_ratio"] == 1.0 and all(rec["work_stable"].values()), rec  # the same procedure, the same count
        assert rec["work_ratio_vs_baseline"] > 1.0 and rec["measure"] == "scans", rec
    assert "oracle: 3/3 admitted" in proc.stdout


@needs_oracle
@pytest.mark.oracle
def test_oracle_work_counter_is_deterministic_and_the_fixture_is_restored() -> None:
    from pytest_plsqlbench.manifests import load_manifest
    from pytest_plsqlbench.procarena.evaluation import evaluate
    from pytest_plsqlbench.procarena.loader import load, spec_of
    from pytest_plsqlbench.runner import open_backend
    from pytest_plsqlbench.settings import Settings

    make = Settings.of  # flat names: Settings.of since the settings are grouped
    settings = make(subsets=("procarena-sample",), dialect="oracle", db="dsn", dsn=os.environ["PLSQL_ORACLE_DSN"],
                    timeout=300)
    tasks = load(load_manifest(REPO / "tasks" / "procarena-sample.yaml"), settings)
    task = next(t for t in tasks if spec_of(t).b2 is not None and spec_of(t).b2.scale_rows <= 1000)
    spec = spec_of(task)
    with open_backend(settings, "b2oracle") as backend:
        assert all(o.passed for o in evaluate(backend, task, spec.gold))  # shadows made, fixture loaded
        owner = spec.schema.upper()
        clean = st.ora_snapshot(backend.admin, [owner])
        with timing.bench_for(backend, spec, hold=True) as bench:
            for _ in range(2):
                bench.run(spec.gold), bench.run(spec.b2.degraded)
            gold = [bench.run(spec.gold, keep_state=True) for _ in range(3)]
            slow = bench.run(spec.b2.degraded)
        assert len({r.work.value for r in gold}) == 1 and gold[0].work.value > 0, [r.work.counts for r in gold]
        assert gold[0].state == gold[2].state  # every run starts from the same scaled rows
        assert slow.work.value > gold[0].work.value
        assert st.ora_snapshot(backend.admin, [owner]) == clean  # the fixture's rows are back

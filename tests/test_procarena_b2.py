"""ProcArena B2 (issue 14): scaling, the work counter, the timing protocol, the gate and the metrics.

No test asserts a wall-clock bound (the machine is shared): timings are checked for their
structure, work counts for their values. Database tests run the clinic B2 task of
procarena-sample at a small scale (a copy of its file with ``scale_rows: 200``).
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_plsqlbench.procarena.perf import catalog as cat
from pytest_plsqlbench.procarena.perf import metrics as bm
from pytest_plsqlbench.procarena.perf import scale as sc
from pytest_plsqlbench.procarena.perf import timing, work
from pytest_plsqlbench.procarena.perf.catalog import Column, ForeignKey, Schema, Table

from embedded import started_backend

REPO = Path(__file__).resolve().parent.parent
CLINIC_B2 = REPO / "tasks" / "procarena-sample" / "postgres" / "b2_002.yaml"


# --------------------------------------------------------------------------- metrics (exact)
def test_harmonic_mean_is_exact_and_penalises_regressions() -> None:
    """The B2 table's harmonic mean: a 4x gain does not make up for a 4x loss; an infinite ratio
    (a candidate doing no measurable work) adds nothing to the sum of reciprocals."""
    hmean = bm._hmean_inf  # noqa: SLF001 - the metric the B2 table reports
    assert hmean([4.0, 0.25]) == pytest.approx(2 / (0.25 + 4.0), rel=1e-15)
    assert hmean([2.0, 2.0, 2.0]) == 2.0
    assert hmean([1.0]) == 1.0
    assert hmean([]) is None
    assert hmean([2.0, float("inf")]) == pytest.approx(4.0)
    assert hmean([float("inf")]) == float("inf")


@pytest.mark.parametrize(("speedup", "want"), [
    (0.5, "slower"), (0.909, "slower"), (0.9091, "matched"), (1.0, "matched"), (1.0999, "matched"),
    (1.1, "1.1-2x"), (1.99, "1.1-2x"), (2.0, "2-10x"), (9.99, "2-10x"), (10.0, ">10x"), (4445.0, ">10x"),
])
def test_speedup_bins_of_figure_4(speedup: float, want: str) -> None:
    assert bm.speedup_bin(speedup, 1.1) == want


def test_min_speedup_is_the_threshold_of_faster() -> None:
    assert bm.speedup_bin(1.2, 1.5) == "matched" and bm.speedup_bin(1.5, 1.5) == "1.1-2x"
    assert bm.speedup_bin(0.66, 1.5) == "slower" and bm.speedup_bin(0.67, 1.5) == "matched"


def test_gate_rejection_classes() -> None:
    assert bm.gate_rejection([None, "contract"]) == "compile"
    assert bm.gate_rejection(["schema"]) == "compile"
    assert bm.gate_rejection(["exception"]) == "runtime"
    assert bm.gate_rejection(["state_effect"]) == "wrong_state"
    assert bm.gate_rejection(["control_flow", "exception"]) == "wrong_state"
    assert bm.gate_rejection([None, None]) is None


def test_ratios_orientation() -> None:
    figures = bm.task_figures({"gold": 1.0, "baseline": 8.0, "candidate": 2.0},
                              {"gold": 100, "baseline": 900, "candidate": 400}, 1.1)
    assert figures["acceleration"] == 0.5 and figures["work_ratio"] == 0.25
    assert figures["acceleration_vs_baseline"] == 4.0 and figures["work_ratio_vs_baseline"] == 2.25
    assert figures["baseline_acceleration"] == 8.0 and figures["bin"] == "slower"
    assert bm.work_ratio(0, 0) == 1.0 and bm.work_ratio(5, 0) == 5.0


def _rec(acc: float, wr: float, dialect: str = "postgres", **kw: Any) -> dict:
    return {"dialect": dialect, "admitted": True, "rejection": None, "acceleration": acc, "work_ratio": wr,
            "acceleration_vs_baseline": acc * 3, "work_ratio_vs_baseline": wr * 5, "min_speedup": 1.1,
            "bin": bm.speedup_bin(acc), "noise": {"gold": 1.5, "candidate": 2.0}, "work_stable": {"gold": True}, **kw}


def test_compute_per_dialect() -> None:
    recs = [_rec(4.0, 1.0), _rec(0.25, 0.5), _rec(1.0, 2.0), _rec(20.0, 1.0, dialect="oracle"),
            {"dialect": "postgres", "admitted": False, "rejection": "wrong_state"},
            {"dialect": "postgres", "admitted": False, "rejection": "compile"},
            {"dialect": "postgres", "admitted": False, "rejection": None}]
    m = bm.compute(recs)
    pg = m["by_dialect"]["postgres"]
    assert m["tasks"] == 7 and pg["tasks"] == 6 and pg["admitted"] == 3 and pg["not_measured"] == 1
    assert pg["rejected"] == {"compile": 1, "wrong_state": 1, "runtime": 0}
    assert pg["acceleration_hmean"] == pytest.approx(3 / (1 / 4 + 4 + 1))
    assert pg["work_ratio_hmean"] == pytest.approx(3 / (1 + 2 + 0.5))
    assert pg["acceleration_vs_baseline_hmean"] == pytest.approx(3 / (1 / 12 + 1 / 0.75 + 1 / 3))
    assert pg["bins"] == {"slower": 1, "matched": 1, "1.1-2x": 0, "2-10x": 1, ">10x": 0, "noise": 0}
    assert pg["bin_rates"]["slower"] == pytest.approx(1 / 3)
    assert pg["noise_median"] == 1.75 and pg["noise_max"] == 2.0
    assert m["by_dialect"]["oracle"]["bins"][">10x"] == 1
    text = "\n".join(bm.summary_lines("s", m))
    assert "postgres: 3/6 admitted" in text and "wrong final state 1" in text and "compile failure 1" in text
    assert "<table>" in bm.html("s", m)


def test_family_figures_read_perf_items_of_the_document() -> None:
    entries = [{"dialect": "postgres", "tests": [
        {"test_id": "call-1", "passed": True},
        {"test_id": "perf", "sample": 0, "passed": True, "extra": {"b2": _rec(2.0, 1.0)}}]},
        {"dialect": "postgres", "tests": [{"test_id": "perf", "passed": False,
                                           "extra": {"b2": {"admitted": False, "rejection": "runtime"}}}]},
        {"dialect": "postgres", "tests": [{"test_id": "call-1", "passed": True}]}]  # not a B2 task
    f = bm.family_figures(entries)
    assert f["b2_acceleration"] == 2.0 and f["b2_work"] == 1.0 and f["b2_bin_2-10x"] == 1.0
    assert f["b2"]["by_dialect"]["postgres"]["rejected"]["runtime"] == 1


# --------------------------------------------------------------------------- protocol
def test_rotation_lets_each_contender_go_first() -> None:
    got = timing.rotation(["gold", "baseline", "candidate"], 5)
    assert got == [["gold", "baseline", "candidate"], ["baseline", "candidate", "gold"],
                   ["candidate", "gold", "baseline"], ["gold", "baseline", "candidate"],
                   ["baseline", "candidate", "gold"]]


def test_measure_warms_up_rotates_and_reports_medians_noise_and_work() -> None:
    calls: list[tuple[str, bool]] = []
    seconds = iter([9, 9, 9, 1.0, 4.0, 2.0, 3.0, 2.0, 8.0, 2.0, 6.0, 4.0])

    def run(code: str, first: bool) -> timing.Run:
        calls.append((code, first))
        return timing.Run(float(next(seconds)), work.Work({"scans": len(code), "tuples": 7, "writes": 1}, "scans"))

    got = timing.measure(run, {"gold": "g", "baseline": "bbbb", "candidate": "cc"}, 3, warmup=1)
    assert [c for c, _ in calls] == ["g", "bbbb", "cc", "g", "bbbb", "cc", "bbbb", "cc", "g", "cc", "g", "bbbb"]
    assert [f for _, f in calls][3:6] == [True, True, True] and not any(f for _, f in calls[6:])
    assert got["gold"].seconds == [1.0, 8.0, 6.0] and got["gold"].median_s == 6.0 and got["gold"].noise == 8.0
    assert got["baseline"].seconds == [4.0, 3.0, 4.0] and got["candidate"].seconds == [2.0, 2.0, 2.0]
    assert got["baseline"].work.value == 4 and got["baseline"].work_stable
    summary = got["candidate"].summary()
    assert summary["seconds"] == 2.0 and summary["noise"] == 1.0 and summary["work"]["scans"] == 2
    calls.clear()
    seconds = iter([1.0] * 15)
    timing.measure(run, {"gold": "g", "baseline": "bbbb", "candidate": "cc"}, 3)  # default: two warm-up rounds
    assert len(calls) == 15 and not any(f for _, f in calls[:6]) and all(f for _, f in calls[6:9])


def test_measure_keeps_the_state_of_every_measured_run_of_a_checked_contender() -> None:
    kept: list[tuple[str, bool]] = []

    def run(code: str, keep: bool) -> timing.Run:
        kept.append((code, keep))
        return timing.Run(1.0, work.Work({"scans": 1}))

    timing.measure(run, {"gold": "g", "baseline": "b", "candidate": "c"}, 3, warmup=1, checked=("candidate",))
    measured = kept[3:]
    assert [k for c, k in measured if c == "c"] == [True, True, True]  # every measured run of the candidate
    assert [k for c, k in measured if c == "g"] == [True, False, False]  # gold: its first one
    # warm-ups: the candidate's only (checked like its measured runs, issue 31)
    assert [(c, k) for c, k in kept[:3] if k] == [("c", True)]


def test_more_rounds_of_gold_and_the_answer_while_the_interval_straddles_a_bin_border() -> None:
    """Issue 31: after the planned rounds, gold and the answer run again (the degraded input not),
    in alternating order, until the interval lies in one bin or ``max_more`` rounds ran; the
    answer's extra runs keep their state (checked like every run of it)."""
    calls: list[tuple[str, bool]] = []
    # a noisy start: rounds of 0.8 and 1.3 -> interval 0.8-1.3 ("noise"); then pairs of 1.0,
    # until at 7 rounds the sign test's interval (2nd to 6th ratio) leaves both out
    times = {"g": iter([1.0, 1.3] + [1.0] * 20), "c": iter([1.25, 1.0] + [1.0] * 20), "b": iter([5.0] * 9)}

    def run(code: str, keep: bool) -> timing.Run:
        calls.append((code, keep))
        return timing.Run(next(times[code]), work.Work({"scans": 1}))

    def settled(got: Any) -> bool:
        _point, (low, high) = timing.paired_ratio(got["gold"], got["candidate"])
        return bm.interval_bin(low, high) != "noise"

    got = timing.measure(run, {"gold": "g", "baseline": "b", "candidate": "c"}, 2, warmup=0, checked=("candidate",),
                         reference="gold", last="baseline", settled=settled, more=("gold", "candidate"), max_more=6)
    assert got["baseline"].extra_runs == 0 and len(got["baseline"].runs) == 2
    assert got["gold"].extra_runs == got["candidate"].extra_runs == 5, calls
    assert calls[6:] == [("g", False), ("c", True), ("c", True), ("g", False)] * 2 + [("g", False), ("c", True)]
    _point, (low, high) = timing.paired_ratio(got["gold"], got["candidate"])
    assert bm.interval_bin(low, high) == "matched"
    # never settled: stops after max_more rounds, order alternating
    calls.clear()
    times = {"g": iter([1.0, 2.0] * 20), "c": iter([2.0, 1.0] * 20), "b": iter([5.0] * 9)}
    got = timing.measure(run, {"gold": "g", "baseline": "b", "candidate": "c"}, 2, warmup=0, checked=("candidate",),
                         reference="gold", last="baseline", settled=lambda _got: False, more=("gold", "candidate"),
                         max_more=3)
    assert got["gold"].extra_runs == got["candidate"].extra_runs == 3
    assert [c for c, _ in calls[6:]] == ["g", "c", "c", "g", "g", "c"]
    # no settled function: the planned rounds only
    calls.clear()
    times = {"g": iter([1.0] * 9), "c": iter([1.0] * 9), "b": iter([5.0] * 9)}
    timing.measure(run, {"gold": "g", "baseline": "b", "candidate": "c"}, 2, warmup=0, more=("gold", "candidate"),
                   max_more=3)
    assert len(calls) == 6


def test_the_reference_runs_first_of_all_and_keeps_that_state() -> None:
    """Gold's state at scale is taken before any other contender has run (a rollback leaves the
    physical growth of each run behind for the next ones)."""
    kept: list[tuple[str, bool]] = []

    def run(code: str, keep: bool) -> timing.Run:
        kept.append((code, keep))
        return timing.Run(1.0, work.Work({"scans": 1}), state=f"state after {code} #{len(kept)}")

    got = timing.measure(run, {"baseline": "b", "candidate": "c", "gold": "g"}, 2, warmup=1,
                         checked=("candidate",), reference="gold")
    assert kept[0] == ("g", True) and got["gold"].first_run is not None
    assert got["gold"].first_run.state == "state after g #1"
    assert kept[1:3] == [("b", False), ("c", True)]  # of the other warm-ups, the candidate's (checked)
    measured = kept[3:]
    assert [k for c, k in measured if c == "c"] == [True, True]  # every measured run of the candidate
    assert not any(k for c, k in measured if c != "c")  # gold's state is its first run's, read once
    kept.clear()
    got = timing.measure(run, {"gold": "g", "candidate": "c"}, 2, warmup=0, reference="gold")
    assert got["gold"].first_run is got["gold"].runs[0] and kept[0] == ("g", True)


def _judged(monkeypatch: pytest.MonkeyPatch, b2_task: Any, got: dict[str, timing.Measurement]) -> dict:
    import contextlib
    from types import SimpleNamespace

    from pytest_plsqlbench.procarena.perf.judge import PerfJudge

    bench = SimpleNamespace(MEASURE="scans", counter_source="test", plan=SimpleNamespace(counts={}, notes=[]))
    monkeypatch.setattr(timing, "bench_for", lambda backend, spec, **k: contextlib.nullcontext(bench))
    monkeypatch.setattr(timing, "measure", lambda *a, **k: got)

    class Ctx:
        backend = None
        task = SimpleNamespace(fixtures=[])

    return PerfJudge(repeats=2)._measure(Ctx(), _spec(b2_task), "answer")  # type: ignore[arg-type]


def _run(state: str, timed_out: bool = False) -> timing.Run:
    """A run whose calls raised nothing ("S", gold's) or one that raised ("not S")."""
    raised = (None,) if state == "S" else ("P0001",)
    return timing.Run(1.0, work.Work({"scans": 1}), raised=raised, state={}, timed_out=timed_out)


def test_a_wrong_state_at_scale_is_rejected_even_when_gold_or_the_baseline_later_timed_out(
        monkeypatch: pytest.MonkeyPatch, b2_task: Any) -> None:
    """A wrong answer whose runs bloat the shared tables (rolled-back writes keep their dead rows)
    until gold's or the degraded input's later runs pass the timeout was "not measured" --
    infrastructure, left out of the metrics -- instead of rejected."""
    gold = timing.Measurement("gold", [_run("S", timed_out=True)], first_run=_run("S"))
    baseline = timing.Measurement("baseline", [_run("S"), _run("S", timed_out=True)])
    wrong = timing.Measurement("candidate", [_run("S"), _run("not S")])
    rec = _judged(monkeypatch, b2_task, {"gold": gold, "baseline": baseline, "candidate": wrong})
    assert rec["rejection"] == "wrong_state" and not rec["admitted"], rec
    assert "measured run 2 of 2" in rec["why"] and "raised differently" in rec["why"]
    # A right answer next to a later timeout: not measured (no ratio to give), as before.
    right = timing.Measurement("candidate", [_run("S"), _run("S")])
    rec = _judged(monkeypatch, b2_task, {"gold": gold, "baseline": baseline, "candidate": right})
    assert rec["rejection"] == "not_measured" and rec["acceleration"] is None
    # Gold past the timeout on its first run, before anything else ran: not measured either.
    cold = timing.Measurement("gold", [_run("S", timed_out=True)], first_run=_run("S", timed_out=True))
    rec = _judged(monkeypatch, b2_task, {"gold": cold, "baseline": baseline, "candidate": wrong})
    assert rec["rejection"] == "not_measured"
    # Nothing timed out: a wrong state is rejected and a right one measured.
    calm_gold = timing.Measurement("gold", [_run("S"), _run("S")], first_run=_run("S"))
    calm_base = timing.Measurement("baseline", [_run("S"), _run("S")])
    assert _judged(monkeypatch, b2_task, {"gold": calm_gold, "baseline": calm_base,
                                          "candidate": wrong})["rejection"] == "wrong_state"
    rec = _judged(monkeypatch, b2_task, {"gold": calm_gold, "baseline": calm_base, "candidate": right})
    assert rec.get("rejection") is None and rec["same_state_as_gold"] and rec["acceleration"] == 1.0


def test_a_contender_that_times_out_runs_no_more() -> None:
    ran: list[str] = []

    def run(code: str, first: bool) -> timing.Run:
        ran.append(code)
        return timing.Run(1.0, work.Work({"scans": 1}), timed_out=code == "slow")

    got = timing.measure(run, {"gold": "g", "candidate": "slow"}, 5)
    assert ran.count("slow") == 1 and ran.count("g") == 7
    assert [r.timed_out for r in got["candidate"].runs] == [True] and len(got["gold"].runs) == 5


# --------------------------------------------------------------------------- scaler (pure)
def _shop() -> tuple[Schema, dict]:
    s = Schema()
    s.tables["s.parent"] = Table("s", "parent", (
        Column("id", cat.INT, False), Column("code", cat.TEXT, False, length=4), Column("kind", cat.TEXT, False),
        Column("since", cat.DATE, True)), primary_key=("id",), uniques=(("code",),))
    s.tables["s.child"] = Table("s", "child", (
        Column("parent_id", cat.INT, False), Column("line", cat.INT, False), Column("other_id", cat.INT, True),
        Column("amount", cat.DECIMAL, False)), primary_key=("parent_id", "line"),
        foreign_keys=(ForeignKey(("parent_id",), "s.parent", ("id",)), ForeignKey(("other_id",), "s.parent", ("id",))))
    s.tables["s.link"] = Table("s", "link", (Column("a", cat.INT, False), Column("b", cat.INT, False)),
                               primary_key=("a", "b"),
                               foreign_keys=(ForeignKey(("a",), "s.parent", ("id",)), ForeignKey(("b",), "s.parent", ("id",))))
    rows = {
        "s.parent": [{"id": 1, "code": "AB", "kind": "X", "since": dt.date(2024, 1, 1)},
                     {"id": 2, "code": "CD", "kind": "Y", "since": None}],
        "s.child": [{"parent_id": 1, "line": 1, "other_id": None, "amount": 5},
                    {"parent_id": 2, "line": 1, "other_id": 1, "amount": 7}],
        "s.link": [{"a": 1, "b": 2}],
    }
    return s, rows


def test_plan_keeps_keys_uniques_fks_and_not_null() -> None:
    schema, rows = _shop()
    p = sc.plan(schema, rows, 40, {"s.parent": 30})
    assert p.order.index("s.parent") < p.order.index("s.child") and p.counts == {"s.parent": 30, "s.child": 40, "s.link": 40}
    parents = rows["s.parent"] + p.new_rows["s.parent"]
    assert len({r["id"] for r in parents}) == 30 and len({r["code"] for r in parents}) == 30
    assert all(len(r["code"]) <= 4 and r["kind"] in ("X", "Y") for r in parents)
    ids = {r["id"] for r in parents}
    children = rows["s.child"] + p.new_rows["s.child"]
    assert len({(r["parent_id"], r["line"]) for r in children}) == 40
    assert all(r["parent_id"] in ids and (r["other_id"] is None or r["other_id"] in ids) for r in children)
    assert any(r["other_id"] is None for r in p.new_rows["s.child"])  # NULL references keep their share
    links = rows["s.link"] + p.new_rows["s.link"]
    assert len({(r["a"], r["b"]) for r in links}) == 40 and all(r["a"] in ids and r["b"] in ids for r in links)
    assert p.notes == []


def test_plan_is_deterministic_and_seeded() -> None:
    schema, rows = _shop()
    a, b = sc.plan(schema, rows, 50), sc.plan(schema, rows, 50)
    assert a.new_rows == b.new_rows
    assert sc.plan(schema, rows, 50, seed=1).new_rows != a.new_rows


def test_plan_stops_where_keys_run_out() -> None:
    schema, rows = _shop()
    p = sc.plan(schema, rows, 10, {"s.link": 1000})  # 10 parents: at most 100 (a, b) pairs
    assert p.counts["s.link"] <= 100 and any("s.link" in n for n in p.notes)


def test_fresh_text_fits_the_declared_length() -> None:
    fresh = sc._Fresh(Column("c", cat.TEXT, False, length=3), ["A", "B"])
    values = [fresh.next("ABCDEF") for _ in range(50)]
    assert len(set(values)) == 50 and all(len(v) <= 3 for v in values)


# --------------------------------------------------------------------------- Oracle (stand-in)
class FakeOracle:
    """Answers the catalog queries of the scaler with a tiny WAREHOUSE schema; records the rest."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []

    def sql(self, text: str, params: list) -> list:
        self.log.append((text, params))
        if "ALL_TAB_COLS" in text:
            return [("LOCATIONS", "LOCATION_ID", "NUMBER", None, "Y", None, None, None),
                    ("LOCATIONS", "CODE", "VARCHAR2", None, "Y", 10, None, None),
                    ("ITEMS", "ITEM_ID", "NUMBER", None, "Y", None, None, None),
                    ("ITEMS", "LOCATION_ID", "NUMBER", None, "Y", None, None, None),
                    ("ITEMS", "NOTE", "VARCHAR2", None, "N", 20, None, None)]
        if "ALL_CONSTRAINTS" in text:
            return [("ITEMS", "p", "ITEM_ID", None, None),
                    ("ITEMS", "f", "LOCATION_ID", "WAREHOUSE.LOCATIONS", "LOCATION_ID"),
                    ("LOCATIONS", "p", "LOCATION_ID", None, None), ("LOCATIONS", "u", "CODE", None, None)]
        if text.startswith('SELECT "LOCATION_ID", "CODE"'):
            return [(1, "A-01"), (2, "A-02")]
        if text.startswith('SELECT "ITEM_ID"'):
            return [(10, 1, None)]
        return []

    def many(self, text: str, rows: list) -> None:
        self.log.append((text, rows))


def test_oracle_catalog_and_scale_statements() -> None:
    fake = FakeOracle()
    schema = cat.ora_schema(fake.sql, "warehouse")
    items = schema.tables["warehouse.items"]
    assert items.primary_key == ("item_id",) and items.foreign_keys[0].parent == "warehouse.locations"
    assert schema.tables["warehouse.locations"].uniques == (("code",),)
    assert schema.tables["warehouse.locations"].column("code").length == 10
    assert not items.column("item_id").nullable and items.column("note").nullable
    assert fake.log[0][1] == ["WAREHOUSE"]
    assert sc.ora_insert_sql(items) == 'INSERT INTO "WAREHOUSE"."ITEMS" ("ITEM_ID", "LOCATION_ID", "NOTE") VALUES (:1, :2, :3)'

    fake = FakeOracle()
    p = sc.ora_scale(fake.sql, fake.many, "WAREHOUSE", 5, {"warehouse.locations": 3})
    inserts = [(t, r) for t, r in fake.log if t.startswith("INSERT")]
    assert [t.split()[2] for t, _ in inserts] == ['"WAREHOUSE"."LOCATIONS"', '"WAREHOUSE"."ITEMS"']  # parents first
    assert len(inserts[0][1]) == 1 and len(inserts[1][1]) == 4 and p.counts == {"warehouse.locations": 3, "warehouse.items": 5}
    assert all(r[1] in (1, 2, 3) for r in inserts[1][1])  # item locations exist
    assert inserts[0][1][0][0] == 3 and inserts[0][1][0][1] not in ("A-01", "A-02")
    stats = [p for t, p in fake.log if "GATHER_TABLE_STATS" in t]
    assert stats == [["WAREHOUSE", "LOCATIONS"], ["WAREHOUSE", "ITEMS"]] and fake.log[-1][0] == "COMMIT"


def test_oracle_work_counter_from_session_statistics() -> None:
    assert "V_$MYSTAT" in work.ORA_COUNTERS and "'session logical reads'" in work.ORA_COUNTERS
    assert "'index fetch by key'" in work.ORA_COUNTERS and "s.sid = :1" in work.ORA_SESSION_COUNTERS
    w = work.ora_work([("session logical reads", 1200), ("table scans (short tables)", 3),
                       ("index scans kdiixs1", 40), ("db block changes", 77), ("table scans (long tables)", 1),
                       ("index fetch by key", 5), ("index fast full scans (full)", 2), ("consistent gets", 999)])
    # W is the scans started (as on PostgreSQL); logical reads depend on the physical layout
    assert w.counts == {"reads": 1200, "scans": 51, "writes": 77} and w.measure == "scans" and w.value == 51
    assert (w - work.ora_work([("session logical reads", 200), ("index fetch by key", 4)])).value == 47


# --------------------------------------------------------------------------- PostgreSQL
@pytest.fixture(scope="module")
def backend() -> Iterator[Any]:

    with started_backend("b2test", timeout=60) as b:
        yield b


@pytest.fixture(scope="module")
def b2_task(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The clinic B2 task at 200 rows per table, as a subset of its own."""
    from pytest_plsqlbench.manifests import load_manifest
    from pytest_plsqlbench.procarena.loader import load
    from pytest_plsqlbench.settings import Settings

    root = tmp_path_factory.mktemp("b2tasks")
    raw = yaml.safe_load(CLINIC_B2.read_text())
    raw["b2"]["scale_rows"] = 200
    (root / "b2mini" / "postgres").mkdir(parents=True)
    (root / "b2mini" / "postgres" / "b2_002.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    (root / "b2mini.yaml").write_text(
        "name: procarena-b2mini\nloader: procarena\nmetrics: procarena\ndialects: [postgres]\noptions:\n  dir: b2mini\n")
    (task,) = load(load_manifest(root / "b2mini.yaml"), Settings.of(subsets=("procarena-b2mini",)))
    task.metadata["tasks_dir"] = str(root)
    return task


def _spec(task: Any) -> Any:
    from pytest_plsqlbench.procarena.loader import spec_of

    return spec_of(task)


def _digest(conn: Any, table: str) -> tuple:
    return conn.execute(f"SELECT count(*), md5(string_agg(t::text, '|' ORDER BY t::text)) FROM {table} t").fetchone()


def test_scaler_keeps_keys_and_foreign_keys_on_the_database(backend: Any, b2_task: Any) -> None:
    from pytest_plsqlbench.manifests import load_manifest
    from pytest_plsqlbench.procarena.loader import load
    from pytest_plsqlbench.settings import Settings

    tasks = load(load_manifest(REPO / "tasks" / "procarena-sample.yaml"), Settings.of(subsets=("procarena-sample",)))
    warehouse = next(t for t in tasks if t.metadata["database"] == "warehouse").fixtures
    backend.ensure_fixtures(warehouse)
    backend.allow_writes(["warehouse"])
    sc.install_analyzer(backend.admin, backend.role)
    session = backend.session()
    fixture_rows = backend.admin.execute("SELECT count(*) FROM warehouse.stock_items").fetchone()[0]
    assert 10 <= fixture_rows < 1500
    digests = []
    for _ in range(2):
        session.begin_task()
        try:
            conn = session.conn
            fixture_statuses = {r[0] for r in conn.execute("SELECT DISTINCT status FROM warehouse.stock_items")}
            p = sc.pg_scale(conn, "warehouse", 600, {"warehouse.stock_items": 1500, "warehouse.suppliers": 40})
            assert p.counts["warehouse.stock_items"] == 1500 and p.counts["warehouse.suppliers"] == 40
            for table, n in p.counts.items():
                assert int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]) == n
            orphans = conn.execute(
                "SELECT count(*) FROM warehouse.po_lines l LEFT JOIN warehouse.stock_items i USING (item_id) "
                "WHERE i.item_id IS NULL").fetchone()[0]
            assert int(orphans) == 0
            assert conn.execute("SELECT count(DISTINCT sku) = count(*) FROM warehouse.stock_items").fetchone()[0] in (True, "t")
            # the data keeps the fixture's shape: its statuses only, a share of items without supplier
            statuses = {r[0] for r in conn.execute("SELECT DISTINCT status FROM warehouse.stock_items")}
            assert {"ACTIVE", "DISCONTINUED"} <= fixture_statuses and statuses <= fixture_statuses, (statuses, fixture_statuses)
            assert int(conn.execute("SELECT count(*) FROM warehouse.stock_items WHERE supplier_id IS NULL").fetchone()[0]) > 0
            digests.append([_digest(conn, t) for t in sorted(p.counts)])
        finally:
            session.end_task()
    assert digests[0] == digests[1]  # deterministic: the same rows on every scaling
    assert backend.admin.execute("SELECT count(*) FROM warehouse.stock_items").fetchone()[0] == fixture_rows  # rolled back


def test_work_counter_is_deterministic(backend: Any, b2_task: Any) -> None:
    spec = _spec(b2_task)
    backend.ensure_fixtures(b2_task.fixtures)
    backend.allow_writes([spec.schema])
    with timing.PgBench(backend, spec.schema, spec.calls, 200) as bench:
        for _ in range(2):  # the protocol's warm-up rounds
            bench.run(spec.gold), bench.run(spec.b2.degraded)
        gold = [bench.run(spec.gold) for _ in range(3)]
        slow = [bench.run(spec.b2.degraded) for _ in range(2)]
        again = [bench.run(spec.gold) for _ in range(2)]
    counts = {r.work.counts["scans"] for r in gold + again}
    assert len(counts) == 1 and counts.pop() > 0, [r.work.counts for r in gold + again]
    assert {r.work.counts["writes"] for r in gold + again} == {gold[0].work.counts["writes"]}
    assert slow[0].work.value == slow[1].work.value > gold[1].work.value
    assert all(r.seconds > 0 and r.install_error is None and len(r.raised) == len(spec.calls) for r in gold + slow)


def _perf(backend: Any, task: Any, answer: str, repeats: int = 2, **run: Any) -> Any:
    from pytest_plsqlbench.judges import DEFAULT, JudgeRegistry
    from pytest_plsqlbench.procarena.judge import judges
    from pytest_plsqlbench.procarena.perf.judge import PerfJudge
    from pytest_plsqlbench.runner import TaskRun

    registry = JudgeRegistry(list(DEFAULT.values()) + judges() + [PerfJudge(repeats=repeats)])
    taskrun = TaskRun(backend, task, [answer], judges=registry, **run)
    taskrun.start()
    try:
        got = [taskrun.run_test(1, t) for t in task.turns[0].tests]
    finally:
        taskrun.finish()
    assert got[-1].test_id == "perf"
    return got


def test_reference_matches_gold_exactly_in_work(backend: Any, b2_task: Any) -> None:
    got = _perf(backend, b2_task, _spec(b2_task).gold)
    perf = got[-1]
    rec = perf.extra["b2"]
    assert all(o.passed for o in got), [(o.test_id, o.failure_class, o.message[:300]) for o in got if not o.passed]
    assert rec["admitted"] and rec["same_state_as_gold"]
    assert rec["work_ratio"] == 1.0  # deterministic counter: the same procedure, the same count
    assert rec["acceleration"] > 0 and perf.score == rec["acceleration"]  # near 1 by design; no clock bound
    assert rec["work_ratio_vs_baseline"] > 1.0  # gold does less work than the degraded input
    assert set(rec["seconds"]) == {"gold", "baseline", "candidate"} and len(rec["runs_s"]["baseline"]) == 2
    more = rec["more_runs"]  # further rounds of gold and the answer only, while the interval straddled a border
    assert set(more) <= {"gold", "candidate"} and more.get("gold", 0) == more.get("candidate", 0) <= 2 * 2
    assert len(rec["runs_s"]["gold"]) == len(rec["runs_s"]["candidate"]) == 2 + more.get("gold", 0)
    assert (rec["bin"] == "noise") == (more.get("gold", 0) == 4 and bm.interval_bin(*rec["acceleration_interval"]) == "noise")
    assert all(v >= 1.0 for v in rec["noise"].values()) and rec["scaled"]["clinic.patients"] == 200
    assert rec["bin"] in bm.BINS and rec["repeats"] == 2


def test_a_single_planned_round_gets_no_further_rounds(backend: Any, b2_task: Any) -> None:
    """--plsql-b2-repeats=1 is a quick check: its interval stays the point widened by NOISE_FLOOR
    (never "slower" on noise alone); further rounds would narrow it to what 3 runs can tell."""
    rec = _perf(backend, b2_task, _spec(b2_task).gold, repeats=1)[-1].extra["b2"]
    assert rec["more_runs"] == {} and all(len(v) == 1 for v in rec["runs_s"].values()), rec["runs_s"]
    low, high = rec["acceleration_interval"]
    assert low < 1 / 1.1 and high > 1.1 and rec["bin"] == "noise"


def test_degraded_input_does_more_work(backend: Any, b2_task: Any) -> None:
    rec = _perf(backend, b2_task, _spec(b2_task).b2.degraded)[-1].extra["b2"]
    assert rec["admitted"] and rec["work_ratio"] < 1.0 and rec["work_ratio_vs_baseline"] == 1.0


def test_non_equivalent_fast_answer_is_rejected_as_wrong_state(backend: Any, b2_task: Any) -> None:
    spec = _spec(b2_task)
    perf = _perf(backend, b2_task, spec.mutants[0].code)[-1]
    assert not perf.passed and perf.score == 0.0
    assert perf.extra["b2"]["rejection"] == "wrong_state" and "acceleration" not in perf.extra["b2"]
    assert "wrong final state" in perf.message


def test_answer_that_behaves_only_on_the_small_fixture_is_rejected_at_scale(backend: Any, b2_task: Any) -> None:
    gold = _spec(b2_task).gold
    head, body = gold.split("BEGIN", 1)
    cheat = head + "BEGIN\n  IF (SELECT count(*) FROM clinic.patients) > 100 THEN RETURN; END IF;" + body
    got = _perf(backend, b2_task, cheat)
    assert all(o.passed for o in got[:-1])  # equal at fixture size
    rec = got[-1].extra["b2"]
    assert not got[-1].passed and rec["rejection"] == "wrong_state" and "scale" in rec["why"]


#: An install step that counts the answer's own runs at scale (a rolled-back update of a table no
#: contender writes: the statistics counter keeps it across the bench's rollbacks).
_COUNT_MY_RUNS = """
DO $t$ BEGIN
  IF (SELECT count(*) FROM clinic.patients) > 100 THEN
    BEGIN
      UPDATE clinic.doctors SET active = active WHERE doctor_id = (SELECT min(doctor_id) FROM clinic.doctors);
      RAISE EXCEPTION 'undo' USING ERRCODE = 'P0001';
    EXCEPTION WHEN raise_exception THEN NULL;
    END;
  END IF;
END $t$;
"""


def test_answer_that_skips_its_work_after_its_first_measured_run_is_rejected(backend: Any, b2_task: Any) -> None:
    """Two warm-ups and the first measured run do gold's work; every later run returns at once.
    Checking only the first measured run admitted it with an arbitrary acceleration. Since issue
    31 every run is on a fresh copy of the scaled database: the answer cannot count its runs, so
    it does gold's work in every one of them and is measured as gold."""
    gold = _spec(b2_task).gold
    head, body = gold.split("BEGIN", 1)
    cheat = head + ("BEGIN\n  IF pg_catalog.pg_stat_get_xact_tuples_updated('clinic.doctors'::regclass) > 3 "
                    "THEN RETURN; END IF;") + body + _COUNT_MY_RUNS
    got = _perf(backend, b2_task, cheat)
    assert all(o.passed for o in got[:-1])  # equal at fixture size
    rec = got[-1].extra["b2"]
    assert rec["admitted"] and rec["same_state_as_gold"] and rec.get("rejection") is None, rec
    assert rec["work_ratio"] == pytest.approx(1.0, rel=0.01) and rec["work_stable"]["candidate"], rec["work"]


def test_an_answer_that_uses_up_its_time_budget_at_scale_fails_and_is_not_left_out(backend: Any, b2_task: Any) -> None:
    """Slow only at scale, it runs out of the task's budget during the measurement. Gold's next
    run used to fail at once on the spent budget, and the item was "not measured":
    infrastructure, left out of the metrics."""
    gold = _spec(b2_task).gold
    slow = gold + "\nSELECT pg_sleep(CASE WHEN (SELECT count(*) FROM clinic.patients) > 100 THEN 2.5 ELSE 0 END);"
    got = _perf(backend, b2_task, slow, task_timeout=4.0)
    assert all(o.passed for o in got[:-1])  # fast at fixture size
    perf = got[-1]
    assert not perf.passed and perf.failure_class == "wrong_output", perf
    assert perf.extra["b2"]["rejection"] == "runtime", perf.extra["b2"]


def test_a_slow_degraded_input_does_not_spend_a_right_answers_budget(
    backend: Any, b2_task: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gold's and the degraded input's run time is not the answer's: a right answer next to a
    degraded input that takes most of the task's budget is measured, not failed."""
    import dataclasses

    from pytest_plsqlbench.procarena import loader

    spec = _spec(b2_task)
    sleepy = spec.b2.degraded + "\nSELECT pg_sleep(CASE WHEN (SELECT count(*) FROM clinic.patients) > 100 THEN 2.5 ELSE 0 END);"
    slow = dataclasses.replace(spec, b2=dataclasses.replace(spec.b2, degraded=sleepy))
    monkeypatch.setattr(loader, "spec_of", lambda task: slow)
    # 4 runs of the baseline: 10 s, past the budget; the answer's own runs stay well inside it,
    # even on a loaded machine.
    perf = _perf(backend, b2_task, spec.gold, task_timeout=8.0)[-1]
    assert perf.passed and perf.extra["b2"]["admitted"] and perf.extra["b2"].get("acceleration"), perf.extra["b2"]


def test_runs_share_no_session_state_and_the_answer_cannot_analyze(backend: Any, b2_task: Any) -> None:
    """What outlives ``ROLLBACK TO SAVEPOINT`` (prepared statements, session advisory locks) is
    cleared between runs, and the analyzer the scaler uses is not the answer's to call (ANALYZE
    writes planner statistics in place: no rollback undoes it)."""
    import psycopg

    spec = _spec(b2_task)
    backend.ensure_fixtures(b2_task.fixtures)
    backend.allow_writes([spec.schema])
    leave = ("DO $l$ BEGIN PERFORM pg_catalog.pg_advisory_lock(42); "
             "EXECUTE 'PREPARE plsql_memo AS SELECT 1'; END $l$;")
    with timing.PgBench(backend, spec.schema, spec.calls, 200) as bench:
        assert bench.run(leave).install_error is None
        conn = bench.conn
        conn.execute("PREPARE plsql_memo AS SELECT 2")  # the name is free again: nothing prepared was kept
        conn.execute("DEALLOCATE plsql_memo")
        assert conn.execute("SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' "
                            "AND pid = pg_catalog.pg_backend_pid()").fetchone()[0] in (0, "0")
        called = bench.run("DO $a$ BEGIN PERFORM plsqlbench_b2.analyze_schema('clinic'); END $a$;")
        assert called.install_error is not None and "permission denied" in called.install_error
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            with conn.transaction():
                conn.execute("SELECT plsqlbench_b2.analyze_schema('clinic')")


def test_a_scope_cannot_read_what_the_previous_one_wrote(backend: Any, b2_task: Any) -> None:
    """Gold's scope and then the candidate's run on one connection: the per-table counts of the
    backend's pending statistics would tell the candidate how many rows gold wrote where."""
    import psycopg

    spec = _spec(b2_task)
    backend.ensure_fixtures(b2_task.fixtures)
    backend.allow_writes([spec.schema])
    session = backend.session()
    read = "SELECT pg_catalog.pg_stat_get_xact_tuples_updated('clinic.doctors'::regclass)"
    session.begin_task()
    try:
        session.run("UPDATE clinic.doctors SET active = active;", isolated=False, phase="test")
        assert int(session.conn.execute(read).fetchone()[0]) > 0  # the counter this test watches
    finally:
        session.end_task()
    session.begin_task()
    try:
        assert int(session.conn.execute(read).fetchone()[0]) == 0
        # Flushed, the counts reach the cumulative statistics: closed to the candidate.
        for query in ("SELECT pg_catalog.pg_stat_get_tuples_updated('clinic.doctors'::regclass)",
                      "SELECT n_tup_upd FROM pg_catalog.pg_stat_user_tables",
                      "SELECT n_tup_upd FROM pg_catalog.pg_stat_all_tables"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                with session.conn.transaction():
                    session.conn.execute(query)
    finally:
        session.end_task()


def test_answer_that_does_not_install_is_a_compile_failure(backend: Any, b2_task: Any) -> None:
    from pytest_plsqlbench import outcomes

    perf = _perf(backend, b2_task, "CREATE OR REPLACE PROCEDURE assess_overdue(p date) LANGUAGE plpgsql AS $$ BEGIN")[-1]
    assert not perf.passed and perf.failure_class == outcomes.INVALID_ARTIFACT  # the runner blocks the turn
    entry = {"dialect": "postgres", "tests": [{"test_id": "perf", "passed": False, "failure_class": perf.failure_class,
                                               "error_code": perf.error_code, "message": perf.message}]}
    assert bm.records([entry])[0]["rejection"] == "compile"
    assert bm.compute(bm.records([entry]))["by_dialect"]["postgres"]["rejected"]["compile"] == 1


def test_validate_flags_a_degraded_input_that_is_not_slower(backend: Any, b2_task: Any, tmp_path: Path) -> None:
    from pytest_plsqlbench.procarena.perf.validate import check_speed

    spec = _spec(b2_task)
    line, problems = check_speed(backend, b2_task, spec, repeats=1)
    assert "faster than the degraded input at 1200 rows over " in line  # no bound on the measured ratio here
    assert not any("no more work" in p or "does not leave" in p for p in problems)
    same = type(spec.b2)(**{**spec.b2.__dict__, "degraded": spec.gold})
    line, problems = check_speed(backend, b2_task, type(spec)(**{**spec.__dict__, "b2": same}), repeats=1)
    assert any("does no more work than gold" in p for p in problems)
    # gold against itself: the speedup's lower end is far below 3x, a problem with its numbers
    slow = [p for p in problems if "is only" in p]
    assert len(slow) == 1 and "faster than the degraded input at the task's scale" in slow[0] and "needs >= 3x" in slow[0], problems


def test_end_to_end_summary_and_results(b2_task: Any, tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--plsql-tasks", b2_task.metadata["tasks_dir"],
         "--subset", "procarena-b2mini", "--plsql-model=reference", "--plsql-b2-repeats=1", "-n", "2",
         f"--plsql-results={out}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "ProcArena B2 (performance)" in proc.stdout and "postgres: 1/1 admitted" in proc.stdout
    doc = json.loads(out.read_text())
    figures = doc["subsets"]["procarena-b2mini"]
    assert figures["b2_work"] == 1.0 and figures["b2"]["by_dialect"]["postgres"]["admitted"] == 1
    perf = [t for t in doc["tasks"][0]["tests"] if t["test_id"] == "perf"][0]
    assert perf["extra"]["b2"]["work_ratio"] == 1.0 and perf["score"] == perf["extra"]["b2"]["acceleration"]
    bad = subprocess.run([sys.executable, "-m", "pytest", "--plsql-b2-repeats=0", "--co", "-q"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert bad.returncode != 0 and "plsql-b2-repeats" in bad.stderr

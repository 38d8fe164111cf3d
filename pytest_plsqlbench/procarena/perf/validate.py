"""``plsqlbench validate``: at the task's scale, gold must beat the degraded input by >= 3x.

A B2 task is only a task if its degraded input is really slow: on the scaled tables, gold and
the degraded input are timed in rotating order (the judge's protocol, without a candidate) and
the lower end of the speedup's interval (per-round ratios, by the judge's own clock: the
backend's CPU time, :mod:`.cpu`; :func:`.timing.paired_ratio`) must reach :data:`MIN_GAIN` -- a gate
cleared only by a lucky run is not cleared; gold must also do less work. On PostgreSQL and
on a reachable Oracle (the dialect's bench, :func:`.timing.bench_for`); a database where the
bench cannot measure (Oracle without access to the session statistics) is reported as not
checked, with the reason.
"""

from __future__ import annotations

from typing import Any

from . import quiet, timing

MIN_GAIN = 3.0
#: The degraded input must also do measurably more work: a few percent is noise (dead tuples a
#: rolled-back run leaves, a plan chosen on other statistics), not a degradation.
MIN_WORK_GAIN = 1.05
#: Timed runs per procedure when validating (as many as a task's measurement by default).
REPEATS = 7


def check_speed(backend: Any, task: Any, spec: Any, repeats: int = REPEATS) -> tuple[str, list[str]]:
    """(one line describing the measurement, problems) for one B2 task."""
    b2 = spec.b2
    backend.ensure_fixtures(task.fixtures)
    backend.allow_writes([spec.schema])
    try:
        with timing.bench_for(backend, spec, hold=True, fixtures=task.fixtures) as bench:
            with quiet.measuring():
                got = timing.measure(bench.run, {timing.GOLD: spec.gold, timing.BASELINE: b2.degraded}, repeats,
                                     warmup=int(getattr(bench, "WARMUP", 2)))
            counts = bench.plan.counts
            rows = f"{sum(counts.values())} rows over {len(counts)} scaled table(s)"
            measure = bench.MEASURE
            clock = getattr(bench, "CLOCK", "wall")
    except timing.NotMeasured as exc:
        return f"{task.id}: speed not checked ({backend.dialect}: {exc})", []
    gold, slow = got[timing.GOLD], got[timing.BASELINE]
    late = [label for label, m in got.items() if any(r.timed_out for r in m.runs)]
    if late:
        who = " and ".join(late)
        problem = (f"{task.id}: {who} ran past the statement timeout at the task's scale "
                   "(raise --plsql-timeout, or a smaller b2.scale_rows)")
        return f"{task.id}: speed not checked ({who} ran past the statement timeout)", [problem]
    gain, (low, _high) = timing.paired_ratio(slow, gold)
    work_gain = max(slow.work.value, 1) / max(gold.work.value, 1)
    line = (f"{task.id}: gold {gain:.1f}x faster than the degraded input at {rows} (interval from {low:.1f}x; "
            f"{gold.median_s * 1000:.0f} ms vs {slow.median_s * 1000:.0f} ms {clock} time, median of {repeats}; "
            f"work {gold.work.value} vs {slow.work.value} {measure}; noise {gold.noise:.2f} / {slow.noise:.2f})")
    problems = []
    if low < MIN_GAIN:
        problems.append(f"{task.id}: gold is only {low:.2f}x faster than the degraded input at the task's scale "
                        f"(lower end of the interval; median per-round ratio {gain:.2f}x; needs >= {MIN_GAIN:g}x; grow b2.scale_rows "
                        "or make the degradation heavier)")
    if work_gain < MIN_WORK_GAIN:
        problems.append(f"{task.id}: the degraded input does no more work than gold ({slow.work.value} vs {gold.work.value} {measure}; "
                        f"needs >= {MIN_WORK_GAIN:g}x)")
    if slow.runs[0].raised != gold.runs[0].raised or slow.runs[0].state != gold.runs[0].state:
        problems.append(f"{task.id}: the degraded input does not leave gold's state at the task's scale")
    return line, problems

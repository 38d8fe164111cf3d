"""B2's numbers (paper §5.1, §5.3, Figure 4): ratios per task, harmonic means and speedup bins.

Per admitted task: acceleration ``T_gold / T_cand`` (read from the per-round ratios of the
two contenders' runs, see :func:`.timing.paired_ratio`) and work ratio
``W_gold / W_cand`` (the deterministic counter), both oriented so that 1.0 = as good as gold and
larger is better; the same two against the degraded baseline (``T_base / T_cand``,
``W_base / W_cand``). A zero count is counted as one (a run that scans nothing at all).

Per dialect: the harmonic mean of each ratio over the admitted tasks (a regression weighs as
much as the win it would hide: the mean of 4.0 and 0.25 is 0.47, not 2.1); Figure 4(a)'s bins
of the acceleration with the task's ``min_speedup`` m as the threshold of "faster":
``slower`` < 1/m <= ``matched`` < m <= ``1.1-2x`` < 2 <= ``2-10x`` < 10 <= ``>10x``; and
Figure 4(c)'s gate rejections: compile failure, wrong final state, runtime error.

A task's bin is that of its acceleration *interval* (:func:`.timing.paired_ratio`): it is
assigned only when the whole interval lies inside one bin, and is
``within noise`` otherwise -- a bin narrower than the measurement's noise would rank noise.
The ratios themselves stay continuous (the harmonic means use them whatever the bin).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

FAMILY = "procarena-b2"
BINS = ("slower", "matched", "1.1-2x", "2-10x", ">10x", "noise")
BIN_LABELS = {"slower": "slower", "matched": "matched", "1.1-2x": "1.1–2×", "2-10x": "2–10×", ">10x": ">10×",
              "noise": "within noise"}
REJECTIONS = ("compile", "wrong_state", "runtime")
REJECTION_LABELS = {"compile": "compile failure", "wrong_state": "wrong final state", "runtime": "runtime error"}
#: The name of the item that carries a B2 task's measurement (one per task, after its calls).
PERF_ITEM = "perf"


def ratio(reference: float, candidate: float) -> float:
    """``reference / candidate`` (1.0 = as good as the reference; larger = better)."""
    return float(reference) / float(candidate) if candidate else float("inf") if reference else 1.0


def work_ratio(reference: int, candidate: int) -> float:
    return max(int(reference), 1) / max(int(candidate), 1)


def speedup_bin(speedup: float, min_speedup: float = 1.1) -> str:
    m = float(min_speedup)
    if speedup < 1.0 / m:
        return "slower"
    if speedup < m:
        return "matched"
    if speedup < 2.0:
        return "1.1-2x"
    if speedup < 10.0:
        return "2-10x"
    return ">10x"


def interval_bin(low: float, high: float, min_speedup: float = 1.1) -> str:
    """The bin holding the whole interval ``[low, high]``; ``noise`` when it straddles a border."""
    first, last = speedup_bin(low, min_speedup), speedup_bin(high, min_speedup)
    return first if first == last else "noise"


def gate_rejection(failure_types: Iterable[str | None]) -> str | None:
    """Which gate rejected a candidate, from the failure type of its first failing call (§5.5
    types of the Direct judge): Schema/Contract = compile failure (it does not install, or does
    not fit the calls or the schema), Exception = runtime error, Control flow/State effect =
    wrong final state. None: every call passed."""
    for ftype in failure_types:
        if ftype is None:
            continue
        if ftype in ("schema", "contract"):
            return "compile"
        if ftype == "exception":
            return "runtime"
        return "wrong_state"
    return None


def task_figures(seconds: Mapping[str, float], work: Mapping[str, int], min_speedup: float,
                 interval: Sequence[float] | None = None,
                 ratios: Mapping[tuple[str, str], float] | None = None) -> dict[str, Any]:
    """The ratios of one admitted task from the contenders' seconds and work ``W``.

    ``interval``: the acceleration's (low, high), widened to hold the point
    estimate; without one, the point itself (an interval of width 0). ``ratios``: the time
    ratios ``(numerator, denominator) -> value`` as measured (the judge's medians of per-round
    ratios); a ratio not given is that of ``seconds``."""

    def time_ratio(top: str, bottom: str) -> float:
        if ratios is not None and (top, bottom) in ratios:
            return float(ratios[(top, bottom)])
        return ratio(seconds[top], seconds[bottom])

    acc = time_ratio("gold", "candidate")
    low, high = (acc, acc) if interval is None else (min(float(interval[0]), acc), max(float(interval[1]), acc))
    return {
        "acceleration": acc,
        "acceleration_interval": [low, high],
        "work_ratio": work_ratio(work["gold"], work["candidate"]),
        "acceleration_vs_baseline": time_ratio("baseline", "candidate"),
        "work_ratio_vs_baseline": work_ratio(work["baseline"], work["candidate"]),
        # how much gold gains
        "baseline_acceleration": time_ratio("baseline", "gold"),
        "bin": interval_bin(low, high, min_speedup),
        #: the perf item fails: the answer is slower than gold beyond the interval
        "slower": high < 1.0 / float(min_speedup),
    }


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def compute(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Per dialect: admitted/rejected counts, harmonic means, bins, and the run's noise, from the
    B2 records of one subset (``{"dialect", "admitted", "rejection", "acceleration", ...}``)."""
    by: dict[str, dict[str, Any]] = {}
    for rec in records:
        d = str(rec.get("dialect") or "")
        cell = by.setdefault(d, {"tasks": 0, "admitted": 0, "rejected": {r: 0 for r in REJECTIONS},
                                 "not_measured": 0, "_acc": [], "_work": [], "_acc_b": [], "_work_b": [],
                                 "bins": {b: 0 for b in BINS}, "_noise": [], "_unstable": 0})
        cell["tasks"] += 1
        if rec.get("rejection") in REJECTIONS:
            cell["rejected"][rec["rejection"]] += 1
            continue
        if not rec.get("admitted") or rec.get("acceleration") is None:
            cell["not_measured"] += 1
            continue
        cell["admitted"] += 1
        cell["_acc"].append(float(rec["acceleration"]))
        cell["_work"].append(float(rec["work_ratio"]))
        cell["_acc_b"].append(float(rec["acceleration_vs_baseline"]))
        cell["_work_b"].append(float(rec["work_ratio_vs_baseline"]))
        cell["bins"][rec.get("bin") or speedup_bin(float(rec["acceleration"]), float(rec.get("min_speedup") or 1.1))] += 1
        cell["_noise"].extend(float(v) for v in (rec.get("noise") or {}).values())
        if not all((rec.get("work_stable") or {}).values()):
            cell["_unstable"] += 1
    out: dict[str, Any] = {}
    for d, cell in sorted(by.items()):
        acc, work = cell.pop("_acc"), cell.pop("_work")
        acc_b, work_b = cell.pop("_acc_b"), cell.pop("_work_b")
        noise = cell.pop("_noise")
        cell["acceleration_hmean"] = _hmean_inf(acc)
        cell["work_ratio_hmean"] = _hmean_inf(work)
        cell["acceleration_vs_baseline_hmean"] = _hmean_inf(acc_b)
        cell["work_ratio_vs_baseline_hmean"] = _hmean_inf(work_b)
        cell["bin_rates"] = {b: (n / cell["admitted"] if cell["admitted"] else None) for b, n in cell["bins"].items()}
        cell["noise_median"] = _median(_finite(noise))
        cell["noise_max"] = max(_finite(noise), default=None)
        cell["work_unstable_tasks"] = cell.pop("_unstable")
        out[d] = cell
    return {"family": FAMILY, "by_dialect": out, "tasks": sum(c["tasks"] for c in out.values())}


def _finite(values: list[float]) -> list[float]:
    """``values`` without the infinite ones."""
    return [x for x in values if x != float("inf")]


def _hmean_inf(values: list[float]) -> float | None:
    """Harmonic mean where an infinite ratio contributes 1/inf = 0."""
    if not values:
        return None
    total = sum(0.0 if v == float("inf") else 1.0 / v for v in values)
    return float("inf") if total == 0 else len(values) / total


def _num(v: Any, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def summary_lines(name: str, m: Mapping[str, Any]) -> list[str]:
    """Figure 4 as text: per dialect the two harmonic means, the bins and the gate's rejections."""
    if not m.get("tasks"):
        return []
    lines = [f"ProcArena B2 (performance) -- {name}: acceleration T_gold/T_cand and work W_gold/W_cand, "
             "harmonic means (1.00 = as good as gold)"]
    for d, c in (m.get("by_dialect") or {}).items():
        rej = c["rejected"]
        lines.append(
            f"  {d}: {c['admitted']}/{c['tasks']} admitted; acceleration {_num(c['acceleration_hmean'])}, "
            f"work {_num(c['work_ratio_hmean'])}; vs degraded input {_num(c['acceleration_vs_baseline_hmean'])} / "
            f"{_num(c['work_ratio_vs_baseline_hmean'])}")
        lines.append("     speedup bins: " + ", ".join(f"{BIN_LABELS[b]} {c['bins'][b]}" for b in BINS)
                     + "; rejected: " + ", ".join(f"{REJECTION_LABELS[r]} {rej[r]}" for r in REJECTIONS)
                     + (f"; not measured {c['not_measured']}" if c.get("not_measured") else ""))
        lines.append(f"     timing noise (slowest/fastest run): median {_num(c['noise_median'])}, "
                     f"max {_num(c['noise_max'])}"
                     + (f"; work count varied in {c['work_unstable_tasks']} task(s)" if c.get("work_unstable_tasks") else ""))
    return lines


def html(name: str, m: Mapping[str, Any]) -> str:
    """Figure 4 for the HTML report: a stacked bar of the bins per dialect, the means, the gate."""
    from html import escape

    if not m.get("tasks"):
        return ""
    colours = {"slower": "#c0392b", "matched": "#95a5a6", "1.1-2x": "#7fb3d5", "2-10x": "#2e86c1", ">10x": "#1b4f72",
               "noise": "#d5d8dc"}
    rows = ""
    for d, c in (m.get("by_dialect") or {}).items():
        total = max(c["admitted"], 1)
        bars = "".join(
            f"<div title='{BIN_LABELS[b]}: {c['bins'][b]}' style='display:inline-block;height:1.2em;"
            f"width:{100 * c['bins'][b] / total:.1f}%;background:{colours[b]}'></div>" for b in BINS)
        rej = ", ".join(f"{REJECTION_LABELS[r]} {c['rejected'][r]}" for r in REJECTIONS)
        rows += (f"<tr><th>{escape(d)}</th><td style='width:40%'><div style='width:100%;background:#eee'>{bars}</div></td>"
                 f"<td>{_num(c['acceleration_hmean'])}</td><td>{_num(c['work_ratio_hmean'])}</td>"
                 f"<td>{_num(c['acceleration_vs_baseline_hmean'])}</td><td>{_num(c['work_ratio_vs_baseline_hmean'])}</td>"
                 f"<td>{c['admitted']}/{c['tasks']}</td><td>{escape(rej)}</td><td>{_num(c['noise_median'])}</td></tr>")
    legend = " ".join(f"<span style='background:{colours[b]};color:#fff;padding:0 .3em'>{BIN_LABELS[b]}</span>" for b in BINS)
    return (f"<section class='procarena-b2'><h3>ProcArena B2 (performance) — {escape(name)}</h3>"
            f"<p>{legend}</p><table><tr><th>Dialect</th><th>Speedup vs gold (tasks)</th>"
            "<th>Acceleration (H-mean)</th><th>Work (H-mean)</th><th>Accel. vs degraded</th><th>Work vs degraded</th>"
            "<th>Admitted</th><th>Rejected</th><th>Noise (median)</th></tr>"
            f"{rows}</table></section>")


# --------------------------------------------------------------------------- the metric family
def records(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The B2 record of each task entry of a results document (its ``perf`` item, first sample)."""
    out = []
    for entry in entries:
        tests = [t for t in entry.get("tests") or [] if t.get("test_id") == PERF_ITEM]
        if not tests:
            continue
        first = min(tests, key=lambda t: int(t.get("sample") or 0))
        rec = dict((first.get("extra") or {}).get("b2") or {})
        if not rec:
            rec = {"admitted": False, "rejection": _runner_rejection(first)}
        rec.setdefault("dialect", entry.get("dialect") or (entry.get("metadata") or {}).get("dialect"))
        out.append(rec)
    return out


def _runner_rejection(test: Mapping[str, Any]) -> str | None:
    """A perf item the runner failed before the judge ran: the answer did not install (compile
    failure), or was refused; excluded classes (infrastructure, not generated) reject nothing."""
    from ... import outcomes
    from ..failure_types import of_error

    cls = str(test.get("failure_class") or "")
    if test.get("passed") or cls in outcomes.EXCLUDED or cls == outcomes.SKIPPED:
        return None
    return gate_rejection([of_error(test.get("error_code"), cls, str(test.get("message") or ""))])


def columns() -> tuple:
    """The family columns B2 adds (ratios in the table; the bins as percentages, charted apart from the scores)."""
    from ...families import Column

    return (
        Column("b2_acceleration", "B2 acceleration (H-mean)", unit="ratio"),
        Column("b2_work", "B2 work ratio (H-mean)", unit="ratio"),
        *(Column(f"b2_bin_{b}", f"B2 {BIN_LABELS[b]} %", chart="b2_bins") for b in BINS),
    )


def family_figures(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``b2`` (per dialect, see :func:`compute`) and the column values (one dialect per run)."""
    m = compute(records(entries))
    out: dict[str, Any] = {"b2": m}
    rows = list(m["by_dialect"].values())
    row = rows[0] if len(rows) == 1 else {}
    out["b2_acceleration"] = row.get("acceleration_hmean")
    out["b2_work"] = row.get("work_ratio_hmean")
    for b in BINS:
        out[f"b2_bin_{b}"] = (row.get("bin_rates") or {}).get(b)
    return out

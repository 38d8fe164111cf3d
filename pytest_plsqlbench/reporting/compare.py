"""``plsqlbench compare``: two (or more) models on the same tasks, with paired statistics.

Two runs are compared task by task, never by their aggregates alone: the difference of a metric is
the mean over the tasks both runs judged of (B - A), and its interval is a percentile bootstrap
that resamples those *tasks* (so both runs see the same resampled task sets -- a paired
bootstrap, much tighter than comparing two independent intervals). Suite Pass@1 is a yes/no per
task, so its difference also gets an exact McNemar test: under "no difference" the tasks that
flipped are as likely to flip one way as the other, a binomial(b + c, 1/2).

Runs must be comparable, or the numbers mean nothing: the same subsets, data revisions, dialect
and scoring settings; none may be interrupted. Anything else is refused with the reason.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from ..errors import UsageError
from ..results.record import TaskResult, task_results
from .stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CONFIDENCE, _percentile

#: Subset metric -> the per-task figure it averages (results document, ``tasks[]``).
TASK_FIGURES = {
    "mean_test_pass": "test_pass",
    "suite_pass": "suite_pass",
    "turn_suite_pass": "turn_suite_pass",
    "episode_pass": "episode_pass",
}
LABELS = {
    "mean_test_pass": "Mean Test Pass@1",
    "suite_pass": "Suite Pass@1",
    "turn_suite_pass": "Turn Suite Pass@1",
    "episode_pass": "Episode Pass@1",
}
#: Header settings that change what a score means; two runs must agree on each.
SCORING_SETTINGS = (
    "dialect",
    "database",
    "assertions",
    "timeout_s",
    "task_timeout_s",
    "safety",
    "samples",
    "shard",
    "keyword",
    "markexpr",
    "missing",
    "max_output",
    "keep_constant_tasks",
    "limit",
    "seed",
)


class NotComparable(UsageError):
    """The runs differ in something other than the model: a comparison would mislead."""


@dataclass
class MetricDelta:
    metric: str
    a: float | None
    b: float | None
    #: Mean over paired tasks of (b - a), and its paired-bootstrap interval.
    delta: float | None
    ci: tuple[float, float] | None
    paired_tasks: int


@dataclass
class SubsetComparison:
    subset: str
    metrics: list[MetricDelta] = field(default_factory=list)
    #: Suite Pass per task: passed in A only / in B only.
    lost: list[str] = field(default_factory=list)
    gained: list[str] = field(default_factory=list)
    mcnemar_p: float | None = None
    #: Tasks judged by only one of the two runs (excluded or not generated in the other).
    unpaired: list[str] = field(default_factory=list)


@dataclass
class Comparison:
    labels: tuple[str, str]
    subsets: list[SubsetComparison]
    documents: tuple[Mapping[str, Any], Mapping[str, Any]]
    #: Why the runs are not comparable (only with ``force``; otherwise compare() refuses).
    reasons: list[str] = field(default_factory=list)


def label_of(document: Mapping[str, Any], fallback: str) -> str:
    header = document.get("header") or {}
    return str(header.get("model_resolved") or header.get("model") or fallback)


def noncomparable_reasons(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Why runs ``a`` and ``b`` cannot be compared (empty when they can)."""
    ha, hb = a.get("header") or {}, b.get("header") or {}
    reasons = []
    for doc, name in ((a, "the first run"), (b, "the second run")):
        header = doc.get("header") or {}
        if header.get("interrupted"):
            reasons.append(f"{name} was interrupted ({header.get('interrupted')}); re-run it to the end")
    subsets_a, subsets_b = set(a.get("subsets") or {}), set(b.get("subsets") or {})
    if subsets_a != subsets_b:
        only_a, only_b = sorted(subsets_a - subsets_b), sorted(subsets_b - subsets_a)
        what = "; ".join(
            part
            for part in (
                f"only the first has {', '.join(only_a)}" if only_a else "",
                f"only the second has {', '.join(only_b)}" if only_b else "",
            )
            if part
        )
        reasons.append(f"the runs cover different subsets ({what})")
    rev_a, rev_b = ha.get("data_revisions") or {}, hb.get("data_revisions") or {}
    for subset in sorted(subsets_a & subsets_b):
        if rev_a.get(subset) != rev_b.get(subset):
            reasons.append(f"subset {subset}: different data revisions ({rev_a.get(subset)} vs {rev_b.get(subset)})")
    for key in SCORING_SETTINGS:
        if ha.get(key) != hb.get(key):
            reasons.append(f"different {key}: {ha.get(key)!r} vs {hb.get(key)!r}")
    return reasons


def _paired_bootstrap(diffs: Sequence[float]) -> tuple[float, float] | None:
    if not diffs:
        return None
    rng = random.Random(BOOTSTRAP_SEED)
    n = len(diffs)
    means = sorted(math.fsum(rng.choices(diffs, k=n)) / n for _ in range(BOOTSTRAP_RESAMPLES))
    tail = (1.0 - CONFIDENCE) / 2
    return _percentile(means, tail), _percentile(means, 1.0 - tail)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs (binomial, p = 1/2)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = math.fsum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def _tasks(document: Mapping[str, Any], subset: str) -> dict[str, TaskResult]:
    return {t.task_id: t for t in task_results(document) if t.subset == subset}


def _judged(task: TaskResult | None, figure: str) -> float | None:
    if task is None or task.figures.get("excluded"):
        return None
    value = task.figures.get(figure)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def compare(
    a: Mapping[str, Any], b: Mapping[str, Any], labels: tuple[str, str] = ("A", "B"), force: bool = False
) -> Comparison:
    """Compare run ``b`` with run ``a`` (the baseline); raise NotComparable unless ``force``."""
    reasons = noncomparable_reasons(a, b)
    if reasons and not force:
        raise NotComparable(
            f"{labels[0]} and {labels[1]} are not comparable: " + "; ".join(reasons)
        )
    out = []
    for subset in [s for s in (a.get("subsets") or {}) if s in (b.get("subsets") or {})]:
        ta, tb = _tasks(a, subset), _tasks(b, subset)
        sa, sb = a["subsets"][subset], b["subsets"][subset]
        comp = SubsetComparison(subset)
        for metric, figure in TASK_FIGURES.items():
            if sa.get(metric) is None and sb.get(metric) is None:
                continue
            pairs = [
                (va, vb)
                for tid in sorted(set(ta) | set(tb))
                if (va := _judged(ta.get(tid), figure)) is not None and (vb := _judged(tb.get(tid), figure)) is not None
            ]
            diffs = [vb - va for va, vb in pairs]
            delta = math.fsum(diffs) / len(diffs) if diffs else None
            comp.metrics.append(
                MetricDelta(metric, sa.get(metric), sb.get(metric), delta, _paired_bootstrap(diffs), len(pairs))
            )
        for tid in sorted(set(ta) | set(tb), key=_natural):
            va, vb = _judged(ta.get(tid), "suite_pass"), _judged(tb.get(tid), "suite_pass")
            if va is None or vb is None:
                if va is not None or vb is not None:
                    comp.unpaired.append(tid)
                continue
            # With several samples a task "passes" when every judged sample passed.
            pa, pb = va >= 1.0, vb >= 1.0
            if pa and not pb:
                comp.lost.append(tid)
            elif pb and not pa:
                comp.gained.append(tid)
        comp.mcnemar_p = mcnemar_exact(len(comp.lost), len(comp.gained))
        out.append(comp)
    return Comparison(labels, out, (a, b), reasons)


# --------------------------------------------------------------------------- rendering


def _natural(text: str) -> list[Any]:
    return [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", text)]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.2f}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f"[{100 * ci[0]:+.2f}, {100 * ci[1]:+.2f}]"


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def _ids(ids: Sequence[str], limit: int = 12) -> str:
    if not ids:
        return "none"
    shown = ", ".join(ids[:limit])
    return shown + (f" ... (+{len(ids) - limit})" if len(ids) > limit else "")


def _rows(comparison: Comparison) -> list[list[str]]:
    rows = []
    for sub in comparison.subsets:
        for m in sub.metrics:
            mcnemar = _p(sub.mcnemar_p) if m.metric == "suite_pass" else ""
            rows.append(
                [sub.subset, LABELS.get(m.metric, m.metric), _pct(m.a), _pct(m.b), _signed(m.delta), _ci(m.ci),
                 str(m.paired_tasks), mcnemar]
            )
    return rows


def _titles(comparison: Comparison) -> list[str]:
    a, b = comparison.labels
    return ["Subset", "Metric", a, b, "Δ (B−A)", "95% CI of Δ", "Paired", "McNemar p"]


def text_lines(comparison: Comparison) -> list[str]:
    from ..summary import render_table

    a, b = comparison.labels
    lines = [f"A = {a}", f"B = {b}"]
    lines += [f"NOT COMPARABLE (forced): {why}" for why in comparison.reasons]
    lines += render_table(_titles(comparison), _rows(comparison))
    lines.append(
        "metrics in %; Δ is the mean over tasks judged in both runs of (B − A), with a paired bootstrap 95% CI "
        f"over tasks ({BOOTSTRAP_RESAMPLES} resamples, seed {BOOTSTRAP_SEED}); McNemar p: exact two-sided test "
        "on Suite Pass@1"
    )
    for sub in comparison.subsets:
        lines.append(f"{sub.subset}: gained by B ({len(sub.gained)}): {_ids(sub.gained)}")
        lines.append(f"{sub.subset}: lost by B ({len(sub.lost)}): {_ids(sub.lost)}")
        if sub.unpaired:
            lines.append(f"{sub.subset}: judged in one run only, left out ({len(sub.unpaired)}): {_ids(sub.unpaired)}")
    return lines


def markdown(comparison: Comparison) -> str:
    a, b = comparison.labels
    titles = _titles(comparison)
    out = [f"# {b} vs {a}", "", f"A = `{a}`, B = `{b}`", ""]
    out.append("| " + " | ".join(titles) + " |")
    out.append("|" + "|".join(["---"] * 2 + ["---:"] * (len(titles) - 2)) + "|")
    out += ["| " + " | ".join(r) + " |" for r in _rows(comparison)]
    out.append("")
    out.append(
        "Δ is the mean over tasks judged in both runs of (B − A), in points, with a paired bootstrap 95% CI over "
        "tasks; McNemar p is the exact two-sided test on Suite Pass@1."
    )
    for sub in comparison.subsets:
        out += ["", f"## {sub.subset}", "", f"- gained by B ({len(sub.gained)}): {_ids(sub.gained, 50)}",
                f"- lost by B ({len(sub.lost)}): {_ids(sub.lost, 50)}"]
        if sub.unpaired:
            out.append(f"- judged in one run only ({len(sub.unpaired)}): {_ids(sub.unpaired, 50)}")
    return "\n".join(out) + "\n"


def _chart(comparison: Comparison) -> str:
    """One chart, both models: a group per subset and model, its bars the metrics with their CIs."""
    from .chart import bar_chart

    groups = []
    for sub in comparison.subsets:
        for which, label in enumerate(comparison.labels):
            doc = comparison.documents[which]
            s = (doc.get("subsets") or {}).get(sub.subset, {})
            values = {m.metric: (m.a if which == 0 else m.b) for m in sub.metrics}
            cis = {k: v for k, v in (s.get("ci") or {}).items() if k in values}
            groups.append((f"{sub.subset} · {label}", values, cis))
    metrics = {m: LABELS[m] for m in TASK_FIGURES}
    return bar_chart(groups, metrics, chart_id="compare-chart", title="Both models, per subset (95% CI)")


def html(comparison: Comparison) -> str:
    a, b = comparison.labels
    head = "".join(f"<th>{escape(t)}</th>" for t in _titles(comparison))
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in _rows(comparison)
    )
    flips = []
    for sub in comparison.subsets:
        flips.append(f"<h2>{escape(sub.subset)}</h2><ul>")
        flips.append(f"<li>gained by B ({len(sub.gained)}): {escape(_ids(sub.gained, 200))}</li>")
        flips.append(f"<li>lost by B ({len(sub.lost)}): {escape(_ids(sub.lost, 200))}</li>")
        if sub.unpaired:
            flips.append(f"<li>judged in one run only ({len(sub.unpaired)}): {escape(_ids(sub.unpaired, 200))}</li>")
        flips.append("</ul>")
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(b)} vs {escape(a)}</title>"
        "<style>body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:.25em .5em;text-align:right}td:first-child,td:nth-child(2),"
        "th{text-align:left}</style></head><body>"
        f"<h1>{escape(b)} vs {escape(a)}</h1><p>A = <code>{escape(a)}</code>, B = <code>{escape(b)}</code></p>"
        f"<table id=\"compare\"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        "<p>Δ is the mean over tasks judged in both runs of (B − A), in points, with a paired bootstrap 95% CI "
        "over tasks; McNemar p is the exact two-sided test on Suite Pass@1.</p>"
        f"{_chart(comparison)}{''.join(flips)}</body></html>\n"
    )


def render(comparisons: Sequence[Comparison], fmt: str) -> str:
    if fmt == "text":
        blocks = ["\n".join(text_lines(c)) for c in comparisons]
        return "\n\n".join(blocks) + "\n"
    if fmt == "markdown":
        return "\n".join(markdown(c) for c in comparisons)
    if len(comparisons) == 1:
        return html(comparisons[0])
    # Several challengers: one page per pair would lose the point; keep one page, one section each.
    parts = [html(c) for c in comparisons]
    bodies = [p.split("<body>", 1)[1].rsplit("</body>", 1)[0] for p in parts]
    return parts[0].split("<body>", 1)[0] + "<body>" + "<hr>".join(bodies) + "</body></html>\n"

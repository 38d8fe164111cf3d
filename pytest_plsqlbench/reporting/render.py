"""Markdown and HTML reports from a results document: self-contained, readable offline.

Both carry the run header, the per-subset table (Table 2 + strict metrics with 95% CIs), the
failure classes per subset (§4.4), pass@k when there are samples, breakdowns by difficulty,
reasoning type and construct, and a per-task list with the failing tests (in HTML, one drill-down
per task: :mod:`.tasks`). The HTML page has its CSS, an SVG chart and a small script inline and
references nothing outside itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from .. import families
from ..families import Column
from ..outcomes import FAILURE_CLASSES, LABELS
from ..outputs import printable
from ..protocols import Family
from ..results.record import task_results
from ..summary import (
    cell,
    comparability_lines,
    header_line,
    incomplete_lines,
    interrupted_line,
    items_line,
    overall_lines,
    pass_at_k_lines,
    pct,
    usage_line,
)
from .breakdown import all_breakdowns
from .chart import bar_chart
from .tasks import SCRIPT, failing_tests, in_natural_order, task_controls, task_detail, task_rows, task_table

MAX_FAILING_TESTS_SHOWN = 3


def _notes(document: Mapping[str, Any], subsets: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The notes under the subset table, the same in Markdown and HTML."""
    interrupted = (document.get("header") or {}).get("interrupted")
    return (
        comparability_lines(subsets)
        + ([] if interrupted else overall_lines(document.get("overall") or {}, subsets))
        + pass_at_k_lines(subsets)
        + incomplete_lines(subsets)
        + [line for line in [items_line(document)] if line]
    )


def _ci_cell(m: Mapping[str, Any], column: Column) -> str:
    ci = (m.get("ci") or {}).get(column.key)
    return f"[{cell(ci[0], column.unit)}, {cell(ci[1], column.unit)}]" if ci else ""


def _by_family(subsets: Mapping[str, Mapping[str, Any]]) -> list[tuple[Family, dict[str, Mapping[str, Any]]]]:
    """The subsets of each metric family, with the family whose columns their table shows."""
    return [(families.lookup(name), members) for name, members in families.group_by_family(subsets).items()]


def _subset_rows(subsets: Mapping[str, Mapping[str, Any]], columns: Sequence[Column] | None = None) -> list[list[str]]:
    columns = columns if columns is not None else families.CoreFamily.columns
    rows = []
    for name, m in subsets.items():
        cells = [name, str(m.get("tasks", 0)), str(m.get("tests", 0)), str(m.get("samples") or 1)]
        for column in columns:
            value = cell(m.get(column.key), column.unit)
            ci = _ci_cell(m, column)
            cells.append(f"{value} {ci}".strip())
        rows.append(cells)
    return rows


def _failure_rows(subsets: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    return [
        [
            name,
            str(m.get("units", 0)),
            *(str((m.get("failure_units") or {}).get(c, 0)) for c in FAILURE_CLASSES),
        ]
        for name, m in subsets.items()
    ]


def _chart(document: Mapping[str, Any]) -> str:
    """Bar charts per metric family of its percentage columns, one chart per kind of figure
    (:attr:`Column.chart`): scores are never drawn on the same axis as shares of failure types or bins."""
    charts = []
    for n, (family, subsets) in enumerate(_by_family(document.get("subsets") or {})):
        kinds: dict[str, dict[str, str]] = {}
        for c in family.columns:
            if c.unit == "percent":
                kinds.setdefault(c.chart, {})[c.key] = c.label
        for kind, labels in kinds.items():
            groups = [(name, {k: m.get(k) for k in labels}, m.get("ci") or {}) for name, m in subsets.items()]
            if kind != "scores":  # a share chart shows the subsets it applies to (B2 bins: those with B2 tasks)
                groups = [g for g in groups if any(v is not None for v in g[1].values())]
            if not any(v is not None for _, values, _ in groups for v in values.values()):
                continue
            chart_id = "chart-subsets" if kind == "scores" else f"chart-{_slug(kind)}"
            chart_id += "" if n == 0 else f"-{_slug(family.name)}"
            charts.append(bar_chart(groups, labels, chart_id=chart_id, title={**families.CHARTS, **family.charts}.get(kind, kind), kind=kind))
    return "\n".join(charts)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


# --------------------------------------------------------------------------- markdown
def _md_table(titles: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> list[str]:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    spec = align or "l" + "r" * (len(titles) - 1)
    sep = ["---:" if a == "r" else ":---" for a in spec]
    return [
        "| " + " | ".join(cell(t) for t in titles) + " |",
        "| " + " | ".join(sep) + " |",
        *("| " + " | ".join(cell(c) for c in r) + " |" for r in rows),
    ]


def markdown(document: Mapping[str, Any]) -> str:
    """The report as Markdown (tables; the chart as inline SVG, shown where HTML is allowed)."""
    subsets = document.get("subsets") or {}
    header = document.get("header") or {}
    stats = document.get("statistics") or {}
    out = ["# PLSQLBench results", "", f"`{header_line(header)}`", ""]
    stopped = interrupted_line(document)
    if stopped:
        out += [f"> **INTERRUPTED**: {stopped.removeprefix('INTERRUPTED ')}", ""]
    out += [
        "## Scores by subset",
        "",
        (
            f"Metrics in %, with 95% percentile-bootstrap intervals over tasks "
            f"({stats.get('bootstrap_resamples')} resamples, seed {stats.get('bootstrap_seed')}). "
            "Mean Test Pass@1 gives partial credit per task (PLSQLBench App. C)."
        ),
        "",
    ]
    for n, (family, members) in enumerate(_by_family(subsets)):
        out += [""] if n else []
        out += _md_table(["Subset", "Tasks", "Tests", "Samples", *(c.label for c in family.columns)], _subset_rows(members, family.columns))
    notes = _notes(document, subsets)
    if notes:
        out += ["", *(f"- {line}" for line in notes)]
    out += ["", _chart(document), ""]
    out += [
        "## Failed task turns by class (§4.4)",
        "",
        (
            "One analysis unit is one turn of one task (and sample); *Judged* excludes infrastructure and not "
            "generated turns."
        ),
        "",
    ]
    out += _md_table(["Subset", "Judged", *(LABELS[c] for c in FAILURE_CLASSES)], _failure_rows(subsets))
    usage = usage_line(document.get("usage") or {})
    if usage:
        out += ["", f"Generation: {usage}."]
    results = task_results(document)
    tasks = in_natural_order(results)
    for dim, rows in all_breakdowns(results):
        out += ["", f"## {dim.heading}", ""]
        out += _md_table(
            [dim.title, "Tasks", "Mean Test Pass@1", "Suite Pass@1"],
            [[r["label"], str(r["tasks"]), pct(r["mean_test_pass"]), pct(r["suite_pass"])] for r in rows],
        )
    out += ["", "## Tasks", ""]
    out += _md_table(
        ["Subset", "Task", "Turns", "Test pass", "Suite pass", "Failure classes"], task_rows(tasks), "llrrrl"
    )
    failing = [(t, failing_tests(t)) for t in tasks if failing_tests(t)]
    if failing:
        out += ["", "### Failing tests", ""]
        for task, tests in failing:
            out.append(f"- **{task.subset}/{task.task_id}**")
            for x in tests[:MAX_FAILING_TESTS_SHOWN]:
                where = (f"sample {x.sample + 1} " if x.sample else "") + (f"turn {x.turn} " if task.n_turns > 1 else "")
                message = (x.message or "").strip().splitlines()
                out.append(f"  - {where}`{x.test_id}` ({x.failure_class}): {_md_code(message[0] if message else '')}")
            if len(tests) > MAX_FAILING_TESTS_SHOWN:
                out.append(f"  - ... and {len(tests) - MAX_FAILING_TESTS_SHOWN} more")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- HTML
#: The page fits a 1,280 px window whatever the family (no scrolling at page level): a table wider
#: than the page scrolls inside its own box (``display:block`` keeps its table layout inside), a
#: chart scales down, and long unbroken text (answers, identifiers) wraps.
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem;color:#1b1f23;max-width:72rem}
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0}th,td{padding:.25rem .6rem;border-bottom:1px solid #e5e5e5}
th{background:#f6f8fa;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ci{color:#666;font-size:.85em;white-space:nowrap}.muted{color:#666}code{background:#f6f8fa;padding:0 .2rem}
details{margin:.2rem 0}pre{background:#f6f8fa;padding:.4rem;white-space:pre-wrap}
.interrupted{background:#fff3cd;border:1px solid #e0b000;padding:.5rem .8rem}
table.sortable th{cursor:pointer;user-select:none}th[aria-sort=ascending]::after{content:" \25B4"}
th[aria-sort=descending]::after{content:" \25BE"}.task-detail{border-bottom:1px solid #eee;padding:.2rem 0}
.task-detail h4{margin:.6rem 0 .2rem}table.failing-tests td{vertical-align:top;max-width:22rem}
table.failing-tests pre{margin:0;max-height:16rem;overflow:auto}pre.prompt,pre.answer,pre.raw{max-height:24rem;overflow:auto}
.controls select{font:inherit}
table{display:block;max-width:100%;overflow-x:auto}svg.chart{display:block;max-width:100%;height:auto}
p,li,summary,code,pre,h3,h4{overflow-wrap:anywhere}
"""


def _html_table(
    table_id: str,
    titles: Sequence[str],
    rows: Iterable[tuple[str, Sequence[str]]],
    numeric: Sequence[int] | None = None,
) -> str:
    """``rows`` are ``(tr attributes, already-escaped cells)``; ``numeric``: right-aligned columns (default all but the first)."""
    head = "".join(f"<th>{escape(t)}</th>" for t in titles)
    body = []
    for attrs, cells in rows:
        tds = "".join(
            f'<td class="num">{c}</td>'
            if (i in numeric if numeric is not None else i > 0)
            else f"<td>{c}</td>"
            for i, c in enumerate(cells)
        )
        body.append(f"<tr {attrs}>{tds}</tr>")
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _md_code(text: str) -> str:
    """Answer-controlled text as one Markdown code span: nothing in it renders (HTML, links,
    emphasis), and no control character reaches the page."""
    text = printable(text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}" if text else ""


#: Failing tests shown in full per task in the HTML drill-down (the results file has them all).
def html(document: Mapping[str, Any]) -> str:
    """The report as one HTML page with inline CSS and SVG (nothing fetched when viewed)."""
    subsets = document.get("subsets") or {}
    header = document.get("header") or {}
    stats = document.get("statistics") or {}
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8"><title>PLSQLBench results</title>',
        f"<style>{CSS}</style></head><body>",
        "<h1>PLSQLBench results</h1>",
        f'<p id="run-header"><code>{escape(header_line(header))}</code></p>',
        *(
            [f'<p id="interrupted" class="interrupted"><strong>INTERRUPTED</strong> {escape(stopped.removeprefix("INTERRUPTED "))}</p>']
            if (stopped := interrupted_line(document))
            else []
        ),
        "<h2>Scores by subset</h2>",
        (
            f'<p class="muted">Metrics in %, with 95% percentile-bootstrap intervals over tasks '
            f"({escape(str(stats.get('bootstrap_resamples')))} resamples, "
            f"seed {escape(str(stats.get('bootstrap_seed')))}). "
            "Mean Test Pass@1 gives partial credit per task (PLSQLBench App. C).</p>"
        ),
    ]
    for n, (family, members) in enumerate(_by_family(subsets)):
        rows = []
        for name, m in members.items():
            cells = [escape(str(x)) for x in (name, m.get("tasks", 0), m.get("tests", 0), m.get("samples") or 1)]
            for column in family.columns:
                ci = escape(_ci_cell(m, column))
                cells.append(escape(cell(m.get(column.key), column.unit)) + (f' <span class="ci">{ci}</span>' if ci else ""))
            rows.append((f'class="subset-row" data-subset="{escape(name)}"', cells))
        titles = ["Subset", "Tasks", "Tests", "Samples", *(c.label for c in family.columns)]
        parts.append(_html_table("subsets" if n == 0 else f"subsets-{family.name}", titles, rows))
    notes = _notes(document, subsets)
    if notes:
        parts.append("<ul>" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>")
    parts.append(_chart(document))
    for family, members in _by_family(subsets):
        parts.extend(family.html_sections(document, members))
    parts.append("<h2>Failed task turns by class (§4.4)</h2>")
    parts.append(
        '<p class="muted">One analysis unit is one turn of one task (and sample); <em>Judged</em> excludes '
        "infrastructure and not generated turns.</p>"
    )
    parts.append(
        _html_table(
            "failures",
            ["Subset", "Judged", *(LABELS[c] for c in FAILURE_CLASSES)],
            [('class="failure-row"', [escape(c) for c in r]) for r in _failure_rows(subsets)],
        )
    )
    usage = usage_line(document.get("usage") or {})
    if usage:
        parts.append(f"<p>Generation: {escape(usage)}.</p>")
    results = task_results(document)
    tasks = in_natural_order(results)
    for dim, brows in all_breakdowns(results):
        parts.append(f"<h2>{escape(dim.heading)}</h2>")
        parts.append(
            _html_table(
                f"by-{dim.key}",
                [dim.title, "Tasks", "Mean Test Pass@1", "Suite Pass@1"],
                [
                    (
                        'class="breakdown-row"',
                        [escape(r["label"]), str(r["tasks"]), pct(r["mean_test_pass"]), pct(r["suite_pass"])],
                    )
                    for r in brows
                ],
            )
        )
    parts.append("<h2>Tasks</h2>")
    parts.append(task_controls(tasks))
    parts.append(task_table(tasks))
    parts.append("<h2>Task details</h2>")
    parts.append(
        '<p class="muted">Open a task to see its prompt, the answer that ran (and the model\'s raw reply where '
        "it differs), and for each failing test its input, expected and actual output.</p>"
    )
    parts.extend(task_detail(t) for t in tasks)
    parts.append(f"<script>{SCRIPT}</script>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def render(document: Mapping[str, Any], fmt: str) -> str:
    if fmt == "markdown":
        return markdown(document)
    if fmt == "html":
        return html(document)
    raise ValueError(f"unknown report format {fmt!r}")

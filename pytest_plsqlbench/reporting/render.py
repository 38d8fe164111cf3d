"""Markdown and HTML reports from a results document: self-contained, readable offline.

Both carry the run header, the per-subset table (Table 2 + strict metrics with 95% CIs), the
failure classes per subset (§4.4), pass@k when there are samples, breakdowns by difficulty,
reasoning type and construct, and a per-task list with the failing tests. The HTML page has
its CSS and an SVG chart inline and references nothing outside itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from ..metrics import NOT_JUDGED
from ..outcomes import FAILURE_CLASSES, LABELS
from ..summary import (
    METRIC_LABELS,
    comparability_lines,
    header_line,
    incomplete_lines,
    overall_lines,
    pass_at_k_lines,
    pct,
    usage_line,
)
from .breakdown import all_breakdowns
from .chart import bar_chart

MAX_FAILING_TESTS_SHOWN = 3


def _notes(document: Mapping[str, Any], subsets: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The notes under the subset table, the same in Markdown and HTML."""
    return (
        comparability_lines(subsets)
        + overall_lines(document.get("overall") or {}, subsets)
        + pass_at_k_lines(subsets)
        + incomplete_lines(subsets)
    )


def _ci(m: Mapping[str, Any], key: str) -> str:
    ci = (m.get("ci") or {}).get(key)
    return f"[{pct(ci[0])}, {pct(ci[1])}]" if ci else ""


def _subset_rows(subsets: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for name, m in subsets.items():
        cells = [name, str(m.get("tasks", 0)), str(m.get("tests", 0)), str(m.get("samples") or 1)]
        for key in METRIC_LABELS:
            value = pct(m.get(key))
            ci = _ci(m, key)
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


def _failing_tests(task: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        t for t in task.get("tests", []) if not t.get("passed") and t.get("failure_class") not in NOT_JUDGED
    ]


def _task_rows(tasks: Iterable[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for t in tasks:
        classes = sorted({x.get("failure_class") for x in t.get("tests", []) if not x.get("passed")} - {None})
        status = "skipped" if str(t.get("excluded") or "").startswith("skipped") else "excluded"
        rows.append(
            [
                t["subset"],
                t["task_id"],
                str(t.get("n_turns", 1)),
                status if t.get("excluded") else pct(t.get("test_pass")) + (" (partial)" if t.get("incomplete") else ""),
                "" if t.get("excluded") else pct(t.get("suite_pass")),
                ", ".join(classes),
            ]
        )
    return rows


def _chart(document: Mapping[str, Any]) -> str:
    subsets = document.get("subsets") or {}
    groups = [(name, {k: m.get(k) for k in METRIC_LABELS}, m.get("ci") or {}) for name, m in subsets.items()]
    return bar_chart(
        groups, METRIC_LABELS, chart_id="chart-subsets", title="Scores by subset (%), with 95% CIs"
    )


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
    out += _md_table(["Subset", "Tasks", "Tests", "Samples", *METRIC_LABELS.values()], _subset_rows(subsets))
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
    for dim, rows in all_breakdowns(document):
        out += ["", f"## By {dim.title[0].lower() + dim.title[1:]}", ""]
        out += _md_table(
            [dim.title, "Tasks", "Mean Test Pass@1", "Suite Pass@1"],
            [[r["label"], str(r["tasks"]), pct(r["mean_test_pass"]), pct(r["suite_pass"])] for r in rows],
        )
    tasks = document.get("tasks") or []
    out += ["", "## Tasks", ""]
    out += _md_table(
        ["Subset", "Task", "Turns", "Test pass", "Suite pass", "Failure classes"], _task_rows(tasks), "llrrrl"
    )
    failing = [(t, _failing_tests(t)) for t in tasks if _failing_tests(t)]
    if failing:
        out += ["", "### Failing tests", ""]
        for task, tests in failing:
            out.append(f"- **{task['subset']}/{task['task_id']}**")
            for x in tests[:MAX_FAILING_TESTS_SHOWN]:
                where = (f"sample {x.get('sample', 0) + 1} " if (x.get("sample") or 0) else "") + (
                    f"turn {x.get('turn')} " if task.get("n_turns", 1) > 1 else ""
                )
                message = (x.get("message") or "").strip().splitlines()
                out.append(
                    f"  - {where}`{x['test_id']}` ({x.get('failure_class')}): {message[0] if message else ''}"
                )
            if len(tests) > MAX_FAILING_TESTS_SHOWN:
                out.append(f"  - ... and {len(tests) - MAX_FAILING_TESTS_SHOWN} more")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- HTML
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem;color:#1b1f23;max-width:72rem}
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0}th,td{padding:.25rem .6rem;border-bottom:1px solid #e5e5e5}
th{background:#f6f8fa;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ci{color:#666;font-size:.85em;white-space:nowrap}.muted{color:#666}code{background:#f6f8fa;padding:0 .2rem}
details{margin:.2rem 0}pre{background:#f6f8fa;padding:.4rem;white-space:pre-wrap}
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
        "<h2>Scores by subset</h2>",
        (
            f'<p class="muted">Metrics in %, with 95% percentile-bootstrap intervals over tasks '
            f"({escape(str(stats.get('bootstrap_resamples')))} resamples, "
            f"seed {escape(str(stats.get('bootstrap_seed')))}). "
            "Mean Test Pass@1 gives partial credit per task (PLSQLBench App. C).</p>"
        ),
    ]
    rows = []
    for name, m in subsets.items():
        cells = [escape(name), str(m.get("tasks", 0)), str(m.get("tests", 0)), str(m.get("samples") or 1)]
        for key in METRIC_LABELS:
            ci = _ci(m, key)
            cells.append(f"{pct(m.get(key))}" + (f' <span class="ci">{ci}</span>' if ci else ""))
        rows.append((f'class="subset-row" data-subset="{escape(name)}"', cells))
    parts.append(
        _html_table("subsets", ["Subset", "Tasks", "Tests", "Samples", *METRIC_LABELS.values()], rows)
    )
    notes = _notes(document, subsets)
    if notes:
        parts.append("<ul>" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>")
    parts.append(_chart(document))
    from ..procarena.metrics import html as procarena_html  # ProcArena Table 6 (metric family)

    parts.extend(procarena_html(name, m["procarena"]) for name, m in subsets.items() if m.get("procarena"))
    from ..procarena.interactive.metrics import html as interactive_html  # episodes and their timelines

    parts.append(interactive_html(document))
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
    for dim, brows in all_breakdowns(document):
        parts.append(f"<h2>By {escape(dim.title[0].lower() + dim.title[1:])}</h2>")
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
    tasks = document.get("tasks") or []
    parts.append("<h2>Tasks</h2>")
    parts.append(
        _html_table(
            "tasks",
            ["Subset", "Task", "Turns", "Test pass", "Suite pass", "Failure classes"],
            [('class="task-row"', [escape(c) for c in r]) for r in _task_rows(tasks)],
            numeric=(2, 3, 4),
        )
    )
    failing = [(t, _failing_tests(t)) for t in tasks if _failing_tests(t)]
    if failing:
        parts.append("<h2>Failing tests</h2>")
        for task, tests in failing:
            items = []
            for x in tests[:MAX_FAILING_TESTS_SHOWN]:
                items.append(
                    f"<li><code>{escape(str(x['test_id']))}</code> (turn {x.get('turn')}, "
                    f"{escape(str(x.get('failure_class')))})<pre>{escape((x.get('message') or '').strip())}</pre></li>"
                )
            more = (
                f"<li>... and {len(tests) - MAX_FAILING_TESTS_SHOWN} more</li>"
                if len(tests) > MAX_FAILING_TESTS_SHOWN
                else ""
            )
            parts.append(
                f"<details><summary>{escape(task['subset'])}/{escape(task['task_id'])}: "
                f"{len(tests)} failing test(s)</summary><ul>{''.join(items)}{more}</ul></details>"
            )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def render(document: Mapping[str, Any], fmt: str) -> str:
    if fmt == "markdown":
        return markdown(document)
    if fmt == "html":
        return html(document)
    raise ValueError(f"unknown report format {fmt!r}")

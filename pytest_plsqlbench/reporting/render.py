"""Markdown and HTML reports from a results document: self-contained, readable offline.

Both carry the run header, the per-subset table (Table 2 + strict metrics with 95% CIs), the
failure classes per subset (§4.4), pass@k when there are samples, breakdowns by difficulty,
reasoning type and construct, and a per-task list with the failing tests. The HTML page has
its CSS and an SVG chart inline and references nothing outside itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from .. import families
from ..families import Column, MetricFamily
from ..metrics import NOT_JUDGED
from ..outcomes import FAILURE_CLASSES, LABELS
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


def _by_family(subsets: Mapping[str, Mapping[str, Any]]) -> list[tuple[MetricFamily, dict[str, Mapping[str, Any]]]]:
    """The subsets of each metric family, with the family whose columns their table shows."""
    return [(families.lookup(name), members) for name, members in families.group_by_family(subsets).items()]


def _subset_rows(subsets: Mapping[str, Mapping[str, Any]], columns: Sequence[Column] | None = None) -> list[list[str]]:
    columns = columns if columns is not None else families.PlsqlBenchFamily.columns
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


def _failing_tests(task: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        t for t in task.get("tests", []) if not t.get("passed") and t.get("failure_class") not in NOT_JUDGED
    ]


def natural_key(text: str) -> list[Any]:
    """``Mbpp/11`` before ``Mbpp/100``: digit runs compare as numbers."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part.lower()) for part in re.split(r"(\d+)", text) if part]


def in_natural_order(tasks: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(tasks, key=lambda t: (str(t["subset"]), natural_key(str(t["task_id"]))))


def _task_classes(task: Mapping[str, Any]) -> list[str]:
    """The classes of the task's tests that did not pass (``passed`` when all did)."""
    classes = sorted({str(x.get("failure_class")) for x in task.get("tests", []) if not x.get("passed")} - {"None"})
    return classes or ["passed"]


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
    """One bar chart per metric family, of its percentage columns."""
    charts = []
    for n, (family, subsets) in enumerate(_by_family(document.get("subsets") or {})):
        labels = {c.key: c.label for c in family.columns if c.unit == "percent"}
        if not labels:
            continue
        groups = [(name, {k: m.get(k) for k in labels}, m.get("ci") or {}) for name, m in subsets.items()]
        charts.append(
            bar_chart(
                groups, labels, chart_id="chart-subsets" if n == 0 else f"chart-subsets-{family.name}",
                title="Scores by subset (%), with 95% CIs",
            )
        )
    return "\n".join(charts)


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
    for dim, rows in all_breakdowns(document):
        out += ["", f"## {dim.heading}", ""]
        out += _md_table(
            [dim.title, "Tasks", "Mean Test Pass@1", "Suite Pass@1"],
            [[r["label"], str(r["tasks"]), pct(r["mean_test_pass"]), pct(r["suite_pass"])] for r in rows],
        )
    tasks = in_natural_order(document.get("tasks") or [])
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
.interrupted{background:#fff3cd;border:1px solid #e0b000;padding:.5rem .8rem}
table.sortable th{cursor:pointer;user-select:none}th[aria-sort=ascending]::after{content:" \25B4"}
th[aria-sort=descending]::after{content:" \25BE"}.task-detail{border-bottom:1px solid #eee;padding:.2rem 0}
.task-detail h4{margin:.6rem 0 .2rem}table.failing-tests td{vertical-align:top;max-width:22rem}
table.failing-tests pre{margin:0;max-height:16rem;overflow:auto}pre.prompt,pre.answer,pre.raw{max-height:24rem;overflow:auto}
.controls select{font:inherit}
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


#: Failing tests shown in full per task in the HTML drill-down (the results file has them all).
MAX_FAILING_TESTS_DETAILED = 20

#: Sorting, filtering and opening a task: inline, nothing fetched. State lives in the address's
#: fragment, so a filtered view or one task can be linked: ``#class=wrong_output&sort=3&desc``,
#: ``#task-mbpp-plus/Mbpp/11``.
SCRIPT = r"""
(function () {
  var table = document.getElementById("tasks");
  if (!table) return;
  var body = table.tBodies[0], select = document.getElementById("class-filter");
  var count = document.getElementById("shown-count");
  function value(row, col) { return row.cells[col].getAttribute("data-v") || row.cells[col].textContent; }
  function compare(a, b) {
    var x = parseFloat(a), y = parseFloat(b);
    if (!isNaN(x) && !isNaN(y) && String(x) === a.trim() && String(y) === b.trim()) return x - y;
    return a.localeCompare(b, undefined, {numeric: true, sensitivity: "base"});
  }
  function sortBy(col, desc) {
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (r1, r2) { var c = compare(value(r1, col), value(r2, col)); return desc ? -c : c; });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.setAttribute("aria-sort", i === col ? (desc ? "descending" : "ascending") : "none");
    });
    table.setAttribute("data-sorted", col + (desc ? "-desc" : "-asc"));
  }
  function filter(cls) {
    var shown = 0;
    Array.prototype.forEach.call(body.rows, function (r) {
      var keep = !cls || (r.getAttribute("data-classes") || "").split(" ").indexOf(cls) >= 0;
      r.hidden = !keep; if (keep) shown++;
    });
    if (select) select.value = cls;
    if (count) count.textContent = shown + " of " + body.rows.length + " tasks shown";
  }
  function state() {
    var out = {}, hash = decodeURIComponent(location.hash.slice(1));
    if (hash.indexOf("task-") === 0) { out.task = hash; return out; }
    hash.split("&").forEach(function (kv) { var p = kv.split("="); if (p[0]) out[p[0]] = p.length > 1 ? p[1] : true; });
    return out;
  }
  function save(s) {
    var parts = [];
    if (s["class"]) parts.push("class=" + encodeURIComponent(s["class"]));
    if (s.sort !== undefined) parts.push("sort=" + s.sort);
    if (s.desc) parts.push("desc");
    history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname + location.search);
  }
  var current = {};
  function apply() {
    var s = state();
    if (s.task) {
      var detail = document.getElementById(s.task);
      if (detail) { detail.open = true; detail.scrollIntoView(); }
      return;
    }
    current = s;
    filter(s["class"] || "");
    if (s.sort !== undefined) sortBy(parseInt(s.sort, 10), !!s.desc);
  }
  if (select) select.addEventListener("change", function () { current["class"] = select.value; save(current); filter(select.value); });
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
    th.addEventListener("click", function () {
      var desc = current.sort === String(i) ? !current.desc : false;
      current.sort = String(i); current.desc = desc; save(current); sortBy(i, desc);
    });
  });
  window.addEventListener("hashchange", apply);
  apply();
})();
"""


def _task_anchor(task: Mapping[str, Any]) -> str:
    return f"task-{task['subset']}/{task['task_id']}"


def _task_controls(tasks: Sequence[Mapping[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for t in tasks:
        for c in _task_classes(t):
            counts[c] = counts.get(c, 0) + 1
    order = ["passed", *FAILURE_CLASSES, "skipped"]
    options = "".join(
        f'<option value="{escape(c)}">{escape(LABELS.get(c, c))} ({counts[c]})</option>'
        for c in sorted(counts, key=lambda c: (order.index(c) if c in order else len(order), c))
    )
    return (
        '<p class="controls"><label>Show tasks with a test of class <select id="class-filter">'
        f'<option value="">any (all tasks)</option>{options}</select></label> '
        f'<span id="shown-count" class="muted">{len(tasks)} tasks</span> '
        '<span class="muted">· click a column title to sort</span></p>'
    )


def _task_table(tasks: Sequence[Mapping[str, Any]]) -> str:
    titles = ["Subset", "Task", "Turns", "Test pass", "Suite pass", "Failure classes"]
    head = "".join(f'<th scope="col" title="sort">{escape(t)}</th>' for t in titles)
    body = []
    for t, row in zip(tasks, _task_rows(tasks)):
        classes = _task_classes(t)
        excluded = bool(t.get("excluded"))
        sort_values = [
            str(t["subset"]),
            str(t["task_id"]),
            str(t.get("n_turns", 1)),
            "-1" if excluded or t.get("test_pass") is None else repr(round(float(t["test_pass"]), 6)),
            "-1" if excluded or t.get("suite_pass") is None else repr(round(float(t["suite_pass"]), 6)),
            " ".join(classes),
        ]
        cells = [escape(c) for c in row]
        cells[1] = f'<a href="#{escape(_task_anchor(t))}">{cells[1]}</a>'
        num = ' class="num"'
        tds = "".join(
            f'<td{num if i in (2, 3, 4) else ""} data-v="{escape(v)}">{c}</td>'
            for i, (c, v) in enumerate(zip(cells, sort_values))
        )
        body.append(
            f'<tr class="task-row" data-task="{escape(str(t["subset"]))}/{escape(str(t["task_id"]))}" '
            f'data-classes="{escape(" ".join(classes))}">{tds}</tr>'
        )
    return f'<table id="tasks" class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _pre(text: Any, cls: str) -> str:
    if text is None or text == "":
        return '<span class="muted">(none)</span>'
    if isinstance(text, (list, tuple)):
        text = "\n".join(str(x) for x in text)
    return f'<pre class="{cls}">{escape(str(text))}</pre>'


def _task_detail(task: Mapping[str, Any]) -> str:
    """One task opened: prompts, answers, and its failing tests with input, expected and actual."""
    tests = _failing_tests(task)
    multi = int(task.get("n_turns", 1)) > 1
    score = "excluded" if task.get("excluded") else f"test pass {pct(task.get('test_pass'))}"
    parts = [
        f'<details class="task-detail" id="{escape(_task_anchor(task))}">'
        f"<summary><strong>{escape(str(task['subset']))}/{escape(str(task['task_id']))}</strong> · {escape(score)}"
        f" · {len(tests)} failing test(s)</summary>"
    ]
    if task.get("excluded"):
        parts.append(f'<p class="muted">Not in the metrics: {escape(str(task["excluded"]))}</p>')
    prompts = task.get("prompts") or []
    for n, prompt in enumerate(prompts, 1):
        parts.append(f"<h4>Prompt{f' of turn {n}' if multi else ''}</h4>{_pre(prompt, 'prompt')}")
    if not prompts:
        parts.append('<p class="muted">The results file keeps no prompt for this task.</p>')
    for ans in task.get("answers") or []:
        where = (f"sample {int(ans.get('sample') or 0) + 1}, " if ans.get("sample") else "") + (
            f"turn {ans.get('turn')}" if multi else ""
        )
        where = where.strip(", ")
        title = f"Answer ({where})" if where else "Answer"
        status = ans.get("status")
        note = "" if status == "ok" else f' <span class="muted">({escape(str(status))}: {escape(str(ans.get("error") or ""))})</span>'
        parts.append(f"<h4>{escape(title)}{note}</h4>")
        parts.append(_pre(ans.get("code"), "answer") if "code" in ans else '<p class="muted">The results file keeps no answer text (an older file).</p>')
        if ans.get("raw"):
            parts.append(f"<details><summary>The model's raw reply</summary>{_pre(ans['raw'], 'raw')}</details>")
    if tests:
        rows = []
        runs_answer = '<span class="muted">(runs the answer itself)</span>'
        for x in tests[:MAX_FAILING_TESTS_DETAILED]:
            turn = f"turn {x.get('turn')} " if multi else ""
            sample = f"sample {int(x.get('sample') or 0) + 1} " if x.get("sample") else ""
            rows.append(
                '<tr class="failing-test">'
                f"<td><code>{escape(sample + turn + str(x['test_id']))}</code><br>"
                f'<span class="muted">{escape(str(x.get("failure_class")))}</span></td>'
                f"<td>{_pre(x.get('script'), 'input') if x.get('script') else runs_answer}</td>"
                f"<td>{_pre(x.get('expected'), 'expected')}</td>"
                f"<td>{_pre(x.get('actual'), 'actual')}</td>"
                f"<td>{_pre((x.get('message') or '').strip(), 'message')}</td></tr>"
            )
        more = (
            f'<p class="muted">... and {len(tests) - MAX_FAILING_TESTS_DETAILED} more failing tests in the results file.</p>'
            if len(tests) > MAX_FAILING_TESTS_DETAILED
            else ""
        )
        parts.append(
            '<h4>Failing tests</h4><table class="failing-tests"><thead><tr><th>Test</th><th>Input</th>'
            f"<th>Expected</th><th>Actual</th><th>Message</th></tr></thead><tbody>{''.join(rows)}</tbody></table>{more}"
        )
    parts.append("</details>")
    return "".join(parts)


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
            cells = [escape(name), str(m.get("tasks", 0)), str(m.get("tests", 0)), str(m.get("samples") or 1)]
            for column in family.columns:
                ci = _ci_cell(m, column)
                cells.append(f"{cell(m.get(column.key), column.unit)}" + (f' <span class="ci">{ci}</span>' if ci else ""))
            rows.append((f'class="subset-row" data-subset="{escape(name)}"', cells))
        titles = ["Subset", "Tasks", "Tests", "Samples", *(c.label for c in family.columns)]
        parts.append(_html_table("subsets" if n == 0 else f"subsets-{family.name}", titles, rows))
    notes = _notes(document, subsets)
    if notes:
        parts.append("<ul>" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>")
    parts.append(_chart(document))
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
    tasks = in_natural_order(document.get("tasks") or [])
    parts.append("<h2>Tasks</h2>")
    parts.append(_task_controls(tasks))
    parts.append(_task_table(tasks))
    parts.append("<h2>Task details</h2>")
    parts.append(
        '<p class="muted">Open a task to see its prompt, the answer that ran (and the model\'s raw reply where '
        "it differs), and for each failing test its input, expected and actual output.</p>"
    )
    parts.extend(_task_detail(t) for t in tasks)
    parts.append(f"<script>{SCRIPT}</script>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def render(document: Mapping[str, Any], fmt: str) -> str:
    if fmt == "markdown":
        return markdown(document)
    if fmt == "html":
        return html(document)
    raise ValueError(f"unknown report format {fmt!r}")

"""The per-task part of the reports: tasks in natural order, and in HTML a sortable, filterable
table with one drill-down per task (its prompt, the answer that ran, the failing tests' input,
expected and actual output), so a person can audit one task from the report alone.

The script is inline and small; the view (filter, sort, opened task) lives in the address's
fragment so it can be linked. Nothing is fetched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from ..metrics import NOT_JUDGED
from ..outcomes import FAILURE_CLASSES, LABELS
from ..outputs import printable
from ..results.record import TaskResult, TestOutcome
from ..summary import pct


def failing_tests(task: TaskResult) -> list[TestOutcome]:
    return [t for t in task.tests if not t.passed and t.failure_class not in NOT_JUDGED]


def natural_key(text: str) -> list[Any]:
    """``Mbpp/11`` before ``Mbpp/100``: digit runs compare as numbers."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part.lower()) for part in re.split(r"(\d+)", text) if part]


def in_natural_order(tasks: Iterable[TaskResult]) -> list[TaskResult]:
    return sorted(tasks, key=lambda t: (t.subset, natural_key(t.task_id)))


def _task_classes(task: TaskResult) -> list[str]:
    """The classes of the task's tests that did not pass (``passed`` when all did)."""
    return sorted({x.failure_class for x in task.tests if not x.passed}) or ["passed"]


def task_rows(tasks: Iterable[TaskResult]) -> list[list[str]]:
    rows = []
    for t in tasks:
        figures = t.figures
        classes = sorted({x.failure_class for x in t.tests if not x.passed})
        status = "skipped" if str(figures.get("excluded") or "").startswith("skipped") else "excluded"
        rows.append(
            [
                t.subset,
                t.task_id,
                str(t.n_turns),
                status
                if figures.get("excluded")
                else pct(figures.get("test_pass")) + (" (partial)" if figures.get("incomplete") else ""),
                "" if figures.get("excluded") else pct(figures.get("suite_pass")),
                ", ".join(classes),
            ]
        )
    return rows


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


def _task_anchor(task: TaskResult) -> str:
    return f"task-{task.subset}/{task.task_id}"


def task_controls(tasks: Sequence[TaskResult]) -> str:
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


def task_table(tasks: Sequence[TaskResult]) -> str:
    titles = ["Subset", "Task", "Turns", "Test pass", "Suite pass", "Failure classes"]
    head = "".join(f'<th scope="col" title="sort">{escape(t)}</th>' for t in titles)
    body = []
    for t, row in zip(tasks, task_rows(tasks)):
        classes = _task_classes(t)
        figures = t.figures
        excluded = bool(figures.get("excluded"))
        sort_values = [
            t.subset,
            t.task_id,
            str(t.n_turns),
            "-1" if excluded or figures.get("test_pass") is None else repr(round(float(figures["test_pass"]), 6)),
            "-1" if excluded or figures.get("suite_pass") is None else repr(round(float(figures["suite_pass"]), 6)),
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
            f'<tr class="task-row" data-task="{escape(t.subset)}/{escape(t.task_id)}" '
            f'data-classes="{escape(" ".join(classes))}">{tds}</tr>'
        )
    return f'<table id="tasks" class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _pre(text: Any, cls: str) -> str:
    if text is None or text == "":
        return '<span class="muted">(none)</span>'
    if isinstance(text, (list, tuple)):
        text = "\n".join(str(x) for x in text)
    return f'<pre class="{cls}">{escape(printable(str(text)))}</pre>'


def _input(test: TestOutcome, runs_answer: str) -> str:
    """A failing test's input: the call as a user writes it when the judge named one (MBPP
    cases), with the whole script behind it; else the script."""
    call = test.extra.get("call")
    script = _pre(test.script, "input") if test.script else runs_answer
    if not call:
        return script
    return f"{_pre(call, 'input')}<details><summary>test script</summary>{script}</details>"


def task_detail(task: TaskResult) -> str:
    """One task opened: prompts, answers, and its failing tests with input, expected and actual."""
    tests = failing_tests(task)
    multi = task.n_turns > 1
    excluded = task.figures.get("excluded")
    score = "excluded" if excluded else f"test pass {pct(task.figures.get('test_pass'))}"
    parts = [
        f'<details class="task-detail" id="{escape(_task_anchor(task))}">'
        f"<summary><strong>{escape(task.subset)}/{escape(task.task_id)}</strong> · {escape(score)}"
        f" · {len(tests)} failing test(s)</summary>"
    ]
    if excluded:
        parts.append(f'<p class="muted">Not in the metrics: {escape(str(excluded))}</p>')
    prompts = task.prompts
    for n, prompt in enumerate(prompts, 1):
        parts.append(f"<h4>Prompt{f' of turn {n}' if multi else ''}</h4>{_pre(prompt, 'prompt')}")
    if not prompts:
        parts.append('<p class="muted">The results file keeps no prompt for this task.</p>')
    for ans in task.answers:
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
            turn = f"turn {x.turn} " if multi else ""
            sample = f"sample {x.sample + 1} " if x.sample else ""
            rows.append(
                '<tr class="failing-test">'
                f"<td><code>{escape(sample + turn + x.test_id)}</code><br>"
                f'<span class="muted">{escape(x.failure_class)}</span></td>'
                f"<td>{_input(x, runs_answer)}</td>"
                f"<td>{_pre(x.expected, 'expected')}</td>"
                f"<td>{_pre(x.actual, 'actual')}</td>"
                f"<td>{_pre((x.message or '').strip(), 'message')}</td></tr>"
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

"""The ``procarena`` metric family: EX per subscenario and dialect (ProcArena Table 6).

* **EX** (execution accuracy) of a task: every call passed (its state and its raising match
  gold's). Per subscenario x dialect, the Synthesis (A1-A5) and Editing (B1, B3, B4) averages --
  the mean of the subscenario EX values present, as the paper averages its columns -- and
  overall, each with a 95 % percentile-bootstrap interval over tasks. B2 is not in EX (Table 6
  leaves it out; §5.3 scores it by speed and work): its tasks are B2's own metrics
  (:mod:`.perf.metrics`), and they count in none of the figures here.
* **Mean Test Pass**: the fraction of calls that passed, averaged over the same tasks.
* **Failure types** (§5.5): per failed task, the type of its first failing call, as a
  percentage of the tasks run (Figure 8 reads this way).

Tasks whose every call was excluded (infrastructure, not generated) are left out, as the rest of
the project does. Input: the results document's task entries (``metadata.scenario``, ``dialect``,
``tests[*].passed/failure_class/extra.failure_type``), so it works on merged shards as well.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..families import Column, CoreFamily, SubsetInput
from ..reporting.stats import bootstrap_cis
from . import EDITING, EX_SCENARIOS, SYNTHESIS, loader, plforge
from .failure_types import LABELS, TYPES
from .figures import _pct, task_outcome
from .perf import metrics as b2_metrics

FAMILY = "procarena"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _ex(values: list[tuple[str, bool]]) -> dict[str, Any] | None:
    """EX of (task id, passed) pairs, its task count and its bootstrap interval (tasks sorted by
    id, so a merged run and the unsharded one agree)."""
    if not values:
        return None
    flags = [float(v) for _, v in sorted(values, key=lambda p: p[0])]
    lo_hi = bootstrap_cis({"ex": flags}).get("ex")
    return {"ex": _mean(flags), "tasks": len(flags), "ci": list(lo_hi) if lo_hi else None}


def compute(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The family's numbers for the task entries of one subset (fractions in 0..1); B2 tasks are
    left to :mod:`.perf.metrics`."""
    entries = list(entries)
    cells: dict[tuple[str, str], list[tuple[str, bool]]] = defaultdict(list)
    test_pass: list[float] = []
    types: Counter = Counter()
    n = 0
    for entry in entries:
        meta = entry.get("metadata") or {}
        scenario = str(meta.get("scenario") or "")
        out = task_outcome(entry)
        if out is None or scenario not in EX_SCENARIOS:
            continue
        n += 1
        dialect = str(entry.get("dialect") or meta.get("dialect") or "")
        cells[(scenario, dialect)].append((str(entry.get("task_id") or ""), out["ex"]))
        test_pass.append(out["test_pass"])
        if out["failure_type"]:
            types[out["failure_type"]] += 1
    dialects = sorted({d for _, d in cells})
    table: dict[str, dict[str, Any]] = {}
    for d in dialects:
        row: dict[str, Any] = {s: _ex(cells.get((s, d), [])) for s in EX_SCENARIOS}
        for name, group in (("synthesis", SYNTHESIS), ("editing", EDITING)):
            row[name] = _mean([row[s]["ex"] for s in group if s in row and row[s] is not None])
        overall = _ex([v for (s, dd), vs in cells.items() if dd == d for v in vs])
        row["overall"] = overall["ex"] if overall else None
        row["overall_ci"] = overall["ci"] if overall else None
        table[d] = row
    every = _ex([v for vs in cells.values() for v in vs])
    return {
        "family": FAMILY,
        "tasks": n,
        "ex": every["ex"] if every else None,
        "ex_ci": every["ci"] if every else None,
        "mean_test_pass": _mean(test_pass),
        "by_dialect": table,
        "failure_types": {t: types.get(t, 0) for t in TYPES},
        "failure_type_rates": {t: (types.get(t, 0) / n if n else None) for t in TYPES},
        **_interactive(entries),
    }


def _interactive(entries: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Interactive mode's episode figures (issue 15), for a subset of Interactive forms."""
    from .interactive import metrics as im

    chosen = [e for e in entries if im.is_interactive(e)]
    return {"interactive": im.figures(chosen)} if chosen else {}


def _pct_ci(cell: Mapping[str, Any] | None) -> str:
    """``EX [lo, hi] (n)`` of one Table-6 cell, in %."""
    if not cell:
        return "-"
    ci = cell.get("ci")
    interval = f" [{_pct(ci[0])}, {_pct(ci[1])}]" if ci else ""
    return f"{_pct(cell.get('ex'))}{interval} ({cell.get('tasks')})"


def summary_lines(name: str, m: Mapping[str, Any]) -> list[str]:
    """Table 6 as text (a row per subscenario, a column per dialect: EX, its 95 % interval over
    tasks, the task count), then the failure types."""
    if not m.get("tasks"):
        return []
    table = m.get("by_dialect") or {}
    dialects = list(table)
    head = ["Subscenario", *dialects]
    rows = [[s.upper(), *[_pct_ci(table[d].get(s)) for d in dialects]] for s in EX_SCENARIOS]
    rows.append(["Synth", *[_pct(table[d].get("synthesis")) for d in dialects]])
    rows.append(["Edit", *[_pct(table[d].get("editing")) for d in dialects]])
    rows.append(["EX", *[_pct_ci({"ex": table[d].get("overall"), "ci": table[d].get("overall_ci"),
                                  "tasks": sum((table[d].get(s) or {}).get("tasks", 0) for s in EX_SCENARIOS)})
                         for d in dialects]])
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    ci = m.get("ex_ci")
    interval = f" [{_pct(ci[0])}, {_pct(ci[1])}]" if ci else ""
    lines = [f"ProcArena EX (%) -- {name}: {m['tasks']} task(s) (B2 apart), EX {_pct(m.get('ex'))}{interval}, "
             f"Mean Test Pass {_pct(m.get('mean_test_pass'))}", fmt.format(*head)]
    lines += [fmt.format(*r) for r in rows]
    types = m.get("failure_types") or {}
    if any(types.values()):
        rates = m.get("failure_type_rates") or {}
        lines.append("failure types (% of tasks): " + ", ".join(
            f"{LABELS[t]} {_pct(rates.get(t))}" for t in TYPES if types.get(t)))
    lines.append("cells: EX [95 % bootstrap interval over tasks] (tasks); Synth = mean of A1-A5, Edit = mean of "
                 "B1, B3, B4; B2 is scored by speed and work, not EX (below)")
    if m.get("interactive"):
        from .interactive.metrics import summary_lines as interactive_lines

        lines.extend(interactive_lines(name, m["interactive"]))
    return lines


class ProcArenaFamily(CoreFamily):
    """``metrics: procarena``: the core's figures plus EX per subscenario, the Synthesis and
    Editing averages and the failure-type rates; the summary adds Table 6 per dialect."""

    name = FAMILY
    columns = (
        Column("mean_test_pass", "Mean Test Pass"),
        Column("ex", "EX"),
        Column("ex_synthesis", "Synthesis EX"),
        Column("ex_editing", "Editing EX"),
        *(Column(f"ex_{s}", f"{s.upper()} EX") for s in EX_SCENARIOS),
        *(Column(f"type_{t}", f"{LABELS[t]} %", chart="failure_types") for t in TYPES),
        *b2_metrics.columns(),  # B2 (issue 14): harmonic means and Figure 4's bins
    )
    #: Interactive EX over the Direct EX of another run's results: kept as the file states it.
    external_figures = frozenset({"retention"})
    loaders = frozenset({loader.LOADER, plforge.LOADER})
    charts = {
        "failure_types": "Failure types (% of tasks)",
        "b2_bins": "B2 speed-up bins (% of admitted B2 tasks)",
    }

    def subset_figures(self, data: SubsetInput) -> dict[str, Any]:
        figures = super().subset_figures(data)
        entries = [t.to_json() for t in data.tasks]  # the helpers below read task entries
        m = compute(entries)
        figures["procarena"] = m
        figures["ex"] = m["ex"]
        figures["mean_test_pass"] = m["mean_test_pass"] if m["mean_test_pass"] is not None else figures.get("mean_test_pass")
        # One dialect per run: the subscenario columns are that dialect's row of Table 6.
        rows = list((m.get("by_dialect") or {}).values())
        row = rows[0] if len(rows) == 1 else {}
        for s in EX_SCENARIOS:
            cell = row.get(s) if row else None
            figures[f"ex_{s}"] = cell["ex"] if cell else None
        figures["ex_synthesis"] = row.get("synthesis") if row else None
        figures["ex_editing"] = row.get("editing") if row else None
        for t in TYPES:
            figures[f"type_{t}"] = m["failure_type_rates"].get(t)
        figures.update(b2_metrics.family_figures(entries))
        return figures

    def document_figures(self, subsets: dict[str, dict[str, Any]], tasks: Sequence[Mapping[str, Any]]) -> None:
        """Retention (Interactive EX / Direct EX) pairs an Interactive subset with a Direct one."""
        from .interactive.metrics import retention

        retention(subsets, tasks)

    def html_sections(self, document: Mapping[str, Any], subsets: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """Interactive figures per subset and each episode's timeline."""
        from .interactive.metrics import html

        return [html(document, subsets)]

    #: The terminal table stays narrow; the per-subscenario and failure-type columns follow as
    #: Table 6 lines (the HTML report shows every column).
    TERMINAL = ("mean_test_pass", "ex", "ex_synthesis", "ex_editing")

    def summary_lines(self, subsets: Mapping[str, Mapping[str, Any]], verbose: int = 0) -> list[str]:
        from ..summary import table_lines

        lines = table_lines(subsets, verbose >= 0, tuple(c for c in self.columns if c.key in self.TERMINAL))
        for name, figures in subsets.items():
            if figures.get("procarena"):
                lines.extend(summary_lines(name, figures["procarena"]))
            if figures.get("b2"):
                lines.extend(b2_metrics.summary_lines(name, figures["b2"]))
        return lines

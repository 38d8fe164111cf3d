"""The ``procarena`` metric family: EX per subscenario and dialect (ProcArena Table 6).

* **EX** (execution accuracy) of a task: every call passed (its state and its raising match
  gold's). Per subscenario x dialect, the Synthesis (A1-A5) and Editing (B1-B4) averages -- the
  mean of the subscenario EX values present, as the paper averages its columns -- and overall.
* **Mean Test Pass**: the fraction of calls that passed, averaged over tasks.
* **Failure types** (§5.5): per failed task, the type of its first failing call, as a
  percentage of the tasks run (Figure 8 reads this way).

Tasks whose every call was excluded (infrastructure, not generated) are left out, as the rest of
the project does. Input: the results document's task entries (``metadata.scenario``, ``dialect``,
``tests[*].passed/failure_class/extra.failure_type``), so it works on merged shards as well.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Iterable, Mapping

from .. import outcomes
from . import EDITING, SCENARIOS, SYNTHESIS
from .failure_types import LABELS, TYPES

FAMILY = "procarena"


def _first_sample(tests: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    tests = list(tests)
    first = min((int(t.get("sample") or 0) for t in tests), default=0)
    return sorted((t for t in tests if int(t.get("sample") or 0) == first), key=lambda t: _call_no(t.get("test_id")))


def _call_no(test_id: Any) -> int:
    text = str(test_id or "")
    return int(text.rsplit("-", 1)[-1]) if text.rsplit("-", 1)[-1].isdigit() else 0


def task_outcome(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """(ex, test_pass, failure_type) of one task entry; None when it judged nothing."""
    tests = [t for t in _first_sample(entry.get("tests") or []) if t.get("failure_class") not in outcomes.EXCLUDED
             and t.get("failure_class") != outcomes.SKIPPED]
    if not tests:
        return None
    passed = [bool(t.get("passed")) for t in tests]
    ftype = None
    for t in tests:
        if not t.get("passed"):
            ftype = (t.get("extra") or {}).get("failure_type") or "state_effect"
            break
    return {"ex": all(passed), "test_pass": sum(passed) / len(passed), "failure_type": ftype}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def compute(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The family's numbers for the task entries of one subset (fractions in 0..1)."""
    entries = list(entries)
    cells: dict[tuple[str, str], list[bool]] = defaultdict(list)
    test_pass: list[float] = []
    types: Counter = Counter()
    n = 0
    for entry in entries:
        meta = entry.get("metadata") or {}
        scenario = str(meta.get("scenario") or "")
        out = task_outcome(entry)
        if out is None or scenario not in SCENARIOS:
            continue
        n += 1
        dialect = str(entry.get("dialect") or meta.get("dialect") or "")
        cells[(scenario, dialect)].append(out["ex"])
        test_pass.append(out["test_pass"])
        if out["failure_type"]:
            types[out["failure_type"]] += 1
    dialects = sorted({d for _, d in cells})
    table: dict[str, dict[str, Any]] = {}
    for d in dialects:
        row: dict[str, Any] = {}
        for s in SCENARIOS:
            vals = cells.get((s, d))
            row[s] = {"ex": _mean([float(v) for v in vals]), "tasks": len(vals)} if vals else None
        for name, group in (("synthesis", SYNTHESIS), ("editing", EDITING)):
            row[name] = _mean([row[s]["ex"] for s in group if row[s] is not None and s != "b2"])
        all_tasks = [float(v) for (s, dd), vs in cells.items() if dd == d for v in vs]
        row["overall"] = _mean(all_tasks)
        table[d] = row
    every = [float(v) for vs in cells.values() for v in vs]
    return {
        "family": FAMILY,
        "tasks": n,
        "ex": _mean(every),
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


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def summary_lines(name: str, m: Mapping[str, Any]) -> list[str]:
    """Table 6 as text, then the failure types."""
    if not m.get("tasks"):
        return []
    head = ["Dialect", *[s.upper() for s in SCENARIOS], "Synth", "Edit", "EX"]
    rows = []
    for d, row in (m.get("by_dialect") or {}).items():
        rows.append([d, *[_pct((row.get(s) or {}).get("ex")) for s in SCENARIOS], _pct(row.get("synthesis")),
                     _pct(row.get("editing")), _pct(row.get("overall"))])
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    lines = [f"ProcArena EX (%) -- {name}: {m['tasks']} task(s), EX {_pct(m.get('ex'))}, "
             f"Mean Test Pass {_pct(m.get('mean_test_pass'))}", fmt.format(*head)]
    lines += [fmt.format(*r) for r in rows]
    types = m.get("failure_types") or {}
    if any(types.values()):
        rates = m.get("failure_type_rates") or {}
        lines.append("failure types (% of tasks): " + ", ".join(
            f"{LABELS[t]} {_pct(rates.get(t))}" for t in TYPES if types.get(t)))
    lines.append("Synth = mean of A1-A5, Edit = mean of B1, B3, B4 (B2 is scored by speed, issue 14)")
    if m.get("interactive"):
        from .interactive.metrics import summary_lines as interactive_lines

        lines.extend(interactive_lines(name, m["interactive"]))
    return lines


def html(name: str, m: Mapping[str, Any]) -> str:
    """The same table for the HTML report (escaped; values are numbers and fixed labels)."""
    from html import escape

    if not m.get("tasks"):
        return ""
    head = "".join(f"<th>{s.upper()}</th>" for s in SCENARIOS) + "<th>Synthesis</th><th>Editing</th><th>EX</th>"
    body = ""
    for d, row in (m.get("by_dialect") or {}).items():
        cells = "".join(f"<td>{_pct((row.get(s) or {}).get('ex'))}</td>" for s in SCENARIOS)
        body += (f"<tr><th>{escape(d)}</th>{cells}<td>{_pct(row.get('synthesis'))}</td>"
                 f"<td>{_pct(row.get('editing'))}</td><td>{_pct(row.get('overall'))}</td></tr>")
    rates = m.get("failure_type_rates") or {}
    types = "".join(f"<li>{LABELS[t]}: {_pct(rates.get(t))} %</li>" for t in TYPES)
    return (f"<section class='procarena'><h3>ProcArena EX (%) — {escape(name)}</h3>"
            f"<table><tr><th>Dialect</th>{head}</tr>{body}</table>"
            f"<p>Mean Test Pass {_pct(m.get('mean_test_pass'))} %</p><ul>{types}</ul></section>")

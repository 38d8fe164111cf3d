"""Interactive figures (ProcArena §5.4): retention, turns, tokens, each tool's share of actions.

* **Interactive EX** per subscenario and dialect is the procarena family's table, computed on
  the Interactive subset's tasks.
* **Retention** = Interactive EX / Direct EX over *paired* tasks: the same task id and dialect
  scored in a Direct ProcArena subset of the same document (a run with both subsets, or
  ``plsqlbench merge`` of a Direct and an Interactive results file).
* **Turns** = actions per episode (steps); **tokens** = the Solver's prompt + completion tokens
  per episode (the Simulator's are reported apart).
* **Tool shares** (Figure 6): each tool's share of all recorded actions; ``malformed`` is the
  bucket for any action outside the protocol.
* **Actions by step** (Figure 7): per recorded step (1, 2, ...), how many episodes took each
  action there -- counts, not shares, so the outline of the stack is the episodes' attrition.

Input: the results document's task entries, whose answer ``usage.episode`` is the episode record.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from ...outputs import printable
from ..figures import _pct, task_outcome
from .budget import MALFORMED
from .tools import NAMES

BUCKETS = (*NAMES, MALFORMED)


def episode_of(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for answer in entry.get("answers") or []:
        ep = (answer.get("usage") or {}).get("episode")
        if isinstance(ep, Mapping):
            return ep
    return None


def is_interactive(entry: Mapping[str, Any]) -> bool:
    return (entry.get("metadata") or {}).get("mode") == "interactive"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def figures(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Episode figures of one Interactive subset's task entries."""
    episodes = [ep for ep in (episode_of(e) for e in entries) if ep is not None]
    actions: Counter = Counter()
    endings: Counter = Counter()
    for ep in episodes:
        for name, n in (ep.get("actions") or {}).items():
            actions[name if name in BUCKETS else MALFORMED] += int(n)
        endings[str(ep.get("ended"))] += 1
    by_step: dict[int, Counter] = {}
    for ep in episodes:
        for step in ep.get("timeline") or []:
            name = str(step.get("tool"))
            bucket = name if name in BUCKETS and not step.get("malformed") else MALFORMED
            by_step.setdefault(int(step.get("step") or 0), Counter())[bucket] += 1
    total = sum(actions.values())
    recovery = [len(ep.get("revealed") or []) / ep["ledger_size"] for ep in episodes if ep.get("ledger_size")]
    return {
        "episodes": len(episodes),
        "mean_turns": _mean([float(ep.get("steps") or 0) for ep in episodes]),
        "mean_tokens": _mean([float(sum((ep.get("tokens") or {}).get("solver", {}).values())) for ep in episodes]),
        "mean_simulator_tokens": _mean([float(sum((ep.get("tokens") or {}).get("simulator", {}).values()))
                                        for ep in episodes]),
        "mean_budget_spent": _mean([float(ep.get("spent") or 0) for ep in episodes]),
        "ledger_recovery": _mean(recovery),
        "endings": dict(endings),
        "actions": {b: actions.get(b, 0) for b in BUCKETS},
        "tool_shares": {b: (actions.get(b, 0) / total if total else None) for b in BUCKETS},
        "actions_by_step": {str(k): {b: c[b] for b in BUCKETS if c[b]} for k, c in sorted(by_step.items())},
    }


def retention(subsets: dict[str, dict[str, Any]], tasks: Iterable[Mapping[str, Any]]) -> None:
    """Add ``procarena.interactive.retention`` to each Interactive subset that has Direct pairs."""
    direct: dict[tuple[str, str], bool] = {}
    inter: dict[str, dict[tuple[str, str], tuple[bool, str]]] = {}
    direct_names: set[str] = set()
    for entry in tasks:
        meta = entry.get("metadata") or {}
        if meta.get("judge") != "procarena":
            continue
        out = task_outcome(entry)
        if out is None:
            continue
        key = (str(entry["task_id"]), str(entry.get("dialect") or meta.get("dialect")))
        if is_interactive(entry):
            inter.setdefault(entry["subset"], {})[key] = (out["ex"], str(meta.get("scenario") or ""))
        elif meta.get("scenario") != "b2":
            direct[key] = out["ex"]
            direct_names.add(entry["subset"])
    for name, cells in inter.items():
        fam = (subsets.get(name) or {}).get("procarena")
        if not isinstance(fam, dict):
            continue
        pairs = [(ex, direct[k], k[1]) for k, (ex, _) in cells.items() if k in direct]
        block = fam.setdefault("interactive", {})
        if not pairs:
            block["retention"] = None
            continue
        by_dialect = {}
        for d in sorted({p[2] for p in pairs}):
            sub = [p for p in pairs if p[2] == d]
            by_dialect[d] = _ratio([p[0] for p in sub], [p[1] for p in sub])
        block["retention"] = {"direct_subsets": sorted(direct_names), **_ratio([p[0] for p in pairs], [p[1] for p in pairs]),
                              "by_dialect": by_dialect}


def _ratio(inter: list[bool], direct: list[bool]) -> dict[str, Any]:
    i, d = _mean([float(v) for v in inter]), _mean([float(v) for v in direct])
    return {"pairs": len(inter), "interactive_ex": i, "direct_ex": d,
            "retention": (i / d) if (i is not None and d) else None}


def summary_lines(name: str, block: Mapping[str, Any]) -> list[str]:
    if not block.get("episodes"):
        return []
    ends = ", ".join(f"{k} {v}" for k, v in sorted((block.get("endings") or {}).items()))
    tok = block.get("mean_tokens")
    lines = [f"Interactive -- {name}: {block['episodes']} episode(s); mean turns "
             f"{block.get('mean_turns') or 0:.1f}, mean Solver tokens {tok or 0:.0f}, mean Simulator tokens "
             f"{block.get('mean_simulator_tokens') or 0:.0f}, budget spent {block.get('mean_budget_spent') or 0:.1f}, "
             f"ledger recovered {_pct(block.get('ledger_recovery'))} %; ended: {ends}"]
    shares = block.get("tool_shares") or {}
    lines.append("tool shares (% of actions): " + ", ".join(
        f"{b} {_pct(shares.get(b))}" for b in BUCKETS if shares.get(b)))
    ret = block.get("retention")
    if ret:
        lines.append(f"retention {_pct(ret.get('retention'))} % = Interactive EX {_pct(ret.get('interactive_ex'))} / "
                     f"Direct EX {_pct(ret.get('direct_ex'))} over {ret['pairs']} paired task(s)")
    elif "retention" in block:
        lines.append("retention: no Direct results for these tasks in this document (run or merge the Direct subset)")
    return lines


def html(document: Mapping[str, Any], subsets: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """Figures per Interactive subset (of ``subsets``, default all), and each episode's timeline
    (collapsed) for reading."""
    parts = []
    for name, m in ((document.get("subsets") or {}) if subsets is None else subsets).items():
        block = ((m or {}).get("procarena") or {}).get("interactive")
        if not block or not block.get("episodes"):
            continue
        rows = "".join(f"<li>{escape(line)}</li>" for line in summary_lines(name, block))
        parts.append(f"<section class='procarena-interactive'><h3>ProcArena Interactive — {escape(name)}</h3>"
                     f"<ul>{rows}</ul>{actions_by_step_svg(block.get('actions_by_step') or {})}")
        for entry in document.get("tasks") or []:
            ep = episode_of(entry) if entry.get("subset") == name else None
            if ep is not None:
                parts.append(timeline_html(entry, ep))
        parts.append("</section>")
    return "".join(parts)


#: One colour per action bucket (Figure 7's legend), in :data:`BUCKETS` order.
_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
            "#9c755f", "#bab0ac")


def actions_by_step_svg(by_step: Mapping[str, Mapping[str, int]], width: int = 640, height: int = 220) -> str:
    """Figure 7 as an inline SVG: a stacked bar per recorded step, one segment per action, counts
    (so the outline of the stack is the episodes' attrition). Empty string when there are no steps."""
    steps = sorted((int(k), v) for k, v in by_step.items())
    if not steps:
        return ""
    peak = max(sum(v.values()) for _, v in steps) or 1
    left, bottom, top = 36, 28, 8
    plot_w, plot_h = width - left - 8, height - bottom - top
    bar = plot_w / len(steps)
    shapes = []
    for i, (step, counts) in enumerate(steps):
        y: float = top + plot_h
        for b, colour in zip(BUCKETS, _COLOURS):
            n = int(counts.get(b, 0))
            if not n:
                continue
            h = plot_h * n / peak
            y -= h
            shapes.append(f"<rect x='{left + i * bar + 1:.1f}' y='{y:.1f}' width='{max(bar - 2, 1):.1f}' "
                          f"height='{h:.1f}' fill='{colour}'><title>step {step}: {escape(b)} {n}</title></rect>")
        if len(steps) <= 30 or step % 5 == 0:
            shapes.append(f"<text x='{left + (i + 0.5) * bar:.1f}' y='{height - bottom + 14}' font-size='10' "
                          f"text-anchor='middle'>{step}</text>")
    axis = (f"<line x1='{left}' y1='{top + plot_h}' x2='{width - 8}' y2='{top + plot_h}' stroke='#333'/>"
            f"<text x='4' y='{top + 10}' font-size='10'>{peak}</text>"
            f"<text x='{left + plot_w / 2:.0f}' y='{height - 2}' font-size='10' text-anchor='middle'>step</text>")
    used = [b for b in BUCKETS if any(c.get(b) for _, c in steps)]
    legend = " ".join(f"<span style='color:{_COLOURS[BUCKETS.index(b)]}'>&#9632;</span> {escape(b)}" for b in used)
    return (f"<figure class='actions-by-step'><figcaption>Actions by step (counts; ProcArena Figure 7)</figcaption>"
            f"<svg viewBox='0 0 {width} {height}' style='max-width:100%;height:auto' role='img' "
            f"aria-label='actions by step'>{axis}{''.join(shapes)}</svg><div>{legend}</div></figure>")


def timeline_html(entry: Mapping[str, Any], ep: Mapping[str, Any]) -> str:
    out = task_outcome(entry)
    verdict = "-" if out is None else ("EX pass" if out["ex"] else "EX fail")
    head = (f"{escape(str(entry.get('task_id')))}: {escape(verdict)}, ended by {escape(str(ep.get('ended')))}, "
            f"{escape(str(ep.get('steps')))} step(s), {escape(str(ep.get('spent')))} of "
            f"{escape(str(ep.get('budget_limit')))} units, revealed "
            f"{escape(', '.join(map(str, ep.get('revealed') or [])) or 'none')} of {escape(str(ep.get('ledger_size')))}")
    rows = []
    for step in ep.get("timeline") or []:
        args = "; ".join(f"{k}: {v}" for k, v in (step.get("args") or {}).items())
        rows.append(f"<tr><td>{escape(str(step.get('step')))}</td><td>{escape(str(step.get('tool')))}</td>"
                    f"<td><pre>{escape(printable(args))}</pre></td>"
                    f"<td><pre>{escape(printable(str(step.get('result') or '')))}</pre></td>"
                    f"<td>{escape(str(step.get('cost')))}</td><td>{escape(str(step.get('spent')))}</td></tr>")
    return (f"<details><summary>{head}</summary><table><tr><th>Step</th><th>Action</th><th>Arguments</th>"
            f"<th>Result</th><th>Cost</th><th>Spent</th></tr>{''.join(rows)}</table></details>")


def retention_of_files(paths: Iterable[str]) -> list[str]:
    """Retention from separate results files (a Direct run and an Interactive run of the same tasks)."""
    import copy

    from ...results import read_document

    docs = [read_document(__import__("pathlib").Path(p)) for p in paths]
    subsets: dict[str, dict[str, Any]] = {}
    for doc in docs:
        for name, m in (doc.get("subsets") or {}).items():
            subsets.setdefault(name, copy.deepcopy(m))
    retention(subsets, [t for doc in docs for t in doc.get("tasks") or []])
    lines = []
    for name, m in subsets.items():
        block = (m.get("procarena") or {}).get("interactive")
        if block:
            lines.extend(summary_lines(name, block))
    return lines or ["no Interactive ProcArena subset in these files"]


def main(argv: list[str] | None = None) -> int:
    """``python -m pytest_plsqlbench.procarena.interactive.metrics DIRECT.json INTERACTIVE.json``"""
    import argparse

    from ...results import ResultsFormatError

    parser = argparse.ArgumentParser(description="ProcArena retention = Interactive EX / Direct EX over paired "
                                     "tasks, from results files of a Direct and an Interactive run.")
    parser.add_argument("results", nargs="+", metavar="RESULTS.json")
    args = parser.parse_args(argv)
    try:
        print("\n".join(retention_of_files(args.results)))
    except ResultsFormatError as exc:
        print(f"error: {exc}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

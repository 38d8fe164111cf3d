"""The end-of-run table, in the shape of PLSQLBench's Table 2 (plus strict metrics)."""

from __future__ import annotations

from typing import Any, Mapping

from .outcomes import FAILURE_CLASSES, LABELS


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


COLUMNS = (
    ("subset", "Subset"),
    ("tasks", "Tasks"),
    ("tests", "Tests"),
    ("mean_test_pass", "Mean Test Pass@1"),
    ("suite_pass", "Suite Pass@1"),
    ("turn_suite_pass", "Turn Suite Pass@1"),
    ("episode_pass", "Episode Pass@1"),
)


def header_line(header: Mapping[str, Any]) -> str:
    db = header.get("database_version") or header.get("database") or "?"
    parts = [
        f"pytest-plsqlbench {header.get('plugin_version')}",
        f"dialect {header.get('dialect')}",
        f"{db} ({header.get('database')})",
        f"model {header.get('model')}",
        f"temperature {header.get('temperature')}",
    ]
    revisions = header.get("data_revisions") or {}
    if revisions:
        parts.append("data " + ", ".join(f"{k}@{v}" for k, v in sorted(revisions.items())))
    if header.get("shard"):
        parts.append(f"shard {header['shard']}")
    return " | ".join(parts)


def table_lines(subsets: Mapping[str, Mapping[str, Any]]) -> list[str]:
    rows = []
    for name, m in subsets.items():
        rows.append(
            [
                name,
                str(m.get("tasks", 0)),
                str(m.get("tests", 0)),
                pct(m.get("mean_test_pass")),
                pct(m.get("suite_pass")),
                pct(m.get("turn_suite_pass")),
                pct(m.get("episode_pass")),
            ]
        )
    titles = [t for _, t in COLUMNS]
    widths = [max(len(titles[i]), *(len(r[i]) for r in rows)) if rows else len(titles[i]) for i in range(len(titles))]
    fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    return [fmt(titles), fmt(["-" * w for w in widths]), *(fmt(r) for r in rows)]


def failure_line(counts: Mapping[str, int]) -> str:
    return "failures by class: " + ", ".join(f"{LABELS[c]} {counts.get(c, 0)}" for c in FAILURE_CLASSES)


def summary_lines(document: Mapping[str, Any], verbose: int = 0) -> list[str]:
    """Lines for the terminal (``-q`` gives just the table)."""
    lines = []
    if verbose >= 0:
        lines.append(header_line(document["header"]))
    lines.extend(table_lines(document["subsets"]))
    lines.append("metrics in %; Mean Test Pass@1 gives partial credit per task (PLSQLBench App. C)")
    if verbose >= 0:
        lines.append(failure_line(document["failure_classes"]))
        for name, m in document["subsets"].items():
            excluded = m.get("excluded_tasks") or []
            if excluded:
                shown = ", ".join(excluded[:10]) + (f" ... (+{len(excluded) - 10})" if len(excluded) > 10 else "")
                lines.append(f"{name}: {len(excluded)} task(s) excluded from the metrics (infrastructure / not generated): {shown}")
    return lines

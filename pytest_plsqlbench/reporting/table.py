"""Plain-text tables and figure cells: the leaf the summary, the metric families and the JUnit
properties share (so none of them imports another to print a figure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

# The metrics' own view of a test's class (e.g. a not-generated test excluded by choice).
from ..metrics import NOT_JUDGED, judged_class
from ..outcomes import LEFT_OUT_PREFIX, SKIPPED
from ..results.record import task_results

if TYPE_CHECKING:
    from ..families import Column
    from ..protocols import Family


def pct(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}"


def render_table(titles: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Plain aligned columns: first left-aligned, the rest right-aligned."""
    widths = [max([len(titles[i]), *(len(r[i]) for r in rows)]) for i in range(len(titles))]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    return [fmt(titles), fmt(["-" * w for w in widths]), *(fmt(r) for r in rows)]


def columns_table(
    subsets: Mapping[str, Mapping[str, Any]], columns: Sequence[Column], cis: bool = True
) -> list[str]:
    """One row per subset: Table 2's Mean Test Pass@1 plus the strict metrics of Tables 9 and 10
    (or the ``columns`` of another metric family).

    With ``cis`` each subset row is followed by a ``95% CI`` row (bootstrap over tasks), which
    keeps the table as narrow as its titles.
    """
    columns = tuple(columns)
    show_samples = any((m.get("samples") or 1) > 1 for m in subsets.values())
    titles = ["Subset", "Tasks", "Tests", *(["Samples"] if show_samples else []), *(c.label for c in columns)]
    lead = 4 if show_samples else 3
    rows = []
    for name, m in subsets.items():
        rows.append(
            [
                name,
                str(m.get("tasks", 0)),
                str(m.get("tests", 0)),
                *([str(m.get("samples") or 1)] if show_samples else []),
                *(cell(m.get(c.key), c.unit) for c in columns),
            ]
        )
        ci = m.get("ci") or {}
        if cis and ci:
            rows.append(
                [
                    "  95% CI",
                    *([""] * (lead - 1)),
                    *(
                        f"[{cell(ci[c.key][0], c.unit)}, {cell(ci[c.key][1], c.unit)}]" if ci.get(c.key) else ""
                        for c in columns
                    ),
                ]
            )
    return render_table(titles, rows)


def cell(value: Any, unit: str) -> str:
    """One figure as a family's column shows it."""
    if value is None:
        return "-"
    if unit == "ratio":
        return f"{value:.2f}x"
    if unit == "count":
        return str(value)
    return pct(value)


def family_table_lines(
    family: Family, subsets: Mapping[str, Mapping[str, Any]], cis: bool = True
) -> list[str]:
    """A family's table from its declared columns."""
    return columns_table(subsets, family.columns, cis)


def item_counts(document: Mapping[str, Any]) -> dict[str, Any]:
    """pytest's item counts and how they relate to the metrics.

    ``items`` = ``passed`` + ``failed`` (pytest's failed and errors) + ``skipped``; ``judged`` are the
    items the metrics score (``judged_passed`` of them passed); ``left_out`` the others that were
    not skipped: failures the metrics do not judge (``left_out_failed``, by class in
    ``left_out_classes``: infrastructure, answers not generated where they are excluded), and tests
    of a task sample left out with them (``left_out_passed`` passed there).
    """
    out: dict[str, Any] = dict.fromkeys(
        ("items", "passed", "failed", "skipped", "skipped_left_out", "judged", "judged_passed", "left_out",
         "left_out_failed", "left_out_passed"),
        0,
    )
    by_class: dict[str, int] = {}
    for task in task_results(document):
        samples = task.figures.get("samples")
        if isinstance(samples, list):
            dropped = {int(s.get("sample") or 0) for s in samples if isinstance(s, Mapping) and s.get("excluded")}
        else:  # a family that keeps no per-sample figures: the task is in or out as a whole
            dropped = None
        for test in task.tests:
            out["items"] += 1
            cls = judged_class(test.failure_class, test.extra)
            passed = test.passed
            if cls == SKIPPED:
                out["skipped"] += 1
                # A task an answer doing nothing passes (collect.LEFT_OUT_EMPTY), apart from not runnable ones.
                out["skipped_left_out"] += (test.message or "").startswith(LEFT_OUT_PREFIX)
                continue
            out["passed" if passed else "failed"] += 1
            sample_out = bool(task.figures.get("excluded")) if dropped is None else int(test.sample or 0) in dropped
            if cls in NOT_JUDGED or sample_out:
                out["left_out"] += 1
                out["left_out_passed" if passed else "left_out_failed"] += 1
                if not passed:
                    name = test.failure_class
                    by_class[name] = by_class.get(name, 0) + 1
            else:
                out["judged"] += 1
                out["judged_passed"] += passed
    out["left_out_classes"] = by_class
    return out

"""The end-of-run summary: PLSQLBench's Table 2 (plus Tables 9/10 strict metrics) and §4.4 failures.

It is rendered from the results document alone, so ``plsqlbench report RESULTS.json`` prints the
same lines as the run did. ``-q`` keeps the metrics table and one line of failures; ``-v`` adds
per-test failure counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import families
from .outcomes import EXCLUDED, FAILURE_CLASSES, LABELS

# The table renderers live in a leaf module (families and JUnit use them too); re-exported here.
from .reporting.table import cell, columns_table, family_table_lines, item_counts, pct, render_table  # noqa: F401
from .results.record import task_results

METRIC_LABELS = {
    "mean_test_pass": "Mean Test Pass@1",
    "suite_pass": "Suite Pass@1",
    "turn_suite_pass": "Turn Suite Pass@1",
    "episode_pass": "Episode Pass@1",
}
#: Column titles of the failure table (narrow enough for an 100-column terminal).
SHORT_LABELS = {
    "invalid_artifact": "invalid",
    "interface": "interface",
    "wrong_output": "wrong output",
    "timeout": "timeout",
    "unsafe": "unsafe",
    "infrastructure": "infra",
    "not_generated": "not generated",
}
SPLIT_LABELS = {"dev": "Development overall", "test": "Test overall"}


def header_line(header: Mapping[str, Any]) -> str:
    # No version when no task reached a database (everything skipped or excluded).
    db = header.get("database_version") or "database not started"
    parts = [
        f"pytest-plsqlbench {header.get('plugin_version')}",
        f"dialect {header.get('dialect')}",
        f"{db} ({header.get('database')})",
        f"model {header.get('model')}",
        f"temperature {header.get('temperature')}",
    ]
    if (header.get("samples") or 1) > 1:
        parts.append(f"{header['samples']} samples/task")
    revisions = header.get("data_revisions") or {}
    if revisions:
        parts.append("data " + ", ".join(f"{k}@{v}" for k, v in sorted(revisions.items())))
    if header.get("shard"):
        parts.append(f"shard {header['shard']}")
    if header.get("limit") is not None:
        parts.append(f"sample of {header['limit']} task(s) per subset (seed {header.get('seed')})")
    if header.get("merged_from"):
        parts.append(f"merged from {len(header['merged_from'])} parts")
    return " | ".join(parts)


def table_lines(
    subsets: Mapping[str, Mapping[str, Any]],
    cis: bool = True,
    columns: Sequence[families.Column] | None = None,
) -> list[str]:
    """One row per subset: Table 2's Mean Test Pass@1 plus the strict metrics of Tables 9 and 10
    (or the ``columns`` of another metric family); see :func:`~.reporting.table.columns_table`."""
    return columns_table(subsets, columns if columns is not None else families.CoreFamily.columns, cis)


def metric_tables(subsets: Mapping[str, Mapping[str, Any]], verbose: int = 0) -> list[str]:
    """One table per metric family of the run's subsets (PLSQLBench's Table 2 for its own)."""
    lines: list[str] = []
    for name, members in families.group_by_family(subsets).items():
        lines.extend(families.lookup(name).summary_lines(members, verbose))
    return lines


def failure_table_lines(subsets: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """§4.4-style counts: failed analysis units (task turns) per class, one row per subset."""
    judged_classes = [c for c in FAILURE_CLASSES if c not in EXCLUDED]
    titles = ["Subset", "Judged", "Failed", *(SHORT_LABELS[c] for c in FAILURE_CLASSES)]
    rows = []
    for name, m in subsets.items():
        counts = m.get("failure_units") or {}
        rows.append(
            [
                name,
                str(m.get("units", 0)),
                str(sum(counts.get(c, 0) for c in judged_classes)),
                *(str(counts.get(c, 0)) for c in FAILURE_CLASSES),
            ]
        )
    return render_table(titles, rows)


def failure_line(counts: Mapping[str, int], what: str = "failures by class") -> str:
    return f"{what}: " + ", ".join(f"{LABELS[c]} {counts.get(c, 0)}" for c in FAILURE_CLASSES)


def comparability_lines(subsets: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Which of our columns compares with the paper's figure for a subset (from its manifest)."""
    lines = []
    for name, m in subsets.items():
        paper = m.get("paper") or {}
        metric = paper.get("comparable_metric")
        if not metric:
            continue
        where = f"leaderboard '{paper['leaderboard']}'" if paper.get("leaderboard") else "the paper"
        line = f"{name}: compare {METRIC_LABELS.get(metric, metric)} with {where}"
        if metric == "suite_pass" and not m.get("multi_turn_tasks"):
            line += (
                " (the paper's figure is all-or-nothing per task; our per-case items give true partial "
                "credit, so our Mean Test Pass@1 is higher by design)"
            )
        if paper.get("note"):
            line += f" ({paper['note']})"
        lines.append(line)
    return lines


def overall_lines(
    overall: Mapping[str, Mapping[str, float]], subsets: Mapping[str, Mapping[str, Any]] | None = None
) -> list[str]:
    """The split means (``results.split_overall``: the leaderboard entry's figures), with which
    subsets' comparable metric stood in for their Mean Test Pass@1."""
    lines = []
    for split, figures in overall.items():
        if figures:
            shown = ", ".join(f"{METRIC_LABELS[k]} {pct(v)}" for k, v in figures.items())
            stand_ins = [
                f"{name}: {METRIC_LABELS.get(p['comparable_metric'], p['comparable_metric'])}"
                for name, m in (subsets or {}).items()
                for p in [m.get("paper") or {}]
                if p.get("split") == split and p.get("comparable_metric") not in (None, "mean_test_pass")
            ]
            how = f"macro mean over {split} subsets, as on the leaderboard"
            if stand_ins and "mean_test_pass" in figures:
                how += "; Mean Test Pass@1 takes the paper-comparable metric of " + ", ".join(stand_ins)
            lines.append(f"{SPLIT_LABELS.get(split, split)} ({how}): {shown}")
    return lines


def pass_at_k_lines(subsets: Mapping[str, Mapping[str, Any]]) -> list[str]:
    lines = []
    for name, m in subsets.items():
        ks = m.get("pass_at_k") or {}
        if len(ks) > 1:
            shown = ", ".join(f"pass@{k} {pct(v)}" for k, v in ks.items())
            lines.append(f"{name}: {shown} (unbiased estimator, Chen et al. 2021; n={m.get('samples')})")
    return lines


def usage_line(usage: Mapping[str, Any]) -> str | None:
    """The end-of-run usage line -- the only one -- from ``results.usage_totals``; None when no
    answer came from a model (reference answers, an answers file without usage).

    ``generation (openai/gpt-5.4): 40 answers: 28 generated, 12 cached, 0 failed; tokens 12,345 in /
    6,789 out; cached answers: 4,000 in / 900 out, not this run's; cost $0.1234 (+$0.0456 paid earlier
    for cached answers); latency mean 2.10s p95 4.30s``
    """
    models = usage.get("models") or []
    counted = ("generated", "cached", "failed")
    tokens = sum(usage.get(k) or 0 for k in ("prompt_tokens", "completion_tokens"))
    if not models and not tokens and not usage.get("cost_known") and not any(usage.get(k) for k in counted):
        return None
    head = (
        f"generation ({', '.join(models) or 'no model'}): {usage.get('answers', 0)} answers: "
        f"{usage.get('generated', 0)} generated, {usage.get('cached', 0)} cached, {usage.get('failed', 0)} failed"
    )
    if usage.get("not_generated"):
        head += f", {usage['not_generated']} not generated"
    parts = [head, f"tokens {usage.get('prompt_tokens', 0):,} in / {usage.get('completion_tokens', 0):,} out"]
    if usage.get("cached_prompt_tokens") or usage.get("cached_completion_tokens"):
        parts.append(
            f"cached answers: {usage.get('cached_prompt_tokens', 0):,} in / "
            f"{usage.get('cached_completion_tokens', 0):,} out, not this run's"
        )
    if usage.get("cost_known"):
        cost = f"cost ${usage.get('cost_usd', 0.0):.4f}"
        if usage.get("cached_cost_usd"):
            cost += f" (+${usage['cached_cost_usd']:.4f} paid earlier for cached answers)"
        if usage.get("cost_unknown"):
            cost += f", unknown for {usage['cost_unknown']} answer(s)"
        parts.append(cost)
    elif usage.get("cost_unknown"):
        parts.append(f"cost unknown for {usage['cost_unknown']} answer(s)")
    if usage.get("latency_mean_s") is not None:
        parts.append(f"latency mean {usage['latency_mean_s']:.2f}s p95 {usage['latency_p95_s']:.2f}s")
    return "; ".join(parts)


def shown_ids(ids: Sequence[str], limit: int) -> str:
    """The first ``limit`` ids, then how many more: long lists stay one readable line."""
    more = f" ... (+{len(ids) - limit})" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def excluded_lines(subsets: Mapping[str, Mapping[str, Any]], limit: int = 10) -> list[str]:
    lines = []
    for name, m in subsets.items():
        excluded = m.get("excluded_tasks") or []
        if excluded:
            lines.append(
                f"{name}: {len(excluded)} task(s) excluded from the metrics (infrastructure / not generated): "
                + shown_ids(excluded, limit)
            )
        skipped = m.get("skipped_tasks") or []
        if skipped:
            lines.append(
                f"{name}: {len(skipped)} task(s) skipped, not in the metrics: {shown_ids(skipped, limit)}"
            )
    return lines + incomplete_lines(subsets, limit) + integrity_lines(subsets, limit)


def integrity_lines(subsets: Mapping[str, Mapping[str, Any]], limit: int = 10) -> list[str]:
    """Tasks scored without some of their tests, and tasks left out for lack of an answer
    (``--plsql-missing=exclude``: such a run is not comparable with another)."""
    lines = []
    for name, m in subsets.items():
        partly = m.get("partly_excluded_tasks") or []
        if partly:
            lines.append(f"{name}: {len(partly)} task(s) scored without some of their tests (infrastructure): "
                         + shown_ids(partly, limit))
        missing = m.get("missing_excluded_tasks") or []
        if missing:
            lines.append(f"{name}: NOT COMPARABLE: {len(missing)} task(s) without an answer left out of the metrics "
                         f"(--plsql-missing=exclude): {shown_ids(missing, limit)}")
    return lines


def incomplete_lines(subsets: Mapping[str, Mapping[str, Any]], limit: int = 10) -> list[str]:
    """Per subset, the tasks of which only some tests ran (the results file's ``incomplete``)."""
    lines = []
    for name, m in subsets.items():
        incomplete = m.get("incomplete_tasks") or []
        if incomplete:
            lines.append(f"{name}: {incomplete_note(len(incomplete))}: {shown_ids(incomplete, limit)}")
    return lines


def incomplete_note(count: int) -> str:
    return (
        f"{count} task(s) ran only part of their tests (-k, -m, -x/--maxfail, --lf or --deselect); "
        "they stay in the metrics, scored on the tests that ran"
    )


def items_line(document: Mapping[str, Any]) -> str | None:
    """How pytest's passed/failed/skipped counts (and JUnit's) relate to the metrics."""
    c = item_counts(document)
    if not c["items"]:
        return None
    line = (
        f"pytest items: {c['passed']} passed, {c['failed']} failed or errors, {c['skipped']} skipped; "
        f"the metrics judge {c['judged']} ({c['judged_passed']} passed, {c['judged'] - c['judged_passed']} failed)"
    )
    left = []
    if c["left_out_failed"]:
        classes = " and ".join(f"{n} {LABELS.get(k, k)}" for k, n in sorted(c["left_out_classes"].items()))
        left.append(f"{c['left_out_failed']} failed ({classes})")
    if c["left_out_passed"]:
        left.append(f"{c['left_out_passed']} passed in task samples left out with them")
    left_out = c["skipped_left_out"]
    if c["skipped"] - left_out:
        left.append(f"{c['skipped'] - left_out} skipped (not runnable)")
    if left_out:
        left.append(f"{left_out} skipped (left out: an answer that does nothing passes their task)")
    if left:
        line += "; not in the metrics: " + ", ".join(left)
    return line


def interrupted_line(document: Mapping[str, Any]) -> str | None:
    """The mark of a run that stopped before its end (header ``interrupted``)."""
    header = document.get("header") or {}
    reason = header.get("interrupted")
    if not reason:
        return None
    tasks = task_results(document)
    ran = sum(len(t.tests) for t in tasks)
    collected = header.get("items_collected")
    of = f"{ran} of {collected} collected items" if isinstance(collected, int) and collected else f"{ran} items"
    return (
        f"INTERRUPTED ({reason}): results for {len(tasks)} task(s), {of}; the figures cover only what ran, "
        "are not the benchmark's, and make no leaderboard entry"
    )


def summary_lines(document: Mapping[str, Any], verbose: int = 0) -> list[str]:
    """Lines for the terminal (``-q``: the table and one line of failures; ``-v``: per-test counts)."""
    subsets = document.get("subsets") or {}
    header = document.get("header") or {}
    stats = document.get("statistics") or {}
    quiet = verbose < 0
    lines = [] if quiet else [header_line(header)]
    interrupted = interrupted_line(document)
    if interrupted:
        lines.append(interrupted)
    lines.extend(metric_tables(subsets, verbose))
    note = "metrics in %; Mean Test Pass@1 gives partial credit per task (PLSQLBench App. C)"
    if not quiet and any(m.get("ci") for m in subsets.values()):
        note += (
            f"; 95% CI: percentile bootstrap over tasks ({stats.get('bootstrap_resamples', '?')} resamples, "
            f"seed {stats.get('bootstrap_seed', '?')})"
        )
    lines.append(note)
    lines.extend(comparability_lines(subsets))
    if quiet:
        failed = document.get("failure_units") or {}
        nonzero = [f"{SHORT_LABELS[c]} {failed[c]}" for c in FAILURE_CLASSES if failed.get(c)]
        lines.append("failed task turns: " + (", ".join(nonzero) if nonzero else "none"))
        n_excl = sum(len(m.get("excluded_tasks") or []) for m in subsets.values())
        if n_excl:
            lines.append(f"{n_excl} task(s) excluded from the metrics (infrastructure / not generated)")
        n_part = sum(len(m.get("incomplete_tasks") or []) for m in subsets.values())
        if n_part:
            lines.append(incomplete_note(n_part))
        lines.extend(integrity_lines(subsets, 3))
        return lines
    if not interrupted:  # an interrupted run's means are not the leaderboard's
        lines.extend(overall_lines(document.get("overall") or {}, subsets))
    lines.extend(pass_at_k_lines(subsets))
    if (header.get("samples") or 1) > 1 and not header.get("temperature"):
        lines.append(
            f"note: {header['samples']} samples at temperature {header.get('temperature')}: samples are "
            "likely identical, so pass@k says little; use --plsql-temperature"
        )
    lines.append(
        "Failed task turns by class, as in the paper's §4.4 (invalid = invalid artifact, interface = "
        "interface/schema; infra and not generated turns are not judged):"
    )
    lines.extend(failure_table_lines(subsets))
    if verbose > 0:
        lines.append(failure_line(document.get("failure_classes") or {}, "failed unit tests by class"))
    usage = usage_line(document.get("usage") or {})
    if usage:
        lines.append(usage)
    items = items_line(document)
    if items:
        lines.append(items)
    lines.extend(excluded_lines(subsets))
    if interrupted:
        lines.append(interrupted)  # again at the end, where the eye lands
    return lines

"""An entry for the plsqlbench.github.io leaderboard (``data/leaderboard.json``, ``entries[]``).

The site's schema, as its files define it (versions of 2026-06-17 and 2026-08-16):

* an entry is ``{method, organization, category, date, setting, link, scores}``;
* ``scores`` maps a task id to ``{metric id: percent}``, two decimals; the site prints values
  <= 1 as fractions (x100), so a score is always given in percent;
* single-turn sets report ``mean_test_pass`` and ``suite_pass``; multi-turn sets (Spider2-MT)
  ``mean_test_pass``, ``episode_pass`` and ``turn_suite_pass``;
* ``development_overall`` / ``test_overall``: per metric, the macro average over the split's
  datasets *that report the metric*; ``overall_test`` (the 2026-08 site's default column) is the
  mean Mean Test Pass@1 over the three test sets (MBPP+, Spider2-ST test, Spider2-MT test).
  Averages are taken over the published two-decimal values, so they can be recomputed from the
  entry itself.

Which subset feeds which task id comes from the subset manifests' ``paper.leaderboard`` (kept in
the results document). Where a manifest says the paper's figure equals another of our metrics
(``paper.comparable_metric``: MBPP's published blocks are all-or-nothing per task), that metric is
what the site's ``mean_test_pass`` receives.

The site's datasets, their splits and what an entry must say of them are the ranking family's
(:class:`~pytest_plsqlbench.families.Leaderboard`, ``Family.leaderboard``: the family whose
datasets hold a subset's key, else the one that scored it). An entry looks comparable with the
paper's, so runs that are not are refused (:func:`noncomparable_reasons`): another dialect than the
paper's (the family's :attr:`~pytest_plsqlbench.families.MetricFamily.paper_dialect`), datasets
whose paper figures ran the published assertion blocks scored with others, tasks that ran only
part of their tests. With ``allow_noncomparable`` the entry is emitted with a ``note`` saying why.
An interrupted run (header ``interrupted``) is refused always. The family's notes on a dataset
(PLSQLBench's: MBPP+ is this project's rebuild, the authors withhold theirs) are always said.
``note`` is ours, not a field of the site's schema: remove it before submitting, and say the same
in the submission.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from .. import families
from ..errors import UsageError
from ..outcomes import REFERENCE_FAILED_KEY
from ..protocols import Family

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------- the site's figures
#: Leaderboard metrics per kind of subset, as the site reports them.
SINGLE_TURN_METRICS = ("mean_test_pass", "suite_pass")
MULTI_TURN_METRICS = ("mean_test_pass", "episode_pass", "turn_suite_pass")


def subset_kind_metrics(metrics: Mapping[str, Any]) -> tuple[str, ...]:
    """The paper reports Suite Pass for single-turn sets and Episode/Turn Suite for multi-turn ones."""
    return MULTI_TURN_METRICS if metrics.get("multi_turn_tasks") else SINGLE_TURN_METRICS


def site_figures(metrics: Mapping[str, Any]) -> dict[str, float]:
    """What one subset contributes to the leaderboard and to the split overall: percent, two decimals.

    The metrics its kind reports (:func:`subset_kind_metrics`), where the manifest's
    ``paper.comparable_metric`` stands in for Mean Test Pass when it names another metric (MBPP and
    MBPP+: the paper's figure is all-or-nothing per task, i.e. our Suite Pass). The leaderboard
    entry and the summary's overall lines both come from here, so they cannot disagree.
    """
    comparable = (metrics.get("paper") or {}).get("comparable_metric")
    out: dict[str, float] = {}
    for metric in subset_kind_metrics(metrics):
        source = comparable if metric == "mean_test_pass" and comparable not in (None, metric) else metric
        value = metrics.get(source)
        if value is not None:
            out[metric] = round(100.0 * value, 2)
    return out


def macro_means(datasets: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Per metric, the plain mean over the datasets that report it, from their two-decimal percents."""
    datasets = list(datasets)
    out: dict[str, float] = {}
    for metric in HEADLINE_ORDER:
        values = [d[metric] for d in datasets if metric in d]
        if values:
            out[metric] = round(sum(values) / len(values), 2)
    return out


#: The order metrics appear in overall figures (and on the site).
HEADLINE_ORDER = ("mean_test_pass", "suite_pass", "episode_pass", "turn_suite_pass")


def split_overall(subsets: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Development / test macro averages as plsqlbench.github.io defines them (fractions 0..1).

    For each split, each metric is the mean over the subsets of that split *that report the metric*
    (a multi-turn set has no Suite Pass, a single-turn set no Episode Pass) of their
    :func:`site_figures` -- so a subset's ``paper.comparable_metric`` stands in for its Mean Test
    Pass, and the figures equal the leaderboard entry's ``development_overall``/``test_overall``
    (which are these percentages). Subsets without a ``paper.split`` take no part.
    """
    out: dict[str, dict[str, float]] = {}
    for split in ("dev", "test"):
        members = [site_figures(m) for m in subsets.values() if (m.get("paper") or {}).get("split") == split]
        if members:
            out[split] = {k: v / 100.0 for k, v in macro_means(members).items()}
    return out


# --------------------------------------------------------------------------- the entry

OVERALL_KEYS = {"dev": "development_overall", "test": "test_overall"}
#: Values of ``category`` the site's entries use.
KNOWN_CATEGORIES = ("Open-weight", "Proprietary")


def ranking_family(subset: Mapping[str, Any]) -> Family:
    """The family ranking a document's subset: the registered one whose leaderboard datasets hold
    its ``paper.leaderboard`` key (a file that names no family is ranked too), else the one that
    scored it."""
    key = (subset.get("paper") or {}).get("leaderboard")
    for family in families.known():
        board = family.leaderboard
        if key and board is not None and any(key in keys for keys in board.splits.values()):
            return family
    return families.lookup(subset.get("metric_family"))


def _boards(document: Mapping[str, Any]) -> list[families.Leaderboard]:
    """The leaderboard facts of the families ranking the document's subsets with a key."""
    boards: list[families.Leaderboard] = []
    for m in (document.get("subsets") or {}).values():
        board = ranking_family(m).leaderboard if (m.get("paper") or {}).get("leaderboard") else None
        if board is not None and board not in boards:
            boards.append(board)
    return boards


def site_splits(boards: Iterable[families.Leaderboard]) -> dict[str, tuple[str, ...]]:
    """The site's datasets per split, as the ranking families list them (in their order)."""
    out: dict[str, tuple[str, ...]] = {}
    for board in boards:
        for split, keys in board.splits.items():
            out[split] = tuple(dict.fromkeys([*out.get(split, ()), *keys]))
    return out


def dataset_scores(document: Mapping[str, Any]) -> tuple[dict[str, dict[str, float]], list[str]]:
    """``{site task id: {metric: percent}}`` for the subsets with a leaderboard key, plus notes."""
    scores: dict[str, dict[str, float]] = {}
    notes: list[str] = []
    for name, m in (document.get("subsets") or {}).items():
        paper = m.get("paper") or {}
        key = paper.get("leaderboard")
        if not key:
            notes.append(f"{name}: no leaderboard key in its manifest (paper.leaderboard); left out")
            continue
        if key in scores:
            raise UsageError(f"two subsets map to leaderboard key {key!r}; score them in separate runs")
        comparable = paper.get("comparable_metric")
        if comparable not in (None, "mean_test_pass"):
            notes.append(f"{name}: the site's mean_test_pass for {key!r} is our {comparable} (paper.comparable_metric)")
        figures = site_figures(m)
        if figures:
            scores[key] = figures
    return scores, notes


def overall_scores(
    scores: Mapping[str, Mapping[str, float]], splits: Mapping[str, tuple[str, ...]], partial: bool = False
) -> tuple[dict[str, dict[str, float]], list[str]]:
    """``development_overall``, ``test_overall`` and ``overall_test`` from the dataset scores, for
    the site's datasets per split (:func:`site_splits`).

    A split's overall is emitted only when every dataset of the split is present, unless
    ``partial`` -- a mean over fewer datasets would not rank fairly against the others.
    """
    out: dict[str, dict[str, float]] = {}
    notes: list[str] = []
    for split, members in splits.items():
        if split not in OVERALL_KEYS:
            continue
        present = [k for k in members if k in scores]
        if not present:
            continue
        missing = [k for k in members if k not in scores]
        if missing and not partial:
            notes.append(
                f"{OVERALL_KEYS[split]} left out: the run lacks {', '.join(missing)} (--partial-overall to emit anyway)"
            )
            continue
        figures = macro_means(scores[k] for k in present)
        out[OVERALL_KEYS[split]] = figures
        if split == "test" and "mean_test_pass" in figures:
            out["overall_test"] = {"mean_test_pass": figures["mean_test_pass"]}
    return out, notes


def noncomparable_reasons(document: Mapping[str, Any]) -> list[str]:
    """Why the run's figures do not compare with the paper's (empty when they do)."""
    header = document.get("header") or {}
    reasons = []
    dialect = header.get("dialect")
    ranked = [m for m in (document.get("subsets") or {}).values() if (m.get("paper") or {}).get("leaderboard")]
    papers = {ranking_family(m).paper_dialect for m in ranked}
    for paper in sorted(p for p in papers if p is not None):
        if dialect != paper[0]:
            reasons.append(f"dialect {dialect or 'unknown'} (the paper's figures are {paper[1]})")
    assertions = header.get("assertions")
    for name, m in (document.get("subsets") or {}).items():
        key = (m.get("paper") or {}).get("leaderboard")
        board = ranking_family(m).leaderboard if key else None
        if board is not None and key in board.published_assertions and assertions != "published":
            reasons.append(f"{name} ran with --plsql-assertions={assertions or 'unknown'} ({board.assertions_reason})")
        incomplete = m.get("incomplete_tasks") or []
        if key and incomplete:
            reasons.append(f"{name}: {len(incomplete)} task(s) ran only part of their tests")
        missing = m.get("missing_excluded_tasks") or []
        if missing:
            reasons.append(f"{name}: {len(missing)} task(s) without an answer were left out (--plsql-missing=exclude)")
        # The paper scores every task: one left out (wholly or in part) for an infrastructure
        # error -- a provider error still pending regeneration, a lost database -- is a hole a
        # published figure must not have (and a model could aim its failures at it). A test whose
        # reference output could not be captured is the benchmark's own gap (E.2 leaves it out).
        excluded = {t["task_id"] for t in document.get("tasks") or () if t.get("subset") == name
                    and any(x.get("failure_class") == "infrastructure"
                            and not (x.get("extra") or {}).get(REFERENCE_FAILED_KEY) for x in t.get("tests") or ())}
        if excluded:
            reasons.append(f"{name}: {len(excluded)} task(s) left out, wholly or in part, for infrastructure errors "
                           "(re-run them: a provider error is asked again, up to three runs)")
    return reasons


def entry(
    document: Mapping[str, Any],
    method: str,
    organization: str = "",
    category: str = "",
    date: str | None = None,
    link: str = "",
    setting: str = "Direct generation",
    partial_overall: bool = False,
    allow_noncomparable: bool = False,
) -> tuple[dict[str, Any], list[str]]:
    """The leaderboard entry for a results document, and notes on what was left out and why.

    Refuses (:class:`UsageError`) a run whose figures do not compare with the paper's, unless
    ``allow_noncomparable``; then the entry's ``note`` says why.
    """
    if not method.strip():
        raise UsageError("leaderboard: --method must name the model or system")
    interrupted = (document.get("header") or {}).get("interrupted")
    if interrupted:
        # Not a matter of comparability: the figures are of an unknown part of the benchmark.
        raise UsageError(
            f"leaderboard: this run was interrupted ({interrupted}); an interrupted run makes no entry, "
            "even with --allow-noncomparable: run the benchmark to the end"
        )
    if date is None:
        date = dt.date.today().isoformat()
    else:
        try:
            dt.date.fromisoformat(date)
        except ValueError:
            raise UsageError(f"leaderboard: --date must be YYYY-MM-DD, got {date!r}") from None
    scores, notes = dataset_scores(document)
    if not scores:
        raise UsageError(
            "leaderboard: no subset of this run has a leaderboard key (paper.leaderboard in its manifest); "
            f"subsets: {', '.join(document.get('subsets') or {}) or 'none'}"
        )
    boards = _boards(document)
    overall, more = overall_scores(scores, site_splits(boards), partial_overall)
    notes += more
    if category and category not in KNOWN_CATEGORIES:
        notes.append(f"category {category!r} is not one the site uses ({', '.join(KNOWN_CATEGORIES)})")
    header = document.get("header") or {}
    if (header.get("samples") or 1) > 1:
        notes.append(f"scores are Pass@1 means over {header['samples']} samples per task")
    reasons = noncomparable_reasons(document)
    if reasons and not allow_noncomparable:
        raise UsageError(
            "leaderboard: this run does not compare with the paper's figures: "
            + "; ".join(reasons)
            + " (--allow-noncomparable emits the entry with a note saying so)"
        )
    said = [f"not comparable with the paper: {'; '.join(reasons)}"] if reasons else []
    said += [note for board in boards for key, note in board.notes.items() if key in scores]
    result: dict[str, Any] = {
        "method": method.strip(),
        "organization": organization,
        "category": category,
        "date": date,
        "setting": setting,
        "link": link,
        "scores": {**overall, **scores},
    }
    if said:
        result["note"] = ". ".join(said)
        notes.append(f"the entry carries a 'note' (not a field of the site's schema): {result['note']}")
    return result, notes

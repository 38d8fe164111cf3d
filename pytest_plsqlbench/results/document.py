"""Scoring a run's saved results into the results document (:func:`score`): a pure function of
its header and :class:`~.record.TaskResult`\\ s, where every figure of the document is computed.

That purity is what lets ``plsqlbench merge`` combine shards into exactly the numbers of an
unsharded run. Each subset is scored by its metric family (:mod:`pytest_plsqlbench.families`,
named in its manifest, kept in ``subset_info``); the core scores what every family shares first
(tests judged, excluded, skipped; samples; failure classes; usage).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import families
from ..metrics import HEADLINE, NOT_JUDGED, TaskScores, failed_tests, score_samples, unit_failures
from ..outcomes import FAILURE_CLASSES
from ..reporting.leaderboard import split_overall
from ..reporting.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CONFIDENCE
from .record import ResultsFile, ScoredDocument, TaskResult, TestOutcome
from .version import RESULTS_FORMAT, RESULTS_VERSION

if TYPE_CHECKING:
    from ..manifests import Manifest
    from ..settings import Settings


def build_document(
    header: Mapping[str, Any],
    tasks: Iterable[Mapping[str, Any]],
    subset_info: Mapping[str, Mapping[str, Any]] | None = None,
) -> ScoredDocument:
    """The document of raw task entries (as a results file holds them): :func:`score` of them read
    as :class:`~.record.TaskResult`\\ s (their stated figures left behind)."""
    info = {name: dict(m) for name, m in (subset_info or {}).items()}
    return score(ResultsFile(dict(header), info, tuple(TaskResult.from_json(t) for t in tasks)))


def score(results: ResultsFile) -> ScoredDocument:
    """The complete document of a run's saved results; every figure anywhere is derived here.

    Tasks are scored from their tests and sorted by (subset, task id), so the result does not
    depend on the order they arrive in (shards, xdist workers). ``results.subset_info`` gives per
    subset its ``paper`` mapping and its ``metric_family`` (none: the core's figures alone,
    :class:`~pytest_plsqlbench.families.CoreFamily`).
    """
    header, subset_info = results.header, results.subset_info
    ordered = sorted(results.tasks, key=lambda t: (t.subset, t.task_id))
    order = list(dict.fromkeys([*header.get("subsets", []), *(t.subset for t in ordered)]))
    family_of = {s: families.get((subset_info.get(s) or {}).get("metric_family")) for s in order}
    scores: dict[str, list[TaskScores]] = {s: [] for s in order}
    scored: dict[str, list[TaskResult]] = {s: [] for s in order}
    test_counts: dict[str, Counter[str]] = {s: Counter() for s in order}
    unit_counts: dict[str, Counter[str]] = {s: Counter() for s in order}
    units: Counter[str] = Counter()
    usage: dict[str, list[Mapping[str, Any]]] = {s: [] for s in order}
    out_tasks = []
    results_out = []
    for result in ordered:
        subset = result.subset
        by_item = sorted(result.tests, key=lambda r: (int(r.sample or 0), int(r.turn), r.test_id))
        task_scores = score_samples(subset, result.task_id, result.n_turns, by_item)
        ran, expected = tests_run(result.n_tests, by_item, int(header.get("samples") or 1))
        task_scores.incomplete = expected is not None and ran < expected
        scores[subset].append(task_scores)
        test_counts[subset].update(failed_tests(by_item))
        unit_counts[subset].update(unit_failures(by_item))
        units[subset] += _judged_units(by_item)
        answers = unique_answers(result.answers)
        usage[subset].extend(answers)
        task = dataclasses.replace(result, answers=answers, tests=tuple(by_item), figures={})
        figures = family_of[subset].task_figures(task_scores, task)
        samples = figures.pop("samples", None)
        figures.update(incomplete=task_scores.incomplete, tests_run=ran)
        if samples is not None:
            figures["samples"] = samples
        task = dataclasses.replace(task, figures=figures)
        out_tasks.append(task.to_json())
        results_out.append(task)
        scored[subset].append(task)
    subsets = {}
    for name in order:
        if not scores[name]:
            continue
        family = family_of[name]
        figures = family.subset_figures(
            families.SubsetInput(name, scores[name], scored[name], test_counts[name], unit_counts[name], units[name])
        )
        info = subset_info.get(name, {})
        subsets[name] = {
            **figures,
            "usage": usage_totals(usage[name]),
            "paper": dict(info.get("paper") or {}),
            "data_revision": (header.get("data_revisions") or {}).get(name),
            "metric_family": family.name,
        }
    for family in {id(f): f for f in (family_of[name] for name in subsets)}.values():
        family.document_figures(
            {name: figures for name, figures in subsets.items() if family_of[name] is family}, out_tasks
        )
    totals_tests: Counter[str] = Counter()
    totals_units: Counter[str] = Counter()
    for name in subsets:
        totals_tests.update(test_counts[name])
        totals_units.update(unit_counts[name])
    document = {
        "format": RESULTS_FORMAT,
        "version": RESULTS_VERSION,
        "header": dict(header),
        "statistics": {
            "confidence": CONFIDENCE,
            "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
            "bootstrap_seed": BOOTSTRAP_SEED,
            "bootstrap_unit": "task",
            "ci_metrics": list(HEADLINE),
            "pass_at_k": "unbiased estimator 1 - C(n-c,k)/C(n,k) (Chen et al. 2021), c = samples passing every test",
        },
        "subsets": subsets,
        "overall": split_overall(subsets),
        "failure_classes": {c: totals_tests.get(c, 0) for c in FAILURE_CLASSES},
        "failure_units": {c: totals_units.get(c, 0) for c in FAILURE_CLASSES},
        "usage": usage_totals([a for name in subsets for a in usage[name]]),
        "tasks": out_tasks,
    }
    return ScoredDocument(document, tuple(results_out))


def tests_run(n_tests: int | None, tests: Iterable[TestOutcome], samples: int) -> tuple[int, int | None]:
    """(tests of the task that ran, over all samples; how many it has: ``n_tests`` x samples).

    Every collected item leaves a record -- passed, failed, skipped (not runnable), or an
    infrastructure error for a crashed worker -- so fewer records than the task's tests means
    pytest's selection (``-k``, ``-m``, ``--deselect``, ``--lf``) or an early stop (``-x``,
    ``--maxfail``) left some out. ``None`` when the entry does not say how many tests it has.
    """
    ran = len({(int(r.sample or 0), int(r.turn), r.test_id) for r in tests})
    return ran, (int(n_tests) * samples if isinstance(n_tests, int) and n_tests > 0 else None)


def _judged_units(tests: Iterable[TestOutcome]) -> int:
    units: dict[tuple[int, int], bool] = {}
    for r in tests:
        key = (int(r.sample or 0), int(r.turn))
        units[key] = units.get(key, False) or r.failure_class not in NOT_JUDGED
    return sum(units.values())


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def usage_totals(answers: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Answers, tokens, cost and latency, summed from answer records: the one implementation.

    The end-of-run usage line (:func:`pytest_plsqlbench.summary.usage_line`) renders these
    totals. Answers reused from an earlier run's cache (``usage.cached``) were paid for then:
    their tokens and cost are kept apart (``cached_*``), never counted as this run's. Status:
    ``generated`` (asked this run), ``cached``, ``failed`` (provider error), ``not_generated``;
    answers from elsewhere (reference, an answers file) are counted by source only. Latency is
    over answers generated this run.
    """
    out: dict[str, Any] = {
        "answers": 0,
        "by_source": {},
        "by_status": {},
        "generated": 0,
        "cached": 0,
        "failed": 0,
        "not_generated": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cached_prompt_tokens": 0,
        "cached_completion_tokens": 0,
        "cost_usd": 0.0,
        "cached_cost_usd": 0.0,
        "cost_known": 0,
        "cost_unknown": 0,
        "latency_mean_s": None,
        "latency_p95_s": None,
        "models": [],
    }
    models: dict[str, None] = {}
    by_source: Counter[str] = Counter()
    by_status: Counter[str] = Counter()
    latencies: list[float] = []
    for ans in answers:
        out["answers"] += 1
        status = str(ans.get("status") or "?")
        by_source[str(ans.get("source") or "?")] += 1
        by_status[status] += 1
        use = ans.get("usage") or {}
        cached = bool(use.get("cached"))
        from_model = bool(use.get("model")) or any(
            _number(use.get(k)) is not None for k in ("prompt_tokens", "completion_tokens", "cost_usd")
        )
        if use.get("model"):
            models[str(use["model"])] = None
        if status == "not_generated":
            out["not_generated"] += 1
        elif status == "error":
            out["failed"] += 1
        elif from_model:
            out["cached" if cached else "generated"] += 1
        for name in ("prompt_tokens", "completion_tokens"):
            out[f"cached_{name}" if cached else name] += int(_number(use.get(name)) or 0)
        cost = _number(use.get("cost_usd"))
        if cost is not None:
            out["cost_known"] += 1
            out["cached_cost_usd" if cached else "cost_usd"] += cost
        elif from_model and status == "ok":
            out["cost_unknown"] += 1
        latency = _number(use.get("latency_s"))
        if latency is not None and not cached and status == "ok":
            latencies.append(latency)
    if latencies:
        ordered = sorted(latencies)
        out["latency_mean_s"] = sum(ordered) / len(ordered)
        out["latency_p95_s"] = ordered[min(len(ordered) - 1, max(0, round(0.95 * (len(ordered) - 1))))]
    out["by_source"] = dict(sorted(by_source.items()))
    out["by_status"] = dict(sorted(by_status.items()))
    out["models"] = list(models)
    return out


def unique_answers(answers: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One answer per (sample, turn), the last recorded winning, sorted.

    A task whose xdist worker crashed reruns in a fresh worker, which reports the task's answers
    again; they are the same answers (the same cache entries) and count once.
    """
    keyed: dict[tuple[int, int], Mapping[str, Any]] = {}
    for ans in answers:
        keyed[(int(ans.get("sample") or 0), int(ans.get("turn") or 1))] = ans
    return [keyed[k] for k in sorted(keyed)]


# --------------------------------------------------------------------------- reading and writing
def answers_digest(path: Path) -> str | None:
    """``sha256:`` + 16 hex digits of an answers file (None if it cannot be read)."""
    digest = hashlib.sha256()
    try:
        with Path(path).open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return None
    return "sha256:" + digest.hexdigest()[:16]


def data_revisions(
    settings: Settings, tasks: Iterable[TaskResult] = (), manifests: Mapping[str, Manifest] | None = None
) -> dict[str, str]:
    """subset -> the data revision: what its loader reports, else a digest of its manifest files.

    The digest covers the manifest, the checksum of its download and the task folder it names
    (``options.dir``), never the selected tasks, so every shard of a run reports the same value.
    """
    reported: dict[str, str] = {}
    for task in tasks:
        rev = task.metadata.get("data_revision")
        if rev:
            reported.setdefault(task.subset, str(rev))
    manifests = manifests if manifests is not None else {}
    out = {}
    for subset in dict.fromkeys([*settings.tasks.subsets, *reported]):
        if subset in reported:
            out[subset] = reported[subset]
        elif subset in manifests:
            out[subset] = manifest_digest(manifests[subset])
    return out


def manifest_digest(manifest: Any) -> str:
    h = hashlib.sha256()
    h.update(manifest.path.read_bytes())
    if manifest.source is not None and manifest.source.sha256:
        h.update(manifest.source.sha256.encode())
    folder = manifest.options.get("dir") if isinstance(manifest.options, Mapping) else None
    if isinstance(folder, str):
        root = (manifest.directory / folder).resolve()
        if root.is_dir():
            for path in sorted(p for p in root.rglob("*") if p.is_file()):
                h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return "sha256:" + h.hexdigest()[:16]


# --------------------------------------------------------------------------- the document

"""Collecting per-test records on the controller and turning them into the results document.

Workers attach a small JSON-able record to each benchmark item's report (``report.plsql``);
xdist serialises it with the report, so the controller (or the single process of a
``-n 0`` run) sees every record in ``pytest_runtest_logreport``, including the reports
xdist synthesises for an item whose worker crashed.

The results document (``--plsql-results``) is versioned (:data:`RESULTS_VERSION`). Its
aggregates are a pure function of its header and task entries (:func:`build_document`), which
is what lets ``plsqlbench merge`` combine shards into exactly the numbers of an unsharded run.
Format, version by version, in ``docs/reporting.md``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import platform
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from . import __version__
from .errors import UsageError
from .metrics import (
    HEADLINE,
    NOT_JUDGED,
    SKIPPED,
    TaskResult,
    failed_tests,
    score_samples,
    subset_metrics,
    unit_failures,
)
from .outcomes import FAILURE_CLASSES, INFRASTRUCTURE, PASSED
from .reporting import junit
from .reporting.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CONFIDENCE
from .settings import Settings

log = logging.getLogger(__name__)

RESULTS_FORMAT = "pytest-plsqlbench/results"
#: 2: samples are scored as one task (pass@k), bootstrap CIs, analysis-unit failure counts,
#: usage, per-subset paper mapping and data revision. 1 (never released) had none of these.
RESULTS_VERSION = 2

#: Header fields that must agree for two documents to be parts of one run (``merge``).
RUN_IDENTITY = (
    "plugin_version",
    "dialect",
    "database",
    "model",
    "model_resolved",
    "answers_digest",
    "temperature",
    "max_tokens",
    "samples",
    "assertions",
    "timeout_s",
    "safety",
)


def parse_nodeid(nodeid: str) -> dict[str, Any] | None:
    """``subset/task[/sample-k][/turn-t]/test`` -> parts, or None for other node ids."""
    if "::" in nodeid or nodeid.count("/") < 2:
        return None
    parts = nodeid.split("/")
    subset, task = parts[0], parts[1]
    rest = parts[2:]
    sample, turn = 0, 1
    if rest and rest[0].startswith("sample-") and rest[0][7:].isdigit():
        sample = int(rest[0][7:]) - 1
        rest = rest[1:]
    if len(rest) == 2 and rest[0].startswith("turn-") and rest[0][5:].isdigit():
        turn = int(rest[0][5:])
        rest = rest[1:]
    if len(rest) != 1:
        return None
    return {"subset": subset, "node": task, "sample": sample, "turn": turn, "test_id": rest[0]}


class ResultsCollector:
    """Plugin object living on the controller: receives records, computes, reports, writes."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.records: dict[str, dict[str, Any]] = {}
        self.task_info: dict[tuple[str, str], dict[str, Any]] = {}
        self.answers: dict[tuple[str, str], dict[tuple[int, int], dict[str, Any]]] = {}
        self.env: dict[str, Any] = {}
        self.started = dt.datetime.now(dt.UTC)
        self._document: dict[str, Any] | None = None
        #: ``--plsql-answers FILE``: its digest when the run starts (the workers read it then), so
        #: two parts scored from different files of the same name are told apart.
        self.answers_digest = answers_digest(settings.answers) if settings.answers is not None else None

    # ----------------------------------------------------------------- hooks
    @pytest.hookimpl(tryfirst=True)  # before junitxml, so the testcase gets our name and properties
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        rec = getattr(report, "plsql", None)
        if rec is None:
            if report.failed and report.nodeid not in self.records:
                parsed = parse_nodeid(report.nodeid)
                if parsed is not None:
                    # e.g. a worker crashed while running the item.
                    self.records[report.nodeid] = {
                        **parsed,
                        "task_id": None,
                        "passed": False,
                        "failure_class": INFRASTRUCTURE,
                        "message": _first_line(str(report.longrepr)) or "crashed",
                    }
        elif report.when != "teardown":
            # A failed setup carries the record (the call never happens); otherwise the call does.
            if report.skipped:
                # Skipped by a plugin (e.g. a task the data cannot run): neither a failure nor a harness error.
                reason = (
                    report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr or "")
                )
                rec = {
                    **rec,
                    "passed": False,
                    "failure_class": SKIPPED,
                    "message": str(reason).removeprefix("Skipped: "),
                }
            self.records[report.nodeid] = rec
            key = (rec["subset"], rec["task_id"])
            if "task" in rec:
                self.task_info[key] = rec["task"]
            if "answer" in rec:
                # Keyed by (sample, turn): a rerun after a worker crash reports the answer again.
                ans = rec["answer"]
                self.answers.setdefault(key, {})[(int(ans.get("sample") or 0), int(ans.get("turn") or 1))] = ans
            if "env" in rec:
                self.env.update(rec["env"])
        if parse_nodeid(report.nodeid) is not None:
            known = self.records.get(report.nodeid)
            junit.decorate(self.config, report, known.get("failure_class") if known else None)

    # ----------------------------------------------------------------- results
    def _resolve_task_ids(self) -> None:
        by_node = {(r["subset"], r["node"]): r["task_id"] for r in self.records.values() if r.get("task_id")}
        for rec in self.records.values():
            if rec.get("task_id") is None:
                rec["task_id"] = by_node.get((rec["subset"], rec["node"]), rec["node"])

    def task_entries(self) -> list[dict[str, Any]]:
        """One raw entry per task (all samples): identity, metadata, answers and per-test outcomes."""
        self._resolve_task_ids()
        grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for rec in self.records.values():
            grouped.setdefault((rec["subset"], rec["task_id"]), []).append(rec)
        entries = []
        for (subset, task_id), recs in grouped.items():
            info = self.task_info.get((subset, task_id), {})
            entries.append(
                {
                    "subset": subset,
                    "task_id": task_id,
                    "node": recs[0].get("node"),
                    "n_turns": max(int(r.get("n_turns", 1)) for r in recs),
                    "n_tests": info.get("n_tests"),
                    "entry_points": info.get("entry_points", []),
                    "metadata": info.get("metadata", {}),
                    "markers": info.get("markers", []),
                    "answers": unique_answers(self.answers.get((subset, task_id), {}).values()),
                    "tests": [_test_entry(r) for r in recs],
                }
            )
        return entries

    def document(self) -> dict[str, Any]:
        """The versioned results document (``--plsql-results``)."""
        if self._document is None:
            tasks = self.task_entries()
            self._document = build_document(self.header(tasks), tasks, self.subset_info(tasks))
        return self._document

    def subset_info(self, tasks: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        """Per-subset facts the report needs later without the manifests: paper mapping, revision."""
        try:
            from .manifests import discover

            manifests = discover(self.settings.task_dirs)
        except (UsageError, OSError, FileNotFoundError) as exc:
            log.warning("cannot read subset manifests for the report: %s", exc)
            manifests = {}
        out = {}
        for subset in dict.fromkeys([*self.settings.subsets, *(t["subset"] for t in tasks)]):
            manifest = manifests.get(subset)
            out[subset] = {
                "paper": dict(manifest.paper) if manifest is not None else {},
                "description": manifest.description if manifest is not None else "",
            }
        return out

    def header(self, tasks: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
        s = self.settings
        header = {
            "plugin_version": __version__,
            "python": platform.python_version(),
            "dialect": s.dialect,
            "database": s.db,
            "database_version": self.env.get("db_version"),
            "model": s.answer_source,
            "temperature": s.temperature,
            "max_tokens": s.max_tokens,
            "samples": s.samples,
            "assertions": s.assertions,
            "timeout_s": s.timeout,
            "safety": s.safety,
            "shard": f"{s.shard[0]}/{s.shard[1]}" if s.shard else None,
            "keyword": self.config.getoption("keyword", "") or None,
            "markexpr": self.config.getoption("markexpr", "") or None,
            "subsets": list(s.subsets),
            "data_revisions": data_revisions(s, tasks),
            **({"answers_digest": self.answers_digest} if s.answers is not None else {}),
            "started": self.started.isoformat(timespec="seconds"),
            "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        from .generation import is_real_model, resolve_model, runtime_info

        if s.answers is None and is_real_model(s.model):
            # Which model an alias meant, and whose cost data priced it (litellm's bundled map).
            header["model_resolved"] = resolve_model(str(s.model), s.model_aliases)
            header.update(runtime_info())
        return header

    def write(self, path: Path) -> None:
        write_document(self.document(), path)


# --------------------------------------------------------------------------- data revisions
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


def data_revisions(settings: Settings, tasks: Iterable[Mapping[str, Any]] = ()) -> dict[str, str]:
    """subset -> the data revision: what its loader reports, else a digest of its manifest files.

    The digest covers the manifest, the checksum of its download and the task folder it names
    (``options.dir``), never the selected tasks, so every shard of a run reports the same value.
    """
    reported: dict[str, str] = {}
    for task in tasks:
        rev = (task.get("metadata") or {}).get("data_revision")
        if rev:
            reported.setdefault(task["subset"], str(rev))
    try:
        from .manifests import discover

        manifests = discover(settings.task_dirs)
    except (UsageError, OSError, FileNotFoundError):
        manifests = {}
    out = {}
    for subset in dict.fromkeys([*settings.subsets, *reported]):
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
def build_document(
    header: Mapping[str, Any],
    tasks: Iterable[Mapping[str, Any]],
    subset_info: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The complete document from a header and raw task entries; every aggregate is derived here.

    Tasks are scored from their ``tests`` lists and sorted by (subset, task id), so the result
    does not depend on the order the entries arrive in (shards, xdist workers).
    """
    subset_info = dict(subset_info or {})
    entries = sorted((dict(t) for t in tasks), key=lambda t: (t["subset"], t["task_id"]))
    order = list(dict.fromkeys([*header.get("subsets", []), *(t["subset"] for t in entries)]))
    results: dict[str, list[TaskResult]] = {s: [] for s in order}
    test_counts: dict[str, Counter[str]] = {s: Counter() for s in order}
    unit_counts: dict[str, Counter[str]] = {s: Counter() for s in order}
    units: Counter[str] = Counter()
    usage: dict[str, list[Mapping[str, Any]]] = {s: [] for s in order}
    out_tasks = []
    for entry in entries:
        tests = sorted(
            entry.get("tests", []),
            key=lambda r: (int(r.get("sample") or 0), int(r.get("turn", 1)), r["test_id"]),
        )
        result = score_samples(entry["subset"], entry["task_id"], int(entry.get("n_turns", 1)), tests)
        ran, expected = tests_run(entry, tests, int(header.get("samples") or 1))
        result.incomplete = expected is not None and ran < expected
        results[entry["subset"]].append(result)
        test_counts[entry["subset"]].update(failed_tests(tests))
        unit_counts[entry["subset"]].update(unit_failures(tests))
        units[entry["subset"]] += _judged_units(tests)
        answers = unique_answers(entry.get("answers", []))
        usage[entry["subset"]].extend(answers)
        per_sample = [
            {
                "sample": s.sample,
                "test_pass": None if s.excluded else s.test_pass,
                "suite_pass": None if s.excluded else s.suite_pass,
                "turn_suite_pass": s.turn_suite_pass if s.multi_turn and not s.excluded else None,
                "episode_pass": s.episode_pass if s.multi_turn and not s.excluded else None,
                "excluded": s.excluded_reason,
            }
            for s in result.samples
        ]
        out_tasks.append(
            {
                **entry,
                "answers": [dict(a) for a in answers],
                **result.as_dict(),
                "incomplete": result.incomplete,
                "tests_run": ran,
                "samples": per_sample,
                "tests": tests,
            }
        )
    subsets = {}
    for name in order:
        if not results[name]:
            continue
        m = subset_metrics(name, results[name], test_counts[name], unit_counts[name], units[name])
        info = subset_info.get(name, {})
        subsets[name] = {
            **m.as_dict(),
            "usage": usage_totals(usage[name]),
            "paper": dict(info.get("paper") or {}),
            "data_revision": (header.get("data_revisions") or {}).get(name),
        }
        family = [t for t in out_tasks if t["subset"] == name and (t.get("metadata") or {}).get("judge") == "procarena"]
        if family:  # ProcArena's metric family (until the core's per-subset families land)
            from .procarena.metrics import compute as procarena_metrics

            subsets[name]["procarena"] = procarena_metrics(family)
    from .procarena.interactive.metrics import retention  # Interactive EX / Direct EX over paired tasks

    retention(subsets, out_tasks)
    totals_tests: Counter[str] = Counter()
    totals_units: Counter[str] = Counter()
    for name in subsets:
        totals_tests.update(test_counts[name])
        totals_units.update(unit_counts[name])
    return {
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


def tests_run(
    entry: Mapping[str, Any], tests: Iterable[Mapping[str, Any]], samples: int
) -> tuple[int, int | None]:
    """(tests of the task that ran, over all samples; how many it has: ``n_tests`` x samples).

    Every collected item leaves a record -- passed, failed, skipped (not runnable), or an
    infrastructure error for a crashed worker -- so fewer records than the task's tests means
    pytest's selection (``-k``, ``-m``, ``--deselect``, ``--lf``) or an early stop (``-x``,
    ``--maxfail``) left some out. ``None`` when the entry does not say how many tests it has.
    """
    ran = len({(int(r.get("sample") or 0), int(r.get("turn", 1)), r["test_id"]) for r in tests})
    n_tests = entry.get("n_tests")
    return ran, (int(n_tests) * samples if isinstance(n_tests, int) and n_tests > 0 else None)


def _judged_units(tests: Iterable[Mapping[str, Any]]) -> int:
    units: dict[tuple[int, int], bool] = {}
    for r in tests:
        key = (int(r.get("sample") or 0), int(r.get("turn", 1)))
        units[key] = units.get(key, False) or r.get("failure_class", PASSED) not in NOT_JUDGED
    return sum(units.values())


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
class ResultsFormatError(UsageError):
    """A file that is not a results document of the version this plugin reads."""


def check_document(doc: Any, source: str = "results") -> dict[str, Any]:
    """Return ``doc`` if it is a current results document, else raise one clear error."""
    if not isinstance(doc, dict) or doc.get("format") != RESULTS_FORMAT:
        raise ResultsFormatError(
            f'{source}: not a pytest-plsqlbench results file (no "format": "{RESULTS_FORMAT}")'
        )
    version = doc.get("version")
    if version != RESULTS_VERSION:
        if isinstance(version, int) and version < RESULTS_VERSION:
            how = (
                f"older (version {version}); re-run the benchmark, or re-score it from the answer cache "
                f"with --plsql-cache-only, to get a version {RESULTS_VERSION} file"
            )
        elif isinstance(version, int):
            how = (
                f"newer (version {version}) than this pytest-plsqlbench {__version__} reads "
                f"(version {RESULTS_VERSION}); upgrade pytest-plsqlbench"
            )
        else:
            how = f"of unknown version {version!r}"
        raise ResultsFormatError(f"{source}: results file is {how}")
    for key in ("header", "subsets", "tasks"):
        if key not in doc:
            raise ResultsFormatError(f"{source}: results file lacks {key!r} (truncated or edited?)")
    _check_header(doc["header"], source)
    if not isinstance(doc["subsets"], dict) or not all(isinstance(m, dict) for m in doc["subsets"].values()):
        raise ResultsFormatError(f"{source}: 'subsets' must map subset names to objects (edited?)")
    if not isinstance(doc["tasks"], list):
        raise ResultsFormatError(f"{source}: 'tasks' must be a list of task entries (edited?)")
    for index, task in enumerate(doc["tasks"]):
        _check_task(task, index, source)
    return doc


_SHARD_TEXT = re.compile(r"^(\d+)/(\d+)$")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_header(header: Any, source: str) -> None:
    def bad(what: str) -> ResultsFormatError:
        return ResultsFormatError(f"{source}: header: {what} (edited?)")

    if not isinstance(header, dict):
        raise bad("not an object")
    shard = header.get("shard")
    if shard is not None:
        m = _SHARD_TEXT.match(shard) if isinstance(shard, str) else None
        if m is None or not 1 <= int(m.group(1)) <= int(m.group(2)):
            raise bad(f"shard {shard!r} is not I/N with 1 <= I <= N")
    subsets = header.get("subsets", [])
    if not isinstance(subsets, list) or not all(isinstance(x, str) for x in subsets):
        raise bad(f"subsets {subsets!r} is not a list of names")
    revisions = header.get("data_revisions") or {}
    if not isinstance(revisions, dict):
        raise bad(f"data_revisions {revisions!r} is not an object")
    samples = header.get("samples")
    if samples is not None and not (_is_int(samples) and samples >= 1):
        raise bad(f"samples {samples!r} is not a positive integer")


def _check_task(task: Any, index: int, source: str) -> None:
    """One task entry: what :func:`build_document` and the reports read from it."""
    where = f"{source}: task entry {index + 1}"
    if not isinstance(task, dict):
        raise ResultsFormatError(f"{where}: not an object (edited?)")
    for key in ("subset", "task_id"):
        if not isinstance(task.get(key), str) or not task[key]:
            raise ResultsFormatError(f"{where}: no {key!r} (a non-empty string is required; edited?)")
    where += f" ({task['subset']}/{task['task_id']})"
    n_turns = task.get("n_turns", 1)
    if not (_is_int(n_turns) and n_turns >= 1):
        raise ResultsFormatError(f"{where}: n_turns {n_turns!r} is not a positive integer")
    if task.get("n_tests") is not None and not (_is_int(task["n_tests"]) and task["n_tests"] >= 0):
        raise ResultsFormatError(f"{where}: n_tests {task['n_tests']!r} is not a count")
    for key in ("tests", "answers"):
        items = task.get(key, [])
        if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
            raise ResultsFormatError(f"{where}: {key!r} is not a list of objects")
    for n, test in enumerate(task.get("tests", []), 1):
        if not isinstance(test.get("test_id"), str):
            raise ResultsFormatError(f"{where}: test {n} has no 'test_id'")
        turn, sample = test.get("turn", 1), test.get("sample")
        if not (_is_int(turn) and turn >= 1):
            raise ResultsFormatError(f"{where}: test {test['test_id']!r}: turn {turn!r} is not a turn number")
        if sample is not None and not (_is_int(sample) and sample >= 0):
            raise ResultsFormatError(f"{where}: test {test['test_id']!r}: sample {sample!r} is not a count")
        if not isinstance(test.get("passed", False), bool):
            raise ResultsFormatError(f"{where}: test {test['test_id']!r}: 'passed' is not true/false")
        if not isinstance(test.get("failure_class", PASSED), str):
            raise ResultsFormatError(f"{where}: test {test['test_id']!r}: failure_class is not a name")
    for answer in task.get("answers", []):
        for key in ("turn", "sample"):
            value = answer.get(key)
            if value is not None and not _is_int(value):
                raise ResultsFormatError(f"{where}: an answer's {key} {value!r} is not an integer")
        if not isinstance(answer.get("usage") or {}, dict):
            raise ResultsFormatError(f"{where}: an answer's usage is not an object")


def read_document(path: Path) -> dict[str, Any]:
    """Read and check a results file (one error message for every way it can be wrong)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ResultsFormatError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsFormatError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    return check_document(doc, str(path))


def write_document(doc: Mapping[str, Any], path: Path) -> None:
    """Write atomically: a reader never sees half a file, even if the run is killed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _test_entry(rec: Mapping[str, Any]) -> dict[str, Any]:
    keep = (
        "turn",
        "test_id",
        "sample",
        "passed",
        "failure_class",
        "message",
        "error_code",
        "expected",
        "actual",
        "duration_s",
        "worker",
        "extra",
    )
    return {k: rec.get(k) for k in keep if k in rec}


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""

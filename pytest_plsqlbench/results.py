"""Collecting per-test records on the controller and turning them into results.

Workers attach a small JSON-able record to each benchmark item's report (``report.plsql``);
xdist serialises it with the report, so the controller (or the single process of a
``-n 0`` run) sees every record in ``pytest_runtest_logreport``, including the reports
xdist synthesises for an item whose worker crashed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import pytest

from . import __version__
from .metrics import TaskScore, aggregate, score_task
from .outcomes import FAILURE_CLASSES, INFRASTRUCTURE, PASSED
from .settings import Settings

RESULTS_FORMAT = "pytest-plsqlbench/results"
RESULTS_VERSION = 1


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
        self.answers: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
        self.env: dict[str, Any] = {}
        self.started = dt.datetime.now(dt.timezone.utc)
        self._document: dict[str, Any] | None = None

    # ----------------------------------------------------------------- hooks
    @pytest.hookimpl
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
            return
        if report.when == "teardown":
            return
        # A failed setup carries the record (the call never happens); otherwise the call does.
        self.records[report.nodeid] = rec
        key = (rec["subset"], rec["task_id"])
        if "task" in rec:
            self.task_info[key] = rec["task"]
        if "answer" in rec:
            self.answers.setdefault((*key, int(rec.get("sample", 0))), []).append(rec["answer"])
        if "env" in rec:
            self.env.update(rec["env"])

    # ----------------------------------------------------------------- results
    def _resolve_task_ids(self) -> None:
        by_node = {(r["subset"], r["node"]): r["task_id"] for r in self.records.values() if r.get("task_id")}
        for rec in self.records.values():
            if rec.get("task_id") is None:
                rec["task_id"] = by_node.get((rec["subset"], rec["node"]), rec["node"])

    def scores(self) -> list[TaskScore]:
        self._resolve_task_ids()
        grouped: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
        for rec in self.records.values():
            grouped.setdefault((rec["subset"], rec["task_id"], int(rec.get("sample", 0))), []).append(rec)
        out = []
        for (subset, task_id, _sample), recs in grouped.items():
            n_turns = max(int(r.get("n_turns", 1)) for r in recs)
            out.append(score_task(subset, task_id, n_turns, recs))
        return out

    def failure_counts(self) -> dict[str, Counter[str]]:
        counts: dict[str, Counter[str]] = {}
        for rec in self.records.values():
            cls = rec.get("failure_class", PASSED)
            if cls != PASSED:
                counts.setdefault(rec["subset"], Counter())[cls] += 1
        return counts

    def document(self) -> dict[str, Any]:
        """The versioned results document (``--plsql-results``)."""
        if self._document is not None:
            return self._document
        scores = self.scores()
        metrics = aggregate(scores, self.failure_counts())
        tasks = []
        for score in sorted(scores, key=lambda s: (s.subset, s.task_id)):
            recs = sorted(
                (r for r in self.records.values() if r["subset"] == score.subset and r["task_id"] == score.task_id),
                key=lambda r: (int(r.get("sample", 0)), int(r.get("turn", 1)), r["test_id"]),
            )
            info = self.task_info.get((score.subset, score.task_id), {})
            tasks.append(
                {
                    "subset": score.subset,
                    "task_id": score.task_id,
                    "n_turns": score.n_turns,
                    "metadata": info.get("metadata", {}),
                    "markers": info.get("markers", []),
                    "answers": self.answers.get((score.subset, score.task_id, 0), []),
                    "test_pass": None if score.excluded else score.test_pass,
                    "suite_pass": None if score.excluded else score.suite_pass,
                    "turn_suite_pass": score.turn_suite_pass if score.multi_turn and not score.excluded else None,
                    "episode_pass": score.episode_pass if score.multi_turn and not score.excluded else None,
                    "excluded": score.excluded_reason,
                    "tests": [_test_entry(r) for r in recs],
                }
            )
        totals: Counter[str] = Counter()
        for c in self.failure_counts().values():
            totals.update(c)
        self._document = {
            "format": RESULTS_FORMAT,
            "version": RESULTS_VERSION,
            "header": self.header(),
            "subsets": {name: m.as_dict() for name, m in metrics.items()},
            "failure_classes": {c: totals.get(c, 0) for c in FAILURE_CLASSES},
            "tasks": tasks,
        }
        return self._document

    def header(self) -> dict[str, Any]:
        s = self.settings
        revisions = {
            key[0]: info.get("metadata", {}).get("data_revision")
            for key, info in self.task_info.items()
            if info.get("metadata", {}).get("data_revision")
        }
        return {
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
            "subsets": list(s.subsets),
            "data_revisions": revisions,
            "started": self.started.isoformat(timespec="seconds"),
            "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        }

    def write(self, path: Path) -> None:
        doc = self.document()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)


def _test_entry(rec: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("turn", "test_id", "sample", "passed", "failure_class", "message", "error_code", "expected", "actual", "duration_s")
    return {k: rec.get(k) for k in keep if k in rec}


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""

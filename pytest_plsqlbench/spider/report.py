"""What the schema-grounded subsets could and could not run, said at the end of the run.

A partial copy of the release runs what it holds; this report makes the rest visible:
tasks whose schema is absent (skipped, with the reason), how many of the runnable tasks had
data and how many ran on empty tables, schema parts that did not transpile, and -- with
``--plsql-model=reference`` -- how many published reference answers pass the strict Spider
comparator, and how many of the others fail *merely on formatting* (the lenient comparator,
which never scores, names the rules it had to relax).

One plugin object per process: workers attach a small record to each item's report
(``report.plsql_spider``); the controller collects them, prints the section and adds it to
the results document (``results["spider_report"]``).
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Generator
from typing import Any

import pytest

from .. import outcomes
from ..collect import PlsqlItem, keep_constant_tasks
from ..comparators import LENIENT_RULES, compare_rows_lenient
from ..manifests import Manifest
from ..settings import Settings
from ..summary import shown_ids
from ..tasks import Task
from .build import LoadNotes

log = logging.getLogger(__name__)

PLUGIN_NAME = "plsqlbench-spider-report"
SHOW_IDS = 8
KEEP = "--plsql-keep-constant-tasks"


def _ids(ids: list[str]) -> str:
    return shown_ids(ids, SHOW_IDS)


class SpiderReport:
    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.tasks: dict[str, list[Task]] = {}
        self.notes: dict[str, LoadNotes] = {}
        self.records: dict[str, dict[str, Any]] = {}

    def add(self, manifest: Manifest, tasks: list[Task], notes: LoadNotes) -> None:
        self.tasks[manifest.name] = tasks
        self.notes[manifest.name] = notes

    # ----------------------------------------------------------------- hooks
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Any, Any]:
        report = yield
        if not isinstance(item, PlsqlItem):
            return report
        task = item.task_node.task
        if task.subset not in self.tasks:
            return report
        load_error = getattr(item.task_node, "fixture_error", None)
        if call.when == "setup" and load_error:
            report.plsql_spider = {"subset": task.subset, "task_id": task.id, "load_error": load_error}
            return report
        outcome = item.outcome
        if call.when != "call" or (outcome is None and not item.left_out):
            return report
        rec: dict[str, Any] = {
            "subset": task.subset,
            "task_id": task.id,
            "passed": outcome.passed if outcome is not None else False,
            "failure_class": outcome.failure_class if outcome is not None else outcomes.SKIPPED,
            "data_rows": task.metadata.get("data_rows", 0),
        }
        if item.left_out:  # an empty answer passes it: skipped, named in this report
            rec["left_out"] = True
        test = item.test
        if test.kind == "rows":
            run = item.task_node.run
            gold = test.expected if test.expected is not None else (
                run.expected.get((item.turn.index, test.id)) if run is not None else None)
            if isinstance(gold, (list, tuple)):
                rec["gold_rows"] = len(gold)
            elif item.left_out:  # an empty output passed it: the gold result is empty
                rec["gold_rows"] = 0
        if (
            outcome is not None
            and self.settings.model.name == "reference"
            and test.kind == "rows"
            and not outcome.passed
            and outcome.failure_class == outcomes.WRONG_OUTPUT
        ):
            ok, rules = compare_rows_lenient(outcome.expected or [], outcome.actual or [], test.options)
            rec["lenient"], rec["rules"] = ok, list(rules)
        report.plsql_spider = rec
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        rec = getattr(report, "plsql_spider", None)
        if rec is not None and report.when in ("call", "setup"):
            self.records[report.nodeid] = rec

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if getattr(self.config, "workerinput", None) is not None or not self.tasks:
            return
        terminalreporter.write_sep("-", "PLSQLBench data report (schema-grounded subsets)")
        for line in self.lines():
            terminalreporter.write_line(line)

    @pytest.hookimpl(optionalhook=True)
    def pytest_plsql_results(self, config: pytest.Config, results: dict[str, Any]) -> None:
        results["spider_report"] = self.summary()

    # ----------------------------------------------------------------- content
    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for subset, tasks in self.tasks.items():
            notes = self.notes[subset]
            runnable = [t for t in tasks if t.not_runnable is None]
            reasons: dict[str, list[str]] = defaultdict(list)
            for t in tasks:
                if t.not_runnable is not None:
                    reasons[t.not_runnable].append(t.id)
            recs = [r for r in self.records.values() if r["subset"] == subset and "load_error" not in r]
            load_errors: dict[str, list[str]] = defaultdict(list)
            for r in self.records.values():
                ids = load_errors[r["load_error"]] if r["subset"] == subset and "load_error" in r else None
                if ids is not None and r["task_id"] not in ids:
                    ids.append(r["task_id"])
            ran = {r["task_id"] for r in recs}
            entry: dict[str, Any] = {
                "dialect": self.settings.database.dialect,
                "data": str(notes.root),
                "data_revision": tasks[0].metadata.get("data_revision") if tasks else None,
                "ddl_files": notes.ddl_files,
                "dml_files": notes.dml_files,
                "tasks": len(tasks),
                "runnable": len(runnable),
                "runnable_with_data": sum(1 for t in runnable if t.metadata.get("data_rows")),
                "runnable_on_empty_tables": sum(1 for t in runnable if not t.metadata.get("data_rows")),
                "ran": len(ran),
                "ran_with_data": len({r["task_id"] for r in recs if r.get("data_rows")}),
                "ran_on_empty_tables": len({r["task_id"] for r in recs if not r.get("data_rows")}),
                "not_runnable": {reason: ids for reason, ids in reasons.items()},
                "not_collected": list(notes.skipped),
                "schema_problems": notes.schema_problems,
                "data_without_ddl": notes.orphan_data,
                "load_adjustments": notes.adjustments,
                "not_loadable": notes.unloadable,
                "load_errors": {why: sorted(ids, key=_natural) for why, ids in load_errors.items()},
                "tables_without_rows": {
                    table: {
                        "why": why,
                        "tasks": [
                            t.id for t in tasks if table in _upper(t.metadata.get("tables_without_rows"))
                        ],
                    }
                    for table, why in notes.tables_without_rows.items()
                },
                "rows_not_loaded": notes.foreign_rows,
            }
            translated = [t for t in tasks if "reference_translated" in t.metadata]
            if translated:
                entry["references_translated"] = sum(
                    1 for t in translated if t.metadata["reference_translated"]
                )
                entry["references_not_translated"] = {
                    t.id: t.metadata.get("reference_translation_error")
                    for t in translated
                    if not t.metadata["reference_translated"]
                }
            gold = [t for t in tasks if "gold_transpiled" in t.metadata]
            if gold:
                entry["gold_transpiled"] = sum(1 for t in gold if t.metadata["gold_transpiled"])
            # Where the gold query returns no row, an answer that prints nothing passes: such a task
            # measures nothing and is left out of the scores (skipped) unless kept on request.
            entry["empty_gold_tasks"] = sorted({r["task_id"] for r in recs if r.get("gold_rows") == 0}, key=_natural)
            entry["left_out_empty_answer"] = sorted({r["task_id"] for r in recs if r.get("left_out")}, key=_natural)
            scored = [r for r in recs if not r.get("left_out")]
            if self.settings.model.name == "reference" and scored:
                entry["references"] = self._reference_counts(scored)
            out[subset] = entry
        return out

    @staticmethod
    def _reference_counts(recs: list[dict[str, Any]]) -> dict[str, Any]:
        by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in recs:
            by_task[r["task_id"]].append(r)
        strict = [t for t, rs in by_task.items() if all(r["passed"] for r in rs)]
        excluded = [
            t for t, rs in by_task.items() if any(r["failure_class"] in outcomes.EXCLUDED for r in rs)
        ]
        failed = [t for t in by_task if t not in strict and t not in excluded]
        lenient = [t for t in failed if all(r["passed"] or r.get("lenient") for r in by_task[t])]
        rules: Counter[str] = Counter()
        for t in lenient:
            for r in by_task[t]:
                rules.update(r.get("rules") or ())
        classes: Counter[str] = Counter(
            r["failure_class"] for t in failed if t not in lenient for r in by_task[t] if not r["passed"]
        )
        return {
            "run": len(by_task),
            "pass_strict": len(strict),
            "fail_strict_pass_lenient": len(lenient),
            "lenient_rules": dict(rules),
            "lenient_tasks": sorted(lenient, key=_natural),
            "fail_both": sorted(t for t in failed if t not in lenient),
            "fail_classes": dict(classes),
            "not_evaluated": sorted(excluded),
        }

    def lines(self) -> list[str]:
        out: list[str] = []
        for subset, s in self.summary().items():
            out.append(
                f"{subset} ({s['dialect']}, data {s['data_revision']}): {s['tasks']} task(s) in the data"
            )
            line = (
                f"  runnable: {s['runnable']} ({s['runnable_with_data']} with data, "
                f"{s['runnable_on_empty_tables']} on empty tables)"
            )
            if not self.config.getoption("collectonly", False):
                line += (
                    f"; ran: {s['ran']} ({s['ran_with_data']} with data, "
                    f"{s['ran_on_empty_tables']} on empty tables)"
                )
            out.append(line)
            for reason, ids in s["not_runnable"].items():
                out.append(f"  not runnable ({len(ids)}): {reason}: {_ids(ids)}")
            for why in s["not_collected"]:
                out.append(f"  not collected: {why}")
            for why, ids in s["load_errors"].items():
                out.append(f"  not runnable, data error at load ({len(ids)}): {why}: {_ids(ids)}")
            for owner, adjustments in s["load_adjustments"].items():
                for text in adjustments:
                    out.append(f"  load of {owner} adjusted: {text}")
            for text in s["rows_not_loaded"]:
                out.append(f"  rows not loaded: {text}")
            for table, info in s["tables_without_rows"].items():
                out.append(
                    f"  table {table} has no rows in the data ({info['why']}); "
                    f"{len(info['tasks'])} task(s) run on it empty: {_ids(info['tasks'])}"
                )
            for owner, problems in s["schema_problems"].items():
                out.append(
                    f"  schema {owner}: {len(problems)} part(s) left out of the PostgreSQL port, e.g. {problems[0]}"
                )
            if s["data_without_ddl"]:
                out.append(
                    f"  data without DDL (not loadable, {len(s['data_without_ddl'])} table(s)): "
                    f"{_ids(s['data_without_ddl'])}"
                )
            if s["empty_gold_tasks"]:
                empty = s["empty_gold_tasks"]
                left = s["left_out_empty_answer"]
                kept = [t for t in empty if t not in left]
                head = f"  gold result empty: {len(empty)} of the {s['ran']} task(s) run -- an answer that prints nothing passes them"
                if left:
                    out.append(f"{head}; left out of the scores ({len(left)}, {KEEP} keeps them): {_ids(left)}")
                if kept:
                    why = "kept on request" if keep_constant_tasks(self.config) else "kept: another test of the task needs more"
                    out.append(f"{head}; {why} ({len(kept)}): {_ids(kept)}")
            if "gold_transpiled" in s:
                out.append(f"  gold SQL transpiled to PostgreSQL: {s['gold_transpiled']} of {s['tasks']}")
            if "references_translated" in s:
                missing = s["references_not_translated"]
                out.append(
                    f"  published references translated to PL/pgSQL: {s['references_translated']} of "
                    f"{s['references_translated'] + len(missing)}"
                )
                for tid, why in list(missing.items())[:SHOW_IDS]:
                    out.append(f"    not translated: {tid}: {why}")
            ref = s.get("references")
            if ref:
                rules = ", ".join(f"{k} {v}" for k, v in sorted(ref["lenient_rules"].items())) or "-"
                out.append(
                    f"  published references run: {ref['run']}; pass the strict comparator: {ref['pass_strict']}; "
                    f"fail it merely on formatting (lenient pass): {ref['fail_strict_pass_lenient']} [{rules}]; "
                    f"fail both: {len(ref['fail_both'])}; not evaluated: {len(ref['not_evaluated'])}"
                )
                if ref["lenient_tasks"]:
                    out.append(f"    formatting only: {_ids(ref['lenient_tasks'])}")
                if ref["fail_both"]:
                    out.append(
                        f"    failing: {_ids(ref['fail_both'])} ({_counts(ref['fail_classes'])})"
                    )
        if any("references" in s for s in self.summary().values()):
            out.append("  lenient rules: " + "; ".join(f"{k} = {v}" for k, v in LENIENT_RULES.items()))
        return out


def _upper(values: Any) -> set[str]:
    return {str(v).upper() for v in values or ()}


def _natural(task_id: str) -> tuple[str, int]:
    head, _, num = task_id.rpartition("_")
    return (head, int(num)) if num.isdigit() else (task_id, -1)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def reporter(config: pytest.Config, settings: Settings) -> SpiderReport:
    """The process's report plugin, registered on first use."""
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if plugin is None:
        plugin = SpiderReport(config, settings)
        config.pluginmanager.register(plugin, PLUGIN_NAME)
    return plugin

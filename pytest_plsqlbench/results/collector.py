r"""Collecting per-item outcomes on the controller.

Workers attach a :class:`~pytest_plsqlbench.results.record.TestOutcome` to each benchmark item's
report (``report.plsql``; plain JSON values when xdist serialises it), so the controller (or the
single process of a ``-n 0`` run) sees every outcome in ``pytest_runtest_logreport``, including
the reports xdist synthesises for an item whose worker crashed. :meth:`ResultsCollector.results`
groups them into :class:`~pytest_plsqlbench.results.record.TaskResult`\ s and
:meth:`ResultsCollector.document` scores those once.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .. import __version__, nodeids
from ..outcomes import INFRASTRUCTURE
from ..reporting import junit
from ..settings import Settings
from .document import answers_digest, data_revisions, score, unique_answers
from .reading import write_document
from .record import ResultsFile, ScoredDocument, TaskFacts, TaskResult, TestOutcome

#: The header's ``interrupted`` while the run is under way: the file written at session start
#: says so, and only the end of the run replaces it. A controller killed outright (SIGKILL, OOM,
#: a lost CI runner) runs no code at the end, so its file keeps saying it.
NOT_FINISHED = "the run did not finish"

if TYPE_CHECKING:
    from ..manifests import Manifest

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=256)
def _is_benchmark(nodeid: str) -> bool:
    """Cached: an item's three reports come one after another."""
    return nodeids.parse(nodeid) is not None


class ResultsCollector:
    """Plugin object living on the controller: receives records, computes, reports, writes."""

    def __init__(
        self, config: pytest.Config, settings: Settings, manifests: Mapping[str, Manifest] | None = None
    ) -> None:
        self.config = config
        self.settings = settings
        #: The run's manifests (read once by the plugin): paper mapping, metric family, data digest.
        self.manifests: Mapping[str, Manifest] = dict(manifests or {})
        self.records: dict[str, TestOutcome] = {}
        self.task_info: dict[tuple[str, str], TaskFacts] = {}
        self.answers: dict[tuple[str, str], dict[tuple[int, int], dict[str, Any]]] = {}
        self.env: dict[str, Any] = {}
        self.started = dt.datetime.now(dt.UTC)
        self._document: ScoredDocument | None = None
        #: ``--plsql-answers FILE``: its digest when the run starts (the workers read it then), so
        #: two parts scored from different files of the same name are told apart.
        self.answers_digest = answers_digest(settings.answers.file) if settings.answers.file is not None else None
        #: Why the run stopped before running everything it collected (None: it ran to the end).
        self.interrupted: str | None = None
        #: Items pytest collected to run (after -k/-m deselection); None before collection ends.
        self.items_collected: int | None = None
        #: Per item under way: its node id, keywords and location, shared by its reports (``_slim``).
        self._item_parts: dict[str, tuple[str, Any, Any]] = {}
        #: One tuple of (name, value) pairs per distinct ``user_properties`` of benchmark reports.
        self._properties: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    # ----------------------------------------------------------------- run lifecycle
    @pytest.hookimpl(trylast=True)  # after the model's preflight: a usage error writes nothing
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Write the results file now, marked unfinished: a run killed before its end leaves a
        file that says so, never an earlier run's file or none."""
        if self.settings.report.results is not None:
            header = {**self.header(), "interrupted": NOT_FINISHED}
            write_document(score(ResultsFile(header, self.subset_info([]), ())), self.settings.report.results)

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        # Ctrl-C, an xdist stop (-x/--maxfail under -n, a worker interrupted), or pytest.exit().
        self.interrupted = interrupt_reason(excinfo.value)

    @pytest.hookimpl(tryfirst=True)  # before junitxml's own sessionfinish writes its file
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.items_collected = getattr(session, "testscollected", None)
        # -x / --maxfail reached at the last item stops nothing: every collected item has its record.
        ran_all = bool(self.items_collected) and len(self.records) >= int(self.items_collected or 0)
        if ran_all and (self.interrupted or "").startswith("stopped early"):  # xdist's stop
            self.interrupted = None
        elif self.interrupted is None:
            stop = session.shouldfail or session.shouldstop
            if stop and not ran_all:  # -x / --maxfail without xdist
                self.interrupted = f"stopped early: {stop} (-x/--maxfail)"
            elif exitstatus == pytest.ExitCode.INTERRUPTED:
                self.interrupted = "interrupted"
            elif exitstatus == pytest.ExitCode.INTERNAL_ERROR:
                self.interrupted = "pytest internal error"
        if self.records:
            junit.add_suite_properties(self.config, self.document())

    # ----------------------------------------------------------------- hooks
    @pytest.hookimpl(tryfirst=True)  # before junitxml, so the testcase gets our name and properties
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "plsql", None)
        if data is None:
            if report.failed and report.nodeid not in self.records:
                parsed = nodeids.parse(report.nodeid)
                if parsed is not None:
                    # e.g. a worker crashed while running the item.
                    self.records[report.nodeid] = TestOutcome(
                        subset=parsed.subset,
                        task_id=None,
                        node=parsed.node,
                        turn=parsed.turn,
                        test_id=parsed.test_id,
                        sample=parsed.sample,
                        passed=False,
                        failure_class=INFRASTRUCTURE,
                        message=_first_line(str(report.longrepr)) or "crashed",
                    )
        elif report.when != "teardown":
            # A failed setup carries the record (the call never happens); otherwise the call does.
            # In one process the record itself; from an xdist worker its plain values.
            rec = data if isinstance(data, TestOutcome) else TestOutcome.from_wire(data)
            if report.skipped:
                reason = (
                    report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr or "")
                )
                rec = rec.skipped(str(reason).removeprefix("Skipped: "))
            self.records[report.nodeid] = rec
            key = (rec.subset, str(rec.task_id))
            if rec.task is not None:
                self.task_info[key] = rec.task
            if rec.answer is not None:
                # Keyed by (sample, turn): a rerun after a worker crash reports the answer again.
                ans = rec.answer
                self.answers.setdefault(key, {})[(int(ans.get("sample") or 0), int(ans.get("turn") or 1))] = ans
            if rec.env is not None:
                self.env.update(rec.env)
        if _is_benchmark(report.nodeid):
            known = self.records.get(report.nodeid)
            junit.decorate(self.config, report, known.failure_class if known else None)
            self._slim(report)

    def _slim(self, report: pytest.TestReport) -> None:
        """Keep a benchmark item's reports small: pytest keeps every report of the run (three per
        item) to the end, and an xdist controller gets each as fresh objects.

        The record, now in :attr:`records`, leaves the report; the item's keywords and location
        are one object for its three reports; equal ``user_properties`` (the same for most items
        of a task) share their (name, value) pairs, each report keeping a list of its own.
        Read-only sharing: junitxml and the terminal read these, no one changes them after this
        hook.
        (The ``-n 2`` controller's peak on the dev MBPP+ set: 429 MB before, about 250 MB after.)
        """
        if not isinstance(report, pytest.TestReport):
            return
        report.__dict__.pop("plsql", None)
        nodeid = report.nodeid
        first = self._item_parts.get(nodeid)
        if first is None:
            self._item_parts[nodeid] = (nodeid, report.keywords, report.location)
        else:
            shared_id, keywords, location = first
            if "nodeid" in report.__dict__:
                # A plain string: one for the three reports. (pytest 9.2 keeps a parsed id behind
                # a property instead, which setting would only parse again.)
                report.nodeid = shared_id
            if report.keywords == keywords:
                report.keywords = keywords
            if report.location == location:
                report.location = location
        if report.when == "teardown":
            self._item_parts.pop(nodeid, None)
        key = tuple(report.user_properties)
        if all(type(p) is tuple for p in key):
            try:
                report.user_properties = list(self._properties.setdefault(key, key))
            except TypeError:  # a value that cannot be a key (a plugin's own property): kept as it is
                pass

    # ----------------------------------------------------------------- results
    def results(self) -> list[TaskResult]:
        """The run's task results so far (all samples of a task in one), in the order they came."""
        by_node = {(r.subset, r.node): r.task_id for r in self.records.values() if r.task_id}
        grouped: dict[tuple[str, str], list[TestOutcome]] = {}
        for nodeid, rec in self.records.items():
            if rec.task_id is None:  # a crashed item: its task's id from its siblings, else the node
                rec = self.records[nodeid] = dataclasses.replace(rec, task_id=by_node.get((rec.subset, rec.node), rec.node))
            grouped.setdefault((rec.subset, str(rec.task_id)), []).append(rec)
        return [
            TaskResult.of(recs, self.task_info.get(key), unique_answers(self.answers.get(key, {}).values()))
            for key, recs in grouped.items()
        ]

    def document(self) -> ScoredDocument:
        """The versioned results document (``--plsql-results``), scored once."""
        if self._document is None:
            tasks = self.results()
            self._document = score(ResultsFile(self.header(tasks), self.subset_info(tasks), tuple(tasks)))
        return self._document

    def subset_info(self, tasks: Sequence[TaskResult]) -> dict[str, dict[str, Any]]:
        """Per-subset facts the report needs later without the manifests: paper mapping, metric family."""
        out = {}
        for subset in dict.fromkeys([*self.settings.tasks.subsets, *(t.subset for t in tasks)]):
            manifest = self.manifests.get(subset)
            out[subset] = {
                "paper": dict(manifest.paper) if manifest is not None else {},
                "description": manifest.description if manifest is not None else "",
                "metric_family": manifest.metrics if manifest is not None else None,
            }
        return out

    def header(self, tasks: Sequence[TaskResult] = ()) -> dict[str, Any]:
        s = self.settings
        from ..collect import keep_constant_tasks

        header = {
            "plugin_version": __version__,
            "python": platform.python_version(),
            "dialect": s.database.dialect,
            "database": s.database.kind,
            "database_version": self.env.get("db_version"),
            "model": s.answer_source,
            "temperature": s.model.temperature,
            "max_tokens": s.model.max_tokens,
            "samples": s.model.samples,
            "assertions": s.tasks.assertions,
            "timeout_s": s.database.timeout,
            "task_timeout_s": s.database.task_timeout,
            "max_output": s.database.max_output,
            "missing": s.answers.missing,
            "safety": s.database.safety,
            "shard": f"{s.tasks.shard[0]}/{s.tasks.shard[1]}" if s.tasks.shard else None,
            # --plsql-limit: a seeded sample of each subset's tasks (None: every task).
            "limit": s.tasks.limit,
            "seed": s.tasks.seed if s.tasks.limit is not None else None,
            "keyword": self.config.getoption("keyword", "") or None,
            "markexpr": self.config.getoption("markexpr", "") or None,
            "subsets": list(s.tasks.subsets),
            # Tasks a constant or an empty answer passes are left out unless this is true (every
            # family's: collect.py applies it to each task's tests).
            "keep_constant_tasks": keep_constant_tasks(self.config),
            "data_revisions": data_revisions(s, tasks, self.manifests),
            **({"answers_digest": self.answers_digest} if s.answers.file is not None else {}),
            "started": self.started.isoformat(timespec="seconds"),
            "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "interrupted": self.interrupted,
            "items_collected": self.items_collected,
            # Where a run's full answers are: each answer's ``code`` is the exact text that ran
            # (``plsqlbench answers export`` writes them as an answers file).
            "answer_code": "exact",
        }
        from ..generation import is_real_model, resolve_model, runtime_info
        from ..generation.prompts import system_prompt

        try:  # the same for every task of the dialect; each task keeps its own user messages
            header["system_prompt"] = system_prompt(s.database.dialect)
        except ValueError:
            header["system_prompt"] = None

        if s.answers.file is None and is_real_model(s.model.name):
            # Which model an alias meant, and whose cost data priced it (litellm's bundled map).
            header["model_resolved"] = resolve_model(str(s.model.name), s.model.aliases)
            header.update(runtime_info())
        return header

    def write(self, path: Path) -> None:
        write_document(self.document(), path)




def interrupt_reason(exc: BaseException) -> str:
    """The header's ``interrupted`` for what ended the run early."""
    text = str(exc).strip()
    if type(exc) is KeyboardInterrupt:
        return "interrupted by the user (Ctrl-C)"
    if isinstance(exc, KeyboardInterrupt):  # pytest's/xdist's Interrupted: a stop they decided
        if "keyboard-interrupt" in text:
            return f"interrupted by the user (Ctrl-C): {text}"
        return f"stopped early: {text}" + (" (-x/--maxfail)" if "failure" in text else "")
    return f"stopped: {text}" if text else "stopped"


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""

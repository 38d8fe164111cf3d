"""The pytest plugin: options, collection of benchmark items, results on the controller.

Nothing happens unless ``--subset`` is given, so installing the plugin changes no other
project's test run.
"""

from __future__ import annotations

import difflib
import gc
import logging
import os
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import pytest

from . import concise, families, hooks, judges, wire
from .collect import (
    HARNESS_KEY,
    Harness,
    PlsqlItem,
    build_items,
    check_kinds,
    make_record,
    scope_of,
    subset_marker,
    task_markers,
)
from .errors import PlsqlBenchError, UsageError
from .manifests import Manifest, discover, run_dialect
from .registry import Registry, load_plugins, use
from .results import ResultsCollector
from .results.record import TestOutcome
from .settings import Settings, add_options, dialect_given, source_variable
from .state import SETTINGS_KEY, get_settings, is_active, worker_count, worker_id
from .summary import summary_lines
from .tasks import Task

log = logging.getLogger(__name__)

TASKS_KEY = pytest.StashKey[dict[str, tuple[Path | None, list[Task]]]]()
#: Every manifest the run can see, read once (``--plsql-tasks`` folders included).
MANIFESTS_KEY = pytest.StashKey[dict[str, Manifest]]()
RESULTS_KEY = pytest.StashKey[ResultsCollector]()
REGISTRY_KEY = pytest.StashKey[Registry]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hooks)
    # Our own group, whether or not pytest autoloads plugins (PYTEST_DISABLE_PLUGIN_AUTOLOAD).
    load_plugins(pluginmanager)


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    add_options(parser, pluginmanager)


def registry_of(config: pytest.Config) -> Registry:
    """The run's registry: what the plug-ins (entry points, conftests) registered, asked once."""
    registry = config.stash.get(REGISTRY_KEY, None)
    if registry is None:
        try:
            registry = config.stash[REGISTRY_KEY] = use(Registry.from_plugins(config.pluginmanager))
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    return registry


def _known_manifests(config: pytest.Config, settings: Settings) -> dict[str, Manifest]:
    """The manifests, discovered once per run and kept in the stash."""
    known = config.stash.get(MANIFESTS_KEY, None)
    if known is None:
        try:
            known = discover(settings.tasks.dirs)
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
        config.stash[MANIFESTS_KEY] = known
    return known


def _settings(config: pytest.Config) -> Settings:
    """The run's settings. Without a dialect named, subsets that exist only for Oracle
    (Spider2-ST/MT) run in Oracle rather than failing on the postgres default."""
    registry = registry_of(config)
    try:
        settings = Settings.from_config(config, registry)
        if settings.tasks.subsets and not dialect_given(config):
            known = _known_manifests(config, settings)
            dialect = run_dialect([known[s] for s in settings.tasks.subsets if s in known], settings.database.dialect)
            if dialect != settings.database.dialect:
                settings = Settings.from_config(config, registry, dialect=dialect)
        return settings
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def _manifests(config: pytest.Config, settings: Settings) -> list[Manifest]:
    known = _known_manifests(config, settings)
    unknown = [s for s in settings.tasks.subsets if s not in known]
    if unknown:
        raise pytest.UsageError(
            f"unknown subset(s) {', '.join(unknown)}; known subsets: {', '.join(sorted(known))}"
        )
    chosen = [known[s] for s in settings.tasks.subsets]
    _check_source_names(config, known, settings)
    families.register(registry_of(config).families.values())
    for manifest in chosen:
        if settings.database.dialect not in manifest.dialects:
            raise pytest.UsageError(
                f"subset {manifest.name!r} exists only for {', '.join(manifest.dialects)}, "
                f"not for --plsql-dialect={settings.database.dialect}"
            )
        try:
            families.of_manifest(manifest)
        except UsageError as exc:
            raise pytest.UsageError(f"{manifest.path}: {exc}") from None
    return chosen


def _check_source_names(config: pytest.Config, known: dict[str, Manifest], settings: Settings) -> None:
    """``--plsql-source NAME=PATH`` for a name no manifest uses would be ignored, and the run
    would download the data or fail elsewhere: one line naming the known sources instead."""
    names = sorted({m.source.name for m in known.values() if m.source is not None})
    unknown = [n for n in settings.data.sources if n not in names]
    if unknown:
        hints = [f"{n!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(n, names, 1)) else repr(n)
                 for n in unknown]
        raise pytest.UsageError(
            f"--plsql-source: no subset's manifest has a data source named {', '.join(hints)}; "
            f"the sources are: {', '.join(names)} (names, not subsets: see 'plsqlbench subsets')"
        )
    expected = {source_variable(n) for n in names}
    for var in sorted(os.environ):
        if var.upper().startswith("PLSQLBENCH_SOURCE_") and var not in expected:
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(
                    f"{var} names no data source of the known manifests and is ignored; "
                    f"the variables are {', '.join(sorted(expected))} (upper case, '-' as '_')"
                ),
                stacklevel=2,
            )


def load_all_tasks(config: pytest.Config, settings: Settings) -> dict[str, tuple[Path | None, list[Task]]]:
    """Every task of the chosen subsets in the run's dialect."""
    out: dict[str, tuple[Path | None, list[Task]]] = {}
    registry = judges.registry(config)
    for manifest in _manifests(config, settings):
        try:
            tasks = config.hook.pytest_plsql_load_subset(config=config, manifest=manifest, settings=settings)
            if tasks is not None:
                tasks = list(tasks)
                for task in tasks:
                    check_kinds(task, registry)
        except PlsqlBenchError as exc:
            raise pytest.UsageError(str(exc)) from None
        if tasks is None:
            raise pytest.UsageError(
                f"subset {manifest.name!r}: no installed plugin loads manifests with loader {manifest.loader!r}"
            )
        _check_unique(manifest.name, tasks)
        out[manifest.name] = (manifest.path, list(tasks))
    return out


def _check_unique(subset: str, tasks: Sequence[Task]) -> None:
    """A task id twice in the data (a file concatenated with itself, say) would run and be
    scored twice, and its items would share node ids: one line instead."""
    seen: set[str] = set()
    twice: list[str] = []
    for task in tasks:
        keys = {task.id, task.node_name}  # two ids may also meet in one node name
        if keys & seen:
            twice.append(task.id)
        seen |= keys
    if twice:
        shown = ", ".join(dict.fromkeys(twice[:5])) + (", ..." if len(set(twice)) > 5 else "")
        raise pytest.UsageError(
            f"subset {subset!r}: the data holds {len(set(twice))} task id(s) more than once ({shown}); "
            "each task must appear once (a source file concatenated with itself?)"
        )


def select_tasks(
    out: dict[str, tuple[Path | None, list[Task]]], settings: Settings
) -> dict[str, tuple[Path | None, list[Task]]]:
    """The run's tasks: narrowed by --plsql-task, sampled by --plsql-limit, then sharded if asked
    (every shard of a limited run samples the same tasks, so the shards partition that sample)."""
    if settings.tasks.ids:
        out = _only_tasks(out, settings.tasks.ids)
    if settings.tasks.limit is not None:
        out = {s: (p, sample_tasks(ts, settings.tasks.limit, settings.tasks.seed, s)) for s, (p, ts) in out.items()}
    if settings.tasks.shard:
        index, count = settings.tasks.shard
        ordered = sorted((subset, t.id) for subset, (_, ts) in out.items() for t in ts)
        keep = {key for n, key in enumerate(ordered) if n % count == index - 1}
        out = {s: (p, [t for t in ts if (s, t.id) in keep]) for s, (p, ts) in out.items()}
    return out


def sample_tasks(tasks: Sequence[Task], limit: int | float, seed: int, subset: str) -> list[Task]:
    """``--plsql-limit``: a random sample of ``limit`` tasks (a count, or a share of them), drawn
    with ``seed`` and the subset's name from the tasks in id order -- the same whatever order the
    loader gave them in -- and returned in their original order."""
    import math
    import random

    count = limit if isinstance(limit, int) else max(1, math.ceil(limit * len(tasks)))
    if count >= len(tasks):
        return list(tasks)
    ordered = sorted(tasks, key=lambda t: t.id)
    chosen = {id(t) for t in random.Random(f"{seed}:{subset}").sample(ordered, count)}
    return [t for t in tasks if id(t) in chosen]


def _only_tasks(
    tasks: dict[str, tuple[Path | None, list[Task]]], wanted: tuple[str, ...]
) -> dict[str, tuple[Path | None, list[Task]]]:
    """``--plsql-task``: keep the tasks named exactly (id or node name); unknown names are an error."""
    names = set(wanted)
    out = {s: (p, [t for t in ts if t.id in names or t.node_name in names]) for s, (p, ts) in tasks.items()}
    found = {n for _, ts in out.values() for t in ts for n in (t.id, t.node_name)}
    unknown = [w for w in wanted if w not in found]
    if unknown:
        import difflib

        every = sorted({t.id for _, ts in tasks.values() for t in ts})
        hints = []
        for name in unknown[:5]:
            close = difflib.get_close_matches(name, every, n=1)
            hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
        raise pytest.UsageError(
            f"--plsql-task: no task {', '.join(hints)}{' ...' if len(unknown) > 5 else ''} in subset(s) "
            f"{', '.join(tasks)}"
        )
    return out


def check_answer_ids(config: pytest.Config, answers: Any, tasks: dict[str, tuple[Path | None, list[Task]]]) -> None:
    """Entries of ``--plsql-answers`` that match no task are named: all of them is an error
    (ids written another way, another subset's file), some of them a warning."""
    ids: dict[str | None, set[str]] = {}
    for subset, (_, ts) in tasks.items():
        ids[subset] = {t.id for t in ts}
    every = set().union(*ids.values()) if ids else set()
    unmatched = sorted(
        {f"{sub + '/' if sub else ''}{tid}" for sub, tid, _ in answers.keys()
         if tid not in (ids.get(sub, set()) if sub else every)}
    )
    if not unmatched:
        return
    by_node = {t.node_name: t.id for _, ts in tasks.values() for t in ts}
    hints = [f"{u} (the task id is {by_node[u]})" if u in by_node else u for u in unmatched[:5]]
    shown = ", ".join(hints) + (f" ... (+{len(unmatched) - 5})" if len(unmatched) > 5 else "")
    if len(unmatched) == len({(sub, tid) for sub, tid, _ in answers.keys()}):
        raise pytest.UsageError(
            f"--plsql-answers {get_settings(config).answers.file}: no entry matches a task of subset(s) "
            f"{', '.join(tasks)}: {shown}"
        )
    config.issue_config_time_warning(
        pytest.PytestConfigWarning(
            f"--plsql-answers: {len(unmatched)} entr{'y matches' if len(unmatched) == 1 else 'ies match'} no task of "
            f"subset(s) {', '.join(tasks)} and are not scored: {shown}"
        ),
        stacklevel=2,
    )


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """``--plsql-show-prompt TASK_ID``: print the exact messages and stop."""
    if not config.getoption("plsql_show_prompt", None):
        return None
    settings = _settings(config)
    if not settings.tasks.subsets:
        raise pytest.UsageError("--plsql-show-prompt needs --subset to know where TASK_ID is")
    config.stash[SETTINGS_KEY] = settings
    wanted = settings.answers.show_prompt
    for _, tasks in load_all_tasks(config, settings).values():
        for task in tasks:
            if wanted in (task.id, task.node_name):
                from .generation.prompts import render_prompt

                print(render_prompt(task))
                return 0
    raise pytest.UsageError(f"--plsql-show-prompt: no task {wanted!r} in subset(s) {', '.join(settings.tasks.subsets)}")


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("plsql_subset", None):
        return  # inert: not even the plugin's ini keys are read without --subset
    settings = _settings(config)
    config.stash[SETTINGS_KEY] = settings
    if not settings.tasks.subsets:
        return
    registry = registry_of(config)
    for line in (
        "plsql: a PL/SQL benchmark item (pytest-plsqlbench)",
        "singleturn: item of a single-turn benchmark task",
        "multiturn: item of a multi-turn benchmark task",
        *(f"dialect_{name}: item run in {d.label}" for name, d in sorted(registry.dialects.items())),
    ):
        config.addinivalue_line("markers", line)
    # Listing markers or collecting needs no answers.
    collect_only = config.getoption("collectonly", False) or config.getoption("markers", False)
    if settings.model.name is None and settings.answers.file is None and not collect_only:
        raise pytest.UsageError(
            "--subset needs answers: --plsql-model=reference (the reference answers), "
            "--plsql-model=<litellm model or alias>, or --plsql-answers=FILE.jsonl"
        )
    if settings.answers.file is not None and not collect_only:
        # Validate the whole file up front: one error naming file and line, before any task runs.
        from .answers import AnswersFile
        from .builtin_answers import ANSWERS_FILE_KEY

        try:
            config.stash[ANSWERS_FILE_KEY] = AnswersFile(settings.answers.file)
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    every_task = load_all_tasks(config, settings)
    tasks = select_tasks(every_task, settings)
    config.stash[TASKS_KEY] = tasks
    if settings.answers.file is not None and not collect_only and getattr(config, "workerinput", None) is None:
        from .builtin_answers import ANSWERS_FILE_KEY

        # Against every task of the chosen subsets, not just this shard's or --plsql-task's.
        check_answer_ids(config, config.stash[ANSWERS_FILE_KEY], every_task)
    known = {m.split(":")[0] for m in config.getini("markers")}
    for _, ts in tasks.values():
        for task in ts:
            for mark in task_markers(task):
                if mark not in known:
                    what = f"item of subset {task.subset}" if mark == subset_marker(task.subset) else "benchmark task marker"
                    config.addinivalue_line("markers", f"{mark}: {what}")
                    known.add(mark)
    runnable = any(t.not_runnable is None for _, ts in tasks.values() for t in ts)
    if getattr(config, "workerinput", None) is None and not collect_only and runnable:
        # Before any worker starts (and before a model is asked): a database this run cannot
        # have is one usage error, not an infrastructure error per item.
        try:
            registry.dialect(settings.database.dialect).preflight(settings.database)
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    if getattr(config, "workerinput", None) is None:
        collector = ResultsCollector(config, settings, _known_manifests(config, settings))
        config.stash[RESULTS_KEY] = collector
        config.pluginmanager.register(collector, "plsqlbench-results")
        if not collect_only:
            from .runprogress import register as register_progress

            register_progress(config, settings.report.progress)
    config.stash[HARNESS_KEY] = Harness(config, settings)
    if settings.model.name not in (None, "reference") or settings.answers.file:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    _freeze_heap()


def _freeze_heap() -> None:
    """Move what the run keeps to its end (tasks, then items: millions of objects on MBPP+) out of
    the cyclic garbage collector's sight; each full collection walked all of them again."""
    gc.freeze()


def pytest_unconfigure(config: pytest.Config) -> None:
    harness = config.stash.get(HARNESS_KEY, None)
    if harness is not None:
        harness.close()


@pytest.hookimpl(trylast=True)
def pytest_plsql_make_backend(config: pytest.Config, settings: Settings):  # noqa: ANN201
    return registry_of(config).dialect(settings.database.dialect).make_backend(settings, worker_id(config))


def pytest_ignore_collect(config: pytest.Config) -> bool | None:
    """A benchmark run collects only benchmark items unless test paths were given explicitly."""
    if is_active(config) and config.args_source != pytest.Config.ArgsSource.ARGS:
        return True
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if not is_active(config):
        return
    new = build_items(config, session, config.stash[TASKS_KEY])
    items.extend(new)
    # Let the terminal reporter count them ("collected N items").
    parents: list[tuple[PlsqlItem, pytest.Collector]] = []
    for i in new:
        if isinstance(i, PlsqlItem) and i.task_node.parent is not None:
            parents.append((i, i.task_node.parent))
    for subset in {parent for _, parent in parents}:
        session.ihook.pytest_collectreport(
            report=pytest.CollectReport(subset.nodeid, "passed", None, [i for i, parent in parents if parent is subset])
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if not is_active(config) or config.getoption("collectonly", False):
        return
    _freeze_heap()
    tasks = {id(i.task_node.task): i.task_node.task for i in session.items if isinstance(i, PlsqlItem)}
    runnable = [t for t in tasks.values() if t.not_runnable is None]
    if runnable:  # never pay for answers to tasks that will be skipped
        config.hook.pytest_plsql_prefetch(config=config, tasks=runnable)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tasks the data at hand cannot run are collected (they belong to the subset) but skipped
    with the loader's reason, before any answer is asked for or any database is touched."""
    if isinstance(item, PlsqlItem):
        why = item.task_node.task.not_runnable
        if why:
            pytest.skip(f"not runnable: {why}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if isinstance(item, PlsqlItem) and call.when in ("setup", "call") and not (call.when == "setup" and report.passed):
        # The record object itself: turned into plain values only if the report is serialised
        # (xdist, report logs: below), not for every item of a run in one process.
        record = report.plsql = make_record(item, call.when, call.excinfo)
        # JUnit XML reads properties from the item (its teardown report), not this report.
        item.user_properties[:] = [p for p in item.user_properties if p[0] != "failure_class"]
        item.user_properties.append(("failure_class", record.failure_class))
        report.user_properties = list(item.user_properties)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(config: pytest.Config, report: Any) -> Generator[None, Any, Any]:
    """A benchmark item's record leaves as plain values; on an xdist worker the report's small
    parts are packed too (``wire``)."""
    data = yield
    if isinstance(data, dict) and isinstance(data.get("plsql"), TestOutcome):
        data["plsql"] = data["plsql"].to_wire()
    if isinstance(data, dict) and getattr(config, "workerinput", None) is not None and is_active(config):
        wire.pack(data)
    return data


@pytest.hookimpl(wrapper=True)
def pytest_report_from_serializable(config: pytest.Config, data: Any) -> Generator[None, Any, Any]:
    """The parts a worker packed are back in place before pytest rebuilds the report."""
    if isinstance(data, dict):
        wire.unpack(data)
    return (yield)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Keep each task's items on one worker (its answer is installed once there)."""
    if not is_active(config) or config.getoption("dist", "load") in ("each", "no"):
        return None
    from .scheduler import TaskScheduling

    return TaskScheduling(config, log)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    collector = config.stash.get(RESULTS_KEY, None)
    if collector is None or not collector.records:
        return
    document = collector.document()
    if concise.is_concise(config):
        failures = concise.failure_lines(document, error_width=concise.ERROR_LINE_WIDTH)
        if failures:
            terminalreporter.write_sep(
                "=", f"PLSQLBench failures: {len(failures)} task turn(s) (-v or --tb=short: every failing test)"
            )
            for line in failures:
                terminalreporter.write_line(line)
    stopped = " (INTERRUPTED: not the benchmark's figures)" if document["header"].get("interrupted") else ""
    terminalreporter.write_sep("=", f"PLSQLBench summary{stopped}")
    for line in summary_lines(document, config.get_verbosity()):
        terminalreporter.write_line(line)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    collector = config.stash.get(RESULTS_KEY, None)
    if collector is None:
        return
    settings = get_settings(config)
    if not collector.records and settings.report.results is None:
        return
    # Written even when nothing ran (an empty shard, a -k that selects nothing): merges need it.
    document = collector.document()
    config.hook.pytest_plsql_results(config=config, results=document)
    if settings.report.results is not None:
        collector.write(settings.report.results)


__all__ = ["scope_of", "worker_count"]

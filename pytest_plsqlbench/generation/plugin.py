"""The generation hooks: answers from any litellm model, cached, prefetched, with progress.

Both hookimpls are ``trylast``, so a conftest or plugin implementing ``pytest_plsql_generate``
wins, and both step aside (return None / do nothing) for ``--plsql-answers``, ``reference`` or no
model -- the core's built-in answer sources handle those. Registered by the core plugin
(``pytest_plsqlbench.plugin``); every hook here is safe to receive late (``pytest_configure`` is
historic) and does nothing unless a run with a real model is configured.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from .. import state
from ..answers import Answer, Exchange
from ..errors import UsageError
from ..runprogress import terminal_writer
from ..settings import Settings
from ..tasks import Task
from .cache import AnswerCache
from .client import ModelClient
from .models import is_real_model, resolve_model
from .prefetch import Prefetcher, worker_index
from .progress import ProgressReporter, ProgressWriter, progress_dir, prune_stale
from .service import AnswerService

log = logging.getLogger(__name__)


@dataclass
class Generation:
    """Per-process generation state, kept on ``config.stash``."""

    settings: Settings
    model: str
    run_id: str
    cache: AnswerCache
    service: AnswerService
    prefetcher: Prefetcher | None = None
    reporter: ProgressReporter | None = None


#: Where pydantic warns about the TypedDicts litellm declares (see _setup).
PYDANTIC_SCHEMA_MODULE = "pydantic._internal._generate_schema"
GENERATION_KEY = pytest.StashKey[Generation]()
RUN_ID_KEY = pytest.StashKey[str]()
_SETUP_KEY = pytest.StashKey[bool]()


def model_settings(config: pytest.Config) -> Settings | None:
    """The run's settings if answers come from a real model through this layer, else None."""
    if state.SETTINGS_KEY not in config.stash:
        return None
    settings = state.get_settings(config)
    if settings.answers.file is not None or not is_real_model(settings.model.name):
        return None
    return settings


def cache_root(config: pytest.Config, settings: Settings) -> Path:
    """``--plsql-cache`` resolved against the invocation directory (the same on every worker)."""
    root = settings.answers.cache.expanduser()
    return root if root.is_absolute() else Path(config.invocation_params.dir) / root


def run_id(config: pytest.Config) -> str:
    """The id shared by every process of this run (xdist's ``testrunuid``)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput and workerinput.get("testrunuid"):
        return str(workerinput["testrunuid"])
    if RUN_ID_KEY not in config.stash:
        config.stash[RUN_ID_KEY] = getattr(config.option, "testrunuid", None) or uuid.uuid4().hex
    return config.stash[RUN_ID_KEY]


def generation(config: pytest.Config, settings: Settings) -> Generation:
    """This process's :class:`Generation`, created on first use."""
    if GENERATION_KEY in config.stash:
        return config.stash[GENERATION_KEY]
    model = resolve_model(settings.model.name or "", settings.model.aliases)
    cache = AnswerCache(cache_root(config, settings))

    def make_client() -> ModelClient:
        return ModelClient(
            model,
            api_base=settings.model.api_base,
            temperature=settings.model.temperature,
            max_tokens=settings.model.max_tokens,
            timeout=settings.model.request_timeout,
            retries=settings.model.retries,
            price=settings.model.price,
        )

    service = AnswerService(
        model=model,
        cache=cache,
        run_id=run_id(config),
        client_factory=make_client,
        temperature=settings.model.temperature,
        max_tokens=settings.model.max_tokens,
        concurrency=settings.model.concurrency,
        cache_only=settings.answers.cache_only,
        regenerate=settings.answers.regenerate,
    )
    gen = Generation(settings=settings, model=model, run_id=service.run_id, cache=cache, service=service)
    config.stash[GENERATION_KEY] = gen
    return gen


# ---------------------------------------------------------------------------------------- hooks
@pytest.hookimpl(trylast=True)
def pytest_plsql_generate(
    config: pytest.Config, task: Task, turn: int, history: Sequence[Exchange], sample: int
) -> Answer | None:
    settings = model_settings(config)
    if settings is None:
        return None
    return generation(config, settings).service.obtain(task, turn, tuple(history), sample)


@pytest.hookimpl(trylast=True)
def pytest_plsql_prefetch(config: pytest.Config, tasks: Sequence[Task]) -> None:
    settings = model_settings(config)
    # Answers played on the worker against its database (an interactive episode) are not prefetched.
    tasks = [t for t in tasks if t.prefetch]
    if settings is None or not tasks:
        return
    gen = generation(config, settings)
    if gen.prefetcher is not None:
        return
    wid = state.worker_id(config)
    count = state.worker_count(config)
    index = worker_index(wid)
    prefetcher = Prefetcher(
        gen.service, tasks, samples=settings.model.samples, concurrency=settings.model.concurrency,
        worker_index=index, worker_count=count, steal=not settings.answers.cache_only,
        controller_alive=controller_alive(config, gen),
    )
    prefetcher.progress = ProgressWriter(
        progress_dir(gen.cache.root, gen.run_id) / f"{wid}.json", wid, prefetcher.own_total,
        len(tasks) * settings.model.samples,
    )
    gen.prefetcher = prefetcher.start()
    log.info("%s: prefetching %d of %d tasks with %s (concurrency %d)", wid, prefetcher.own_total,
             len(tasks) * settings.model.samples, gen.model, settings.model.concurrency)


#: In the run's progress folder: the controller was interrupted (Ctrl-C); workers stop generating.
STOPPED_FILE = "controller-stopped"


def controller_alive(config: pytest.Config, gen: Generation) -> Callable[[], bool]:
    """False once the controller of this run stopped: it wrote :data:`STOPPED_FILE` on Ctrl-C, or
    (an xdist worker) the process that started this one is gone."""
    marker = progress_dir(gen.cache.root, gen.run_id) / STOPPED_FILE
    parent = os.getppid() if state.worker_count(config) > 1 else None

    def alive() -> bool:
        return not marker.exists() and (parent is None or os.getppid() == parent)

    return alive


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Ctrl-C on the controller: tell the workers (which xdist lets finish the tests queued for
    them) to start no new model request and to run no further test."""
    config = _CONFIG.get("config")
    gen = config.stash.get(GENERATION_KEY, None) if config is not None else None
    if gen is None or getattr(config, "workerinput", None) is not None:
        return
    folder = progress_dir(gen.cache.root, gen.run_id)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / STOPPED_FILE).write_text("interrupted\n", encoding="utf-8")
    except OSError as exc:
        log.debug("cannot tell the workers the run stopped: %s", exc)
    if gen.prefetcher is not None:
        gen.prefetcher.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A worker whose controller stopped runs no further test (each would need an answer)."""
    gen = item.config.stash.get(GENERATION_KEY, None)
    if gen is None or gen.prefetcher is None or gen.prefetcher.controller_alive():
        return
    gen.prefetcher.stop()
    item.session.shouldstop = "the run was interrupted on the controller"
    pytest.skip("not run: the run was interrupted (Ctrl-C)")


#: The config of this process, for hooks pytest calls without one (pytest_keyboard_interrupt).
_CONFIG: dict[str, pytest.Config] = {}


def _setup(config: pytest.Config) -> None:
    """Idempotent per-process setup once settings exist (configure may run before the core's).

    litellm is not imported here: the first answer missing from the cache imports it, so
    collection, cached and cache-only runs never pay for the import.
    """
    settings = model_settings(config)
    if settings is None or config.stash.get(_SETUP_KEY, False):
        return
    config.stash[_SETUP_KEY] = True
    # litellm builds pydantic schemas lazily, on its first calls inside a test item, where
    # pytest records each warning: ~130 "ReadOnly qualifier" lines per worker that say nothing
    # about the run. An ini filter is what pytest applies inside every item.
    config.addinivalue_line("filterwarnings", f"ignore::UserWarning:{PYDANTIC_SCHEMA_MODULE}")
    if state.is_xdist_controller(config) and getattr(config.option, "testrunuid", None) is None:
        # Workers take xdist's testrunuid; fixing it here lets the controller find their progress.
        config.option.testrunuid = uuid.uuid4().hex


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG["config"] = config
    _setup(config)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    _setup(config)
    settings = model_settings(config)
    if settings is None or settings.answers.show_prompt or getattr(config, "workerinput", None) is not None:
        return
    # As pytest's live logging does: with -n 0 a line is written while a test's setup waits for
    # its answer, and would otherwise land in that test's captured output.
    write = terminal_writer(config)

    gen = generation(config, settings)
    if not config.getoption("collectonly", False) and not settings.answers.cache_only:
        _preflight(config, settings, gen)
    prune_stale(gen.cache.root)
    gen.reporter = ProgressReporter(progress_dir(gen.cache.root, gen.run_id), write).start()


def _preflight(config: pytest.Config, settings: Settings, gen: Generation) -> None:
    """Stop before any test runs when the model cannot be called (see preflight.py)."""
    from ..plugin import TASKS_KEY
    from .preflight import preflight

    tasks = [
        t for _, ts in config.stash.get(TASKS_KEY, {}).values() for t in ts
        if t.not_runnable is None and t.prefetch
    ]
    try:
        preflight(config, gen.service, tasks, name=settings.model.name or "", model=gen.model,
                  api_base=settings.model.api_base, overrides=settings.model.aliases, samples=settings.model.samples)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Quiet the progress line before the terminal summary is written."""
    gen = session.config.stash.get(GENERATION_KEY, None)
    if gen is not None and gen.reporter is not None:
        gen.reporter.stop(cleanup=False)


def pytest_unconfigure(config: pytest.Config) -> None:
    gen = config.stash.get(GENERATION_KEY, None)
    if gen is None:
        return
    if gen.prefetcher is not None:
        gen.prefetcher.stop()
        if gen.prefetcher.progress is not None:
            gen.prefetcher.progress.flush()
    if gen.reporter is not None:
        gen.reporter.stop(cleanup=True)

"""Interactive mode in a pytest run: options, and the episode hook that plays Interactive tasks.

For a task of an Interactive subset (``options.mode: interactive``) the answer is what the
Solver submits at the end of an episode: ``pytest_plsql_episode`` returns an
:class:`~.episode.InteractiveEpisode`, which the task node's setup plays on the worker that owns
the database (the episode needs its scratch copy), with the generation layer's client,
concurrency limit and cache directory. ``--plsql-model=reference`` submits gold
at once (budget 0); ``--plsql-answers`` scores the file's answers as submissions (no episode).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from ...answers import Answer
from ...episode import Episode
from ...errors import UsageError
from ...state import SETTINGS_KEY, get_settings
from ...tasks import Task
from .budget import MAX_STEPS, parse_prices, parse_rule
from .episode import EpisodeRecord, InteractiveEpisode, Protocol, answer_of

if TYPE_CHECKING:
    from .cache import Stored
from .tasks import is_interactive
from .tools import OUTPUT_LIMIT

SIMULATORS = ("ledger", "model")


@dataclasses.dataclass(frozen=True)
class Options:
    protocol: Protocol
    simulator: str
    simulator_model: str | None


OPTIONS_KEY = pytest.StashKey[Options]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("plsqlbench")
    group.addoption("--plsql-simulator", dest="plsql_simulator", default=None, choices=SIMULATORS,
                    help="ProcArena Interactive: the User Simulator. 'ledger' (default) matches questions to "
                    "the task's ledger by keywords, no model; 'model' uses --plsql-simulator-model.")
    group.addoption("--plsql-simulator-model", dest="plsql_simulator_model", default=None, metavar="MODEL",
                    help="ProcArena Interactive: the fixed litellm model that plays the user (implies "
                    "--plsql-simulator=model).")
    group.addoption("--plsql-budget", dest="plsql_budget", default=None, metavar="paper|records|B,P,T",
                    help="ProcArena Interactive budget = BASE + PER_ENTRY x |ledger| + PATIENCE: 'paper' "
                    "(6,2,3, default), 'records' (14,2,6) or three numbers.")
    group.addoption("--plsql-max-steps", dest="plsql_max_steps", default=None, type=int, metavar="N",
                    help=f"ProcArena Interactive: at most N actions per episode (default {MAX_STEPS}).")
    group.addoption("--plsql-tool-costs", dest="plsql_tool_costs", default=None, metavar="TOOL=COST[,...]",
                    help="ProcArena Interactive: override prices of the price list (docs/procarena-interactive.md).")
    group.addoption("--plsql-tool-output", dest="plsql_tool_output", default=None, type=int, metavar="CHARS",
                    help=f"ProcArena Interactive: cut tool results to CHARS characters (default {OUTPUT_LIMIT}).")


def read_options(config: pytest.Config) -> Options:
    if OPTIONS_KEY in config.stash:
        return config.stash[OPTIONS_KEY]
    opt = config.getoption
    steps = opt("plsql_max_steps") or MAX_STEPS
    limit = opt("plsql_tool_output") or OUTPUT_LIMIT
    if steps < 1 or limit < 100:
        raise UsageError("--plsql-max-steps must be >= 1 and --plsql-tool-output >= 100")
    model = opt("plsql_simulator_model")
    kind = opt("plsql_simulator") or ("model" if model else "ledger")
    if kind == "model" and not model:
        raise UsageError("--plsql-simulator=model needs --plsql-simulator-model=MODEL (a litellm model string)")
    if kind == "ledger":
        model = None
    protocol = Protocol(rule=parse_rule(opt("plsql_budget")), prices=parse_prices(opt("plsql_tool_costs")),
                        max_steps=steps, output_limit=limit)
    config.stash[OPTIONS_KEY] = Options(protocol, kind, model)
    return config.stash[OPTIONS_KEY]


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    try:
        read_options(config)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


# --------------------------------------------------------------------------- answers
def reference_record(task: Task, protocol: Protocol, ledger_size: int) -> EpisodeRecord:
    """What ``--plsql-model=reference`` plays: submit gold at once."""
    gold = task.turns[0].reference or ""
    rec = EpisodeRecord(task_id=task.id, subset=task.subset, solver="reference", simulator={"kind": "none"},
                        ledger_size=ledger_size, budget_limit=protocol.rule.limit(ledger_size),
                        max_steps=protocol.max_steps, submission=gold, steps=1, actions={"submit": 1},
                        by_tool={"submit": 0.0})
    rec.timeline.append({"step": 1, "tool": "submit", "args": {"answer": gold}, "result": "received", "cost": 0.0,
                         "spent": 0.0})
    return rec


@pytest.hookimpl(trylast=True)
def pytest_plsql_episode(config: pytest.Config, task: Task, sample: int) -> Episode | None:
    """The rollout of an Interactive task (None for any other, and for ``--plsql-answers``,
    whose answers are scored as submissions by a plain rollout)."""
    if not is_interactive(task) or SETTINGS_KEY not in config.stash:
        return None
    settings = get_settings(config)
    if settings.answers.file is not None:
        return None
    options = read_options(config)
    from ..loader import spec_of

    spec = spec_of(task)
    ledger = spec.interactive.ledger if spec.interactive else ()
    if settings.model.name == "reference":
        record = reference_record(task, options.protocol, len(ledger))
        return Episode.of(task, [answer_of(record, source="reference", cached=False)], sample)
    from ...generation.models import is_real_model

    if not is_real_model(settings.model.name):
        return None
    return solver_episode(config, settings, task, sample, options, spec)


def episode_store(config: pytest.Config, settings: Any, task: Task, sample: int, options: Options,
                  spec: Any) -> Stored:
    """Where the episode of ``task`` is cached: its key hashes everything the episode depends on."""
    from ...generation.plugin import generation
    from .cache import EpisodeCache, Stored, episode_key

    gen = generation(config, settings)
    ledger = spec.interactive.ledger if spec.interactive else ()
    key = episode_key({
        "task": [task.subset, task.id, task.turns[0].prompt, [dataclasses.astuple(e) for e in ledger], spec.behaviour],
        "solver": [gen.model, settings.model.temperature, settings.model.max_tokens],
        "simulator": {"kind": options.simulator, "model": options.simulator_model},
        "protocol": options.protocol.key(), "sample": sample,
    })
    cache = EpisodeCache(gen.cache.root)
    return Stored(cache, cache.path(key, solver=gen.model, subset=task.subset, task_id=task.id, sample=sample), key,
                  cache_only=settings.answers.cache_only)


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Fail fast for Interactive tasks too: the generation layer's start-of-run check leaves them
    out (an episode is played on the worker that owns the database), so when some episode must be
    played, check here that litellm knows the Solver's (and the Simulator's) model and that their
    keys are set -- one usage error before any test runs. A rerun from the episode cache checks nothing."""
    from ...generation.models import is_real_model
    from ...generation.plugin import generation
    from ...generation.preflight import check_model
    from ...plugin import TASKS_KEY

    config = session.config
    if SETTINGS_KEY not in config.stash or getattr(config, "workerinput", None) is not None:
        return
    settings = get_settings(config)
    if (settings.answers.file is not None or settings.answers.cache_only or settings.answers.show_prompt
            or not is_real_model(settings.model.name) or config.getoption("collectonly", False)):
        return
    tasks = [t for _, ts in config.stash.get(TASKS_KEY, {}).values() for t in ts
             if is_interactive(t) and t.not_runnable is None]
    if not tasks:
        return
    from ..loader import spec_of

    options = read_options(config)
    if all(episode_store(config, settings, t, s, options, spec_of(t)).read() is not None
           for t in tasks for s in range(settings.model.samples)):
        return
    gen = generation(config, settings)
    try:
        check_model(settings.model.name or "", gen.model, settings.model.api_base, settings.model.aliases)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if options.simulator_model:
        try:
            check_model(options.simulator_model, options.simulator_model, settings.model.api_base)
        except UsageError as exc:
            raise pytest.UsageError(str(exc).replace("--plsql-model=", "--plsql-simulator-model=", 1)) from None


def solver_episode(config: pytest.Config, settings: Any, task: Task, sample: int, options: Options,
                   spec: Any) -> Episode:
    """The model's episode, on this worker's database, with the generation layer's client,
    concurrency limit and cache directory (episodes cached whole, :mod:`.cache`)."""
    from ...collect import HARNESS_KEY
    from ...errors import InfrastructureError
    from ...generation.client import ModelClient
    from ...generation.plugin import generation
    from .simulator import LedgerSimulator, ModelSimulator
    from .tools import Environment

    gen = generation(config, settings)
    service = gen.service
    ledger = spec.interactive.ledger if spec.interactive else ()
    protocol = options.protocol
    store = episode_store(config, settings, task, sample, options, spec)

    def solver(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> Any:
        with service.slot():
            return service.client.complete(messages, tools=list(tools))

    if options.simulator == "model":
        assert options.simulator_model is not None
        sim_client = ModelClient(options.simulator_model, api_base=settings.model.api_base, temperature=0.0,
                                 max_tokens=1024, timeout=settings.model.request_timeout, retries=settings.model.retries)

        def complete(messages: list[dict[str, str]]) -> tuple[str, Mapping[str, Any]]:
            with service.slot(count=False):
                done = sim_client.complete(messages)
            return done.text, done.usage

        simulator: Any = ModelSimulator(ledger, spec.behaviour, options.simulator_model, complete)
    else:
        simulator = LedgerSimulator(ledger, spec.behaviour)
    record = EpisodeRecord(task_id=task.id, subset=task.subset, solver=gen.model, simulator=simulator.identity(),
                           ledger_size=len(ledger), budget_limit=protocol.rule.limit(len(ledger)),
                           max_steps=protocol.max_steps)
    try:
        tools = Environment(config.stash[HARNESS_KEY].backend_for(), task, limit=protocol.output_limit,
                            time_budget=settings.database.task_timeout)
    except InfrastructureError as exc:  # the task's items report the database error themselves
        return Episode.of(task, [Answer(code=None, status="error", error=str(exc), source="model")], sample)
    return InteractiveEpisode(task, sample, tools, record=record, protocol=protocol, simulator=simulator,
                              solver=solver, store=store)

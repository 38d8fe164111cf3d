"""Interactive mode in a pytest run: options, and the generate hook that plays episodes.

For a task of an Interactive subset (``options.mode: interactive``) the answer is what the
Solver submits at the end of an episode. The episode is played when the task node is set up,
on the worker that owns the database (the episode needs its scratch copy), with the generation
layer's client, concurrency limit and cache directory. ``--plsql-model=reference`` submits gold
at once (budget 0); ``--plsql-answers`` scores the file's answers as submissions (no episode).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Mapping, Sequence

import pytest

from ...answers import Answer, Exchange
from ...errors import UsageError
from ...state import SETTINGS_KEY, get_settings
from ...tasks import Task
from .budget import MAX_STEPS, parse_prices, parse_rule
from .episode import Episode, EpisodeRecord, Protocol
from .tasks import is_interactive
from .tools import OUTPUT_LIMIT

log = logging.getLogger(__name__)

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


def answer_of(rec: EpisodeRecord, *, source: str, cached: bool, key: str | None = None) -> Answer:
    usage: dict[str, Any] = {
        "prompt_tokens": rec.tokens["solver"]["prompt"], "completion_tokens": rec.tokens["solver"]["completion"],
        "cost_usd": rec.cost_usd, "cached": cached, "status": "error" if rec.ended == "error" else "ok",
        "episode": rec.summary(),
    }
    if rec.ended == "error":
        return Answer(code=None, status="error", error=f"episode failed: {rec.error}", source=source,
                      cache_key=key, usage=usage)
    return Answer(code=rec.submission or "", status="ok", source=source, cache_key=key, usage=usage,
                  error=None if rec.submission is not None else f"no submission (episode ended: {rec.ended})")


@pytest.hookimpl(tryfirst=True)
def pytest_plsql_generate(
    config: pytest.Config, task: Task, turn: int, history: Sequence[Exchange], sample: int
) -> Answer | None:
    if not is_interactive(task) or SETTINGS_KEY not in config.stash:
        return None
    settings = get_settings(config)
    if settings.answers is not None:
        return None  # the file's answers are scored as submissions
    options = read_options(config)
    from ..loader import spec_of

    spec = spec_of(task)
    ledger = spec.interactive.ledger if spec.interactive else ()
    if settings.model == "reference":
        return answer_of(reference_record(task, options.protocol, len(ledger)), source="reference", cached=False)
    from ...generation.models import is_real_model

    if not is_real_model(settings.model):
        return None
    return play(config, settings, task, sample, options, spec)


def play(config: pytest.Config, settings: Any, task: Task, sample: int, options: Options, spec: Any) -> Answer:
    """The episode's answer: from the episode cache, else played now against this worker's database."""
    from ...collect import HARNESS_KEY
    from ...generation.client import ModelClient
    from ...generation.plugin import generation
    from .cache import EpisodeCache, episode_key
    from .simulator import LedgerSimulator, ModelSimulator
    from .tools import Environment

    gen = generation(config, settings)
    service = gen.service
    ledger = spec.interactive.ledger if spec.interactive else ()
    protocol = options.protocol
    simulator_id = {"kind": options.simulator, "model": options.simulator_model}
    key = episode_key({
        "task": [task.subset, task.id, task.turns[0].prompt, [dataclasses.astuple(e) for e in ledger], spec.behaviour],
        "solver": [gen.model, settings.temperature, settings.max_tokens],
        "simulator": simulator_id, "protocol": protocol.key(), "sample": sample,
    })
    cache = EpisodeCache(gen.cache.root)
    path = cache.path(key, solver=gen.model, subset=task.subset, task_id=task.id, sample=sample)
    found = cache.read(path, key)
    if found is not None:
        return answer_of(EpisodeRecord.from_dict(found), source="cache", cached=True, key=key)
    if settings.cache_only:
        return Answer.missing(f"no cached episode for {task.subset}/{task.id} from {gen.model} in {cache.root} "
                              "(--plsql-cache-only never calls the model)", source="cache")
    with cache.lock(key):
        found = cache.read(path, key)
        if found is not None:
            return answer_of(EpisodeRecord.from_dict(found), source="cache", cached=True, key=key)

        def solver(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]):  # noqa: ANN202
            with service._slots:
                service.requests += 1
                return service.client.complete(messages, tools=list(tools))

        if options.simulator == "model":
            assert options.simulator_model is not None
            sim_client = ModelClient(options.simulator_model, api_base=settings.api_base, temperature=0.0,
                                     max_tokens=1024, timeout=settings.request_timeout, retries=settings.retries)

            def complete(messages: list[dict[str, str]]) -> tuple[str, Mapping[str, Any]]:
                with service._slots:
                    done = sim_client.complete(messages)
                return done.text, done.usage

            simulator: Any = ModelSimulator(ledger, spec.behaviour, options.simulator_model, complete)
        else:
            simulator = LedgerSimulator(ledger, spec.behaviour)
        record = EpisodeRecord(task_id=task.id, subset=task.subset, solver=gen.model, simulator=simulator.identity(),
                               ledger_size=len(ledger), budget_limit=protocol.rule.limit(len(ledger)),
                               max_steps=protocol.max_steps)
        backend = config.stash[HARNESS_KEY].backend_for()
        env = Environment(backend, task, limit=protocol.output_limit)
        env.start()
        try:
            record = Episode(prompt=task.turns[0].prompt, dialect=task.dialect, record=record, protocol=protocol,
                             environment=env, simulator=simulator, solver=solver).run()
        finally:
            env.close()
        if record.ended != "error":
            try:
                cache.write(path, key, record.to_dict())
            except OSError as exc:
                log.warning("episode cache: cannot write %s (%s); kept for this run only", path, exc)
        log.info("%s/%s: episode ended by %s after %d step(s), %g of %g units", task.subset, task.id, record.ended,
                 record.steps, record.spent, record.budget_limit)
        return answer_of(record, source="model", cached=False, key=key)

"""One Interactive episode: the Solver acts through tools until it submits (ProcArena §2.2, §3.3.2).

:class:`InteractiveEpisode` is the core's rollout object (:class:`pytest_plsqlbench.episode.Episode`)
for an Interactive task: one turn, whose answer is the Solver's submission; its ``tools`` are the
scratch :class:`~.tools.Environment` on the worker's database. The task node's setup plays it
(hook ``pytest_plsql_episode``, :mod:`.play`), then the runner judges the answer as any other.

The Solver is the model under test, called through litellm's tool calling with the schema of
:mod:`.tools`. Each tool call is one step and is charged before it runs (malformed or unknown
ones too, paper Table 2); a reply without a tool call is a malformed action. Every result ends
with the units spent so far. When the budget is spent, the step cap reached or the actions' time
(``--plsql-task-timeout``, each action stopped past its price's share of it) used up, the Solver
gets one last turn in which only ``submit`` is offered. ``submit`` ends the episode at once and
returns no feedback; its answer is what the Direct-mode call-suite judge scores.

The record (:class:`EpisodeRecord`) keeps everything a report needs: steps, Solver and Simulator
tokens, budget per tool, actions per tool, ledger entries revealed, how it ended, the timeline.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeGuard

from ...answers import Answer
from ...episode import Ask
from ...episode import Episode as Rollout
from ...errors import InfrastructureError
from ...generation.client import Completion
from ...tasks import Task
from ..dialects import adapter_for
from .budget import MALFORMED, Budget, BudgetRule
from .cache import Stored
from .simulator import Simulator
from .tools import ENVIRONMENT, NAMES, SCHEMA, SUBMIT_ONLY, Environment, Malformed, check, clip, parse_arguments

log = logging.getLogger(__name__)

Solver = Callable[[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]], Completion]

SYSTEM = """You are developing a {dialect} stored procedure for a user. The requirement may be incomplete,
use terms the user has not defined, or contradict itself or the database. Before you submit you may inspect
the database and ask the user, through the tools:
- get_schema, describe_table, sample_rows: read the database; execute_scratch, compile_plsql: try SQL and code
  on a private scratch copy (reset_scratch restores it);
- ask_user: ask the user a question; ask_selector: let the user pick one of several interpretations;
- submit: hand in the complete CREATE OR REPLACE PROCEDURE statement. You submit once; there is no feedback.
Budget: {limit:g} units. Prices: {prices}. Every action you issue is charged, malformed ones included
({malformed:g}). At most {max_steps} actions. Each tool result reports the units spent so far. When the budget
is spent you get one last turn to submit."""

FINAL = ("The {why}. This is your last turn: call submit now with the complete procedure "
         "(CREATE OR REPLACE PROCEDURE ...).")
NO_TOOL = "error: no action. Reply with a tool call (use submit to hand in the procedure)."


#: The action set's version: a cached episode played under other actions (ask_selector without
#: a holder, before 2) is played again.
ACTIONS_VERSION = 2


@dataclass(frozen=True)
class Protocol:
    """The settings an episode runs under (part of the episode's cache key)."""

    rule: BudgetRule
    prices: Mapping[str, float]
    max_steps: int
    output_limit: int

    def key(self) -> dict[str, Any]:
        return {"budget": [self.rule.base, self.rule.per_entry, self.rule.patience], "prices": dict(self.prices),
                "max_steps": self.max_steps, "output_limit": self.output_limit, "actions": ACTIONS_VERSION}


@dataclass
class EpisodeRecord:
    task_id: str
    subset: str
    solver: str
    simulator: dict[str, Any]
    ledger_size: int
    budget_limit: float
    max_steps: int
    ended: str = "submit"
    final_turn: str | None = None
    error: str | None = None
    submission: str | None = None
    steps: int = 0
    requests: int = 0
    tokens: dict[str, dict[str, int]] = field(default_factory=lambda: {
        "solver": {"prompt": 0, "completion": 0}, "simulator": {"prompt": 0, "completion": 0}})
    cost_usd: float | None = None
    spent: float = 0.0
    by_tool: dict[str, float] = field(default_factory=dict)
    actions: dict[str, int] = field(default_factory=dict)
    revealed: list[str] = field(default_factory=list)
    fallback_answers: int = 0
    timeline: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeRecord:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    def summary(self, clip_at: int = 1500) -> dict[str, Any]:
        """What the results document keeps: everything, the timeline's texts clipped."""
        data = self.to_dict()
        data["timeline"] = [
            {**e, "args": {k: clip(v, clip_at) if isinstance(v, str) else v for k, v in (e.get("args") or {}).items()},
             "result": clip(str(e.get("result") or ""), clip_at)}
            for e in self.timeline
        ]
        if data.get("submission"):
            data["submission"] = clip(data["submission"], 4 * clip_at)
        return data


def _add_usage(into: dict[str, int], usage: Mapping[str, Any]) -> None:
    into["prompt"] += int(usage.get("prompt_tokens") or 0)
    into["completion"] += int(usage.get("completion_tokens") or 0)


def answer_of(rec: EpisodeRecord, *, source: str, cached: bool, key: str | None = None) -> Answer:
    """The turn's answer: the submission, with the episode record in its usage (results document)."""
    usage: dict[str, Any] = {"episode": rec.summary()}
    if source != "reference":  # gold's episode called no model: counted by source only, like Direct gold
        usage.update({"model": rec.solver, "prompt_tokens": rec.tokens["solver"]["prompt"],
                      "completion_tokens": rec.tokens["solver"]["completion"], "cost_usd": rec.cost_usd,
                      "cached": cached, "status": "error" if rec.ended == "error" else "ok"})
    if rec.ended == "error":
        # A provider failure (ProviderError.from_model is false): the harness's trouble, however
        # many runs it happened in; the episode is not cached and the next run plays it again.
        return Answer(code=None, status="error", error=f"episode failed: {rec.error} (not stored; the next run "
                      "plays it again)", source=source,
                      cache_key=key, usage=usage)
    why = f"the model refused: {rec.error}" if rec.ended == "refused" else f"no submission (episode ended: {rec.ended})"
    return Answer(code=rec.submission or "", status="ok", source=source, cache_key=key, usage=usage,
                  error=None if rec.submission is not None else why)


class InteractiveEpisode(Rollout):
    """The rollout of an Interactive task; :meth:`run` never raises for the Solver's behaviour.

    ``tools`` is the scratch environment (None: environment actions answer with an error);
    ``store``, when given, makes :meth:`play` read a finished episode from the episode cache
    instead of playing it, and write the one it plays.
    """

    tools: Environment | None

    def __init__(self, task: Task, sample: int = 0, tools: Environment | None = None, *, record: EpisodeRecord,
                 protocol: Protocol, simulator: Simulator, solver: Solver, store: Stored | None = None) -> None:
        super().__init__(task, sample, tools)
        self.prompt = task.turns[0].prompt
        self.dialect = task.dialect
        self.record = record
        self.protocol = protocol
        self.simulator = simulator
        self.solver = solver
        self.store = store
        self.budget = Budget(record.budget_limit, protocol.prices)

    def play(self, ask: Ask, *, carry_failures: bool = True) -> bool:
        """Answer the task's one turn with the episode's submission (``ask`` is not needed)."""
        if not self.done:
            self.answers.append(self.answer())
        return True

    def answer(self) -> Answer:
        """From the episode cache, else played now on the scratch copy and cached (unless its
        provider failed: then nothing is cached and the next run plays it again)."""
        store = self.store
        if store is None:
            return answer_of(self._played(), source="model", cached=False)
        found = store.read()
        if _servable(found):
            return answer_of(EpisodeRecord.from_dict(found), source="cache", cached=True, key=store.key)
        if store.cache_only:
            return Answer.missing(f"no cached episode for {self.task.subset}/{self.task.id} in {store.path.parent} "
                                  "(--plsql-cache-only never calls the model)", source="cache")
        with store.lock():
            found = store.read()
            if _servable(found):
                return answer_of(EpisodeRecord.from_dict(found), source="cache", cached=True, key=store.key)
            record = self._played()
            if record.ended != "error":  # a provider failure is never stored (nor counted)
                store.write(record.to_dict())
        return answer_of(record, source="model", cached=False, key=store.key)

    def _played(self) -> EpisodeRecord:
        if self.tools is not None:
            self.tools.start()
        try:
            record = self.run()
        finally:
            if self.tools is not None:
                self.tools.close()
        log.info("%s/%s: episode ended by %s after %d step(s), %g of %g units", self.task.subset, self.task.id,
                 record.ended, record.steps, record.spent, record.budget_limit)
        return record

    def messages(self) -> list[dict[str, Any]]:
        system = SYSTEM.format(
            dialect=adapter_for(self.dialect).language,
            limit=self.budget.limit, prices=", ".join(f"{n} {c:g}" for n, c in self.protocol.prices.items() if n in NAMES),
            malformed=self.budget.price(MALFORMED), max_steps=self.protocol.max_steps)
        return [{"role": "system", "content": system}, {"role": "user", "content": self.prompt}]

    def run(self) -> EpisodeRecord:
        rec = self.record
        messages = self.messages()
        final: str | None = None
        try:
            while rec.submission is None:
                if final is None and (self.budget.exhausted or rec.steps >= self.protocol.max_steps
                                      or self._out_of_time()):
                    final = ("budget" if self.budget.exhausted else "step_cap" if rec.steps >= self.protocol.max_steps
                             else "time")
                    why = {"budget": "budget is spent",
                           "step_cap": f"step cap of {self.protocol.max_steps} actions is reached",
                           "time": "time for actions (--plsql-task-timeout) is spent"}[final]
                    messages.append({"role": "user", "content": FINAL.format(why=why)})
                    rec.final_turn = final
                completion = self._ask(messages, SUBMIT_ONLY if final else SCHEMA)
                messages.append(self._assistant(completion))
                if final is not None:
                    submitted = self._final(completion, messages)
                    if not submitted:
                        rec.ended = final
                    break
                if not completion.tool_calls:
                    self._act(MALFORMED, {}, None, messages, error=NO_TOOL, text=completion.text)
                    continue
                for call in completion.tool_calls:
                    if (rec.submission is not None or rec.steps >= self.protocol.max_steps or self.budget.exhausted
                            or self._out_of_time()):
                        messages.append({"role": "tool", "tool_call_id": call["id"],
                                         "content": "not run: the episode reached its end"})
                        continue
                    self._tool_call(call, messages)
        except _SolverFailed as exc:
            rec.ended, rec.error = ("refused" if exc.refused else "error"), str(exc)
        rec.spent = round(self.budget.spent, 4)
        rec.by_tool = {k: round(v, 4) for k, v in self.budget.by_tool.items()}
        if rec.submission is not None:
            rec.ended = "submit"
        return rec

    # ------------------------------------------------------------------ the Solver
    def _ask(self, messages: list[dict[str, Any]], tools: Sequence[Mapping[str, Any]]) -> Completion:
        from ...generation.client import ProviderError

        self.record.requests += 1
        try:
            completion = self.solver(messages, tools)
        except ProviderError as exc:
            _add_usage(self.record.tokens["solver"], exc.usage)
            # A refusal (context window exceeded, content policy) is the model's own failure, as in
            # Direct mode: a Solver can fill its context on purpose (its actions come back in every
            # request), and an error would leave the task out of the metrics.
            raise _SolverFailed(str(exc), refused=exc.from_model) from None
        _add_usage(self.record.tokens["solver"], completion.usage)
        cost = completion.usage.get("cost_usd")
        if cost is not None:
            self.record.cost_usd = (self.record.cost_usd or 0.0) + float(cost)
        return completion

    @staticmethod
    def _assistant(completion: Completion) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": completion.text or None}
        if completion.tool_calls:
            msg["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {
                    "name": c["name"], "arguments": c["arguments"] if isinstance(c["arguments"], str)
                    else json.dumps(c["arguments"] or {})}}
                for c in completion.tool_calls]
        return msg

    def _final(self, completion: Completion, messages: list[dict[str, Any]]) -> bool:
        for call in completion.tool_calls:
            if call["name"] == "submit":
                try:
                    args = parse_arguments(call["arguments"])
                    check("submit", args)
                except Malformed as exc:
                    self._log(call["name"], {}, f"error: {exc}", 0.0, malformed=True)
                    continue
                self._submit(args)
                return True
        return False

    def _submit(self, args: Mapping[str, Any]) -> None:
        self.record.steps += 1
        cost = self.budget.charge("submit")
        self._count("submit")
        self.record.submission = str(args["answer"])
        self._log("submit", {"answer": self.record.submission}, "received", cost)

    def _tool_call(self, call: Mapping[str, Any], messages: list[dict[str, Any]]) -> None:
        name = str(call.get("name") or "")
        try:
            args = parse_arguments(call.get("arguments"))
            check(name, args)
        except Malformed as exc:
            self._act(MALFORMED, {"name": name, "arguments": str(call.get("arguments"))[:500]}, call, messages,
                      error=f"error: {exc}")
            return
        if name == "submit":
            self._submit(args)
            return
        self._act(name, args, call, messages)

    def _act(self, name: str, args: Mapping[str, Any], call: Mapping[str, Any] | None,
             messages: list[dict[str, Any]], *, error: str | None = None, text: str | None = None) -> None:
        rec = self.record
        rec.steps += 1
        self._count(name)
        revealed: list[str] = []
        if error is None and not self.budget.affordable(name):
            error = (f"error: {name} costs {self.budget.price(name):g} units and only {self.budget.remaining:g} "
                     "are left; the action was not run")
        cost = self.budget.charge(name)
        if error is not None:
            result = error
        elif name in ENVIRONMENT:
            result = self._environment(name, args)
        else:
            reply = self._simulate(name, args)
            result = reply.text
            revealed = reply.revealed
            for r in revealed:
                if r not in rec.revealed:
                    rec.revealed.append(r)
            rec.fallback_answers += int(reply.fallback)
            _add_usage(rec.tokens["simulator"], reply.usage)
        content = f"{result}\n{self.budget.line()}"
        if call is not None:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        else:
            messages.append({"role": "user", "content": content})
        logged = dict(args) if name != MALFORMED or args else ({"text": text[:500]} if text else {})
        self._log(name, logged, result, cost, revealed=revealed, malformed=name == MALFORMED)

    def _simulate(self, name: str, args: Mapping[str, Any]) -> Any:
        from ...generation.client import ProviderError

        try:
            if name == "ask_user":
                return self.simulator.ask_user(args["question"])
            return self.simulator.ask_selector(args["question"], list(args["options"]), args.get("holder"))
        except ProviderError as exc:  # the Simulator's model failed: the episode cannot go on fairly
            _add_usage(self.record.tokens["simulator"], exc.usage)
            raise _SolverFailed(f"the User Simulator failed: {exc}") from None

    def _out_of_time(self) -> bool:
        """The episode's actions used up its time budget (``--plsql-task-timeout``)."""
        left = self.tools.time_left() if self.tools is not None else None
        return left is not None and left <= 0

    def _share(self, name: str) -> float | None:
        """An action's seconds at most: its price's part of the budget, of the episode's time."""
        if self.tools is None or self.tools.time_budget <= 0 or self.budget.limit <= 0:
            return None
        return self.tools.time_budget * self.budget.price(name) / self.budget.limit

    def _environment(self, name: str, args: Mapping[str, Any]) -> str:
        if self.tools is None:
            return "error: no database is available for this episode"
        try:
            return self.tools.call(name, dict(args), share=self._share(name))
        except Malformed as exc:
            return f"error: {exc}"
        except InfrastructureError:
            raise
        except Exception as exc:  # noqa: BLE001 - the Solver's action failed, not the episode
            # What the Solver sent could not even be run (text the driver cannot encode ...): an
            # error would end the episode as the harness's and leave the task out of the metrics.
            return f"error: the action could not be run ({type(exc).__name__}: {str(exc)[:300]})"

    def _count(self, name: str) -> None:
        self.record.actions[name] = self.record.actions.get(name, 0) + 1

    def _log(self, name: str, args: Mapping[str, Any], result: str, cost: float, *, revealed: Sequence[str] = (),
             malformed: bool = False) -> None:
        entry: dict[str, Any] = {"step": self.record.steps, "tool": name, "args": dict(args), "result": result,
                                 "cost": cost, "spent": round(self.budget.spent, 4)}
        if revealed:
            entry["revealed"] = list(revealed)
        if malformed:
            entry["malformed"] = True
        self.record.timeline.append(entry)


def _servable(found: Mapping[str, Any] | None) -> TypeGuard[Mapping[str, Any]]:
    """A cached episode a run may use: one that ended in ``error`` (written by older versions) is
    a provider failure, never served: played again."""
    return found is not None and found.get("ended") != "error"


class _SolverFailed(Exception):
    """The Solver's provider failed after retries: the episode ends in ``error`` -- or in
    ``refused`` when the model refused (scored as its failure, an empty submission)."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused

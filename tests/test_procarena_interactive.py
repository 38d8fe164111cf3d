"""ProcArena Interactive mode (issue 15): budget arithmetic, the ledger simulator, tools, episodes
through litellm's tool calling against the stub server on embedded PostgreSQL, and end to end.

The Solver is always the real litellm client over real HTTP against tests/stub_openai.py; the
stub's scripted tool calls play three Solvers: one that inspects, asks, then submits gold; one
that submits at once; one that sends malformed actions until the budget ends.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_plsqlbench.errors import UsageError
from pytest_plsqlbench.manifests import load_manifest
from pytest_plsqlbench.procarena.evaluation import evaluate
from pytest_plsqlbench.procarena.interactive import metrics as im
from pytest_plsqlbench.procarena.interactive.budget import (
    MAX_STEPS,
    PRICES,
    Budget,
    BudgetRule,
    parse_prices,
    parse_rule,
)
from pytest_plsqlbench.procarena.interactive.episode import EpisodeRecord, InteractiveEpisode, Protocol
from pytest_plsqlbench.procarena.interactive.simulator import NO_ANSWER, LedgerSimulator
from pytest_plsqlbench.procarena.interactive.tools import NAMES, SCHEMA, Environment, Malformed, check
from pytest_plsqlbench.procarena.loader import load, spec_of
from pytest_plsqlbench.settings import Settings
from pytest_plsqlbench.tasks import Task

from embedded import started_backend
from stub_openai import Action, StubServer, ok, tool_call, tool_calls

REPO = Path(__file__).resolve().parent.parent
INTERACTIVE = REPO / "tasks" / "procarena-sample-interactive.yaml"
DIRECT = REPO / "tasks" / "procarena-sample.yaml"
TASK = "postgres_a1_000"


def _tasks(manifest: Path, name: str, dialect: str = "postgres") -> list[Task]:
    return load(load_manifest(manifest), Settings.of(subsets=(name,), dialect=dialect))


@pytest.fixture(scope="module")
def task() -> Task:
    return next(t for t in _tasks(INTERACTIVE, "procarena-sample-interactive") if t.id == TASK)


# --------------------------------------------------------------------------- budget
def test_budget_formula_presets_and_numbers() -> None:
    assert parse_rule(None) == parse_rule("paper") == BudgetRule(6.0, 2.0, 3.0, "paper")
    assert parse_rule("paper").limit(4) == 17.0  # 6 + 2*4 + 3
    assert parse_rule("records").limit(4) == 28.0  # 14 + 2*4 + 6, the records' limit for |ledger| = 4
    assert parse_rule("records").limit(0) == 20.0
    assert parse_rule("1, 0.5, 2").limit(3) == 4.5
    for bad in ("fast", "1,2", "1,2,-3", "a,b,c"):
        with pytest.raises(UsageError, match="--plsql-budget"):
            parse_rule(bad)
    assert MAX_STEPS == 60


def test_price_list_and_charges_are_exact() -> None:
    prices = parse_prices(None)
    assert prices == {**PRICES, "malformed": 1.0}
    assert [PRICES[n] for n in NAMES] == [1.0, 0.5, 0.5, 1.0, 0.5, 0.5, 2.0, 2.0, 0.0]
    assert parse_prices("ask_user=3, submit=0")["ask_user"] == 3.0
    for bad in ("ask_user", "nope=1", "ask_user=-1", "ask_user=x"):
        with pytest.raises(UsageError, match="--plsql-tool-costs"):
            parse_prices(bad)
    b = Budget(limit=4.5, prices=prices)
    for name in ("get_schema", "describe_table", "sample_rows", "ask_user"):
        b.charge(name)
    assert b.spent == 4.0 and b.remaining == 0.5 and not b.exhausted
    assert b.affordable("compile_plsql") and not b.affordable("execute_scratch") and b.affordable("submit")
    b.charge("no_such_tool")  # an unknown action costs the malformed price
    assert b.spent == 5.0 and b.exhausted and b.by_tool == {"get_schema": 1.0, "describe_table": 0.5,
                                                           "sample_rows": 0.5, "ask_user": 2.0, "no_such_tool": 1.0}
    assert b.line() == "[budget: 5 of 4.5 units spent, 0 left]"


# --------------------------------------------------------------------------- tasks and tools
def test_interactive_subset_pairs_the_direct_tasks(task: Task) -> None:
    direct = {t.id: t for t in _tasks(DIRECT, "procarena-sample")}
    inter = _tasks(INTERACTIVE, "procarena-sample-interactive")
    assert {t.id for t in inter} == {i for i, t in direct.items() if t.metadata["scenario"] != "b2"}
    spec = spec_of(task)
    assert spec.interactive is not None
    assert spec.interactive.requirement.strip() in task.turns[0].prompt
    assert spec.requirement.strip() not in task.turns[0].prompt
    d = direct[TASK]
    assert task.turns[0].tests == d.turns[0].tests and task.turns[0].reference == d.turns[0].reference
    assert task.fixtures == d.fixtures and task.metadata["mode"] == "interactive" and task.metadata["ledger_size"] == 4
    oracle = _tasks(INTERACTIVE, "procarena-sample-interactive", "oracle")
    assert len(oracle) == len(inter)
    for t in [*inter, *oracle]:  # the hidden part never reaches the Solver's prompt
        s = spec_of(t)
        assert s.interactive is not None
        prompt = t.turns[0].prompt
        for e in s.interactive.ledger:
            assert e.answer not in prompt
        assert s.behaviour.strip()[:80] not in prompt
        for hidden in (s.gold, *s.calls):
            assert hidden.strip() not in prompt, f"{t.id}: gold or a call reaches the Solver's prompt"


def test_tool_schema_and_argument_checks() -> None:
    assert [t["function"]["name"] for t in SCHEMA] == list(NAMES) and len(NAMES) == 9
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in SCHEMA)
    check("sample_rows", {"table": "items", "limit": 3})
    for name, args, why in [("drop_db", {}, "unknown action"), ("ask_user", {}, "needs argument"),
                            ("sample_rows", {"table": "t", "limit": "3"}, "integer"),
                            ("ask_selector", {"question": "q", "options": ["one"]}, "at least two"),
                            ("get_schema", {"x": 1}, "no argument")]:
        with pytest.raises(Malformed, match=why):
            check(name, args)


# --------------------------------------------------------------------------- simulator
def test_ledger_simulator_answers_from_matched_entries_only(task: Task) -> None:
    spec = spec_of(task)
    assert spec.interactive is not None
    ledger = {e.id: e for e in spec.interactive.ledger}
    sim = LedgerSimulator(spec.interactive.ledger, spec.behaviour)
    r = sim.ask_user("What do you mean by the put-away room of a location?")
    assert r.revealed == ["M1"] and r.text == ledger["M1"].answer.strip() and not r.fallback
    r = sim.ask_user("How is the 'landed moving-average cost' computed, and how does the supplier rating change?")
    assert set(r.revealed) == {"M2", "M3"} and ledger["M3"].answer.strip() in r.text
    r = sim.ask_user("There is no received_date column in purchase_orders. Where does the receipt date go?")
    assert r.revealed == ["M4"]
    r = sim.ask_user("Should I also email the warehouse manager?")
    assert r.fallback and r.revealed == [] and r.text == NO_ANSWER
    r = sim.ask_user("What happens to lines of discontinued items?")
    assert r.fallback and "discontinued" in r.text and r.text in " ".join(spec.behaviour.split())
    assert spec.gold.strip()[:40] not in r.text and "CREATE" not in r.text.upper()
    s = sim.ask_selector("How does the supplier rating change for a late receipt?",
                         ["rating + 0.5", "rating - 0.5, not below 0", "no change"])
    assert s.index == 1 and s.text == "1" and "M3" in s.revealed
    s = sim.ask_selector("Which colour should the report be?", ["red", "blue"])
    assert s.index == -1 and s.fallback


def test_two_holders_each_answer_from_their_own_entries(task: Task) -> None:
    """jargon entries are the knowledge holder's, masks and contradictions the requirement
    holder's; ask_selector asks the holder the Solver names (both when it names none)."""
    spec = spec_of(task)
    assert spec.interactive is not None
    holders = {e.id: e.holder for e in spec.interactive.ledger}
    assert holders == {"M1": "knowledge", "M2": "knowledge", "M3": "requirement", "M4": "requirement"}
    sim = LedgerSimulator(spec.interactive.ledger, spec.behaviour)
    question, options = ("How does the supplier rating change for a late receipt?",
                         ["rating + 0.5", "rating - 0.5, not below 0", "no change"])
    assert sim.ask_selector(question, options, "requirement").index == 1
    assert sim.ask_selector(question, options).index == 1
    # The knowledge holder keeps no rating rule: it confirms nothing and reveals nothing.
    r = sim.ask_selector(question, options, "knowledge")
    assert r.index == -1 and r.revealed == []
    r = sim.ask_selector("What is the put-away room of a location?", ["capacity minus stored qty_on_hand", "capacity"],
                         "knowledge")
    assert r.revealed == ["M1"]
    with pytest.raises(Malformed, match="holder"):
        check("ask_selector", {"question": "q", "options": ["a", "b"], "holder": "gold"})
    check("ask_selector", {"question": "q", "options": ["a", "b"], "holder": "knowledge"})


def test_a_ledger_entrys_holder_may_be_named_and_is_checked(tmp_path: Path) -> None:
    from pytest_plsqlbench.procarena.spec import SpecError, _interactive

    item = {"id": "M1", "op": "mask", "key": "k", "answer": "a"}
    assert _interactive({"requirement": "r", "ledger": [item]}, "t").ledger[0].holder == "requirement"
    named = _interactive({"requirement": "r", "ledger": [item | {"holder": "knowledge"}]}, "t")
    assert named.ledger[0].holder == "knowledge"
    with pytest.raises(SpecError, match="holder must be one of"):
        _interactive({"requirement": "r", "ledger": [item | {"holder": "oracle"}]}, "t")


def test_one_question_cannot_empty_the_ledger(task: Task) -> None:
    """A question stuffed with every key's words is not answered; one that names three things
    gets the two it matches best; the selector is bounded the same way."""
    from pytest_plsqlbench.procarena.interactive.simulator import MAX_ENTRIES, TOO_BROAD

    spec = spec_of(task)
    assert spec.interactive is not None and len(spec.interactive.ledger) > MAX_ENTRIES
    sim = LedgerSimulator(spec.interactive.ledger, spec.behaviour)
    stuffed = " ".join(e.key for e in spec.interactive.ledger) + " " + spec.interactive.requirement
    r = sim.ask_user(stuffed)
    assert r.revealed == [] and r.text == TOO_BROAD
    three = ("What is the put-away room of a location, what is 'landed moving-average cost', "
             "and how exactly does the supplier rating change?")
    r = sim.ask_user(three)
    assert len(r.revealed) == MAX_ENTRIES and set(r.revealed) <= {"M1", "M2", "M3"}
    s = sim.ask_selector("Which one?", [stuffed, "no change"])
    assert s.index == -1 and s.revealed == []


# --------------------------------------------------------------------------- episodes (stub + PostgreSQL)
@pytest.fixture(scope="module")
def backend() -> Iterator[Any]:

    with started_backend("interactivetest", timeout=10) as b:
        yield b


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubServer]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stub-not-a-key")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with StubServer(default=ok("I am done.")) as server:
        yield server


def play(backend: Any, task: Task, stub: StubServer, *, max_steps: int = MAX_STEPS,
         time_budget: float = 0.0, envs: list[Environment] | None = None) -> EpisodeRecord:
    from pytest_plsqlbench.generation.client import ModelClient

    spec = spec_of(task)
    assert spec.interactive is not None
    client = ModelClient("openai/stub", api_base=stub.api_base, retries=0)
    protocol = Protocol(parse_rule("paper"), parse_prices(None), max_steps, 4000)
    n = len(spec.interactive.ledger)
    record = EpisodeRecord(task_id=task.id, subset=task.subset, solver="openai/stub", simulator={"kind": "ledger"},
                           ledger_size=n, budget_limit=protocol.rule.limit(n), max_steps=max_steps)
    env = Environment(backend, task, time_budget=time_budget)
    if envs is not None:
        envs.append(env)
    env.start()
    try:
        return InteractiveEpisode(task, tools=env, record=record, protocol=protocol,
                                  simulator=LedgerSimulator(spec.interactive.ledger, spec.behaviour),
                                  solver=lambda messages, tools: client.complete(messages, tools=list(tools))).run()
    finally:
        env.close()


def inspector_script(gold: str) -> list[Action]:
    """Inspect, try things on the scratch copy (destructively), ask, confirm, submit gold."""
    return [
        tool_call("get_schema"),
        tool_call("describe_table", {"table": "purchase_orders"}),
        tool_call("sample_rows", {"table": "warehouse.stock_items", "limit": 2}),
        tool_call("execute_scratch", {"sql": "DELETE FROM warehouse.stock_movements; "
                                              "SELECT count(*) FROM warehouse.stock_movements"}),
        tool_calls(("compile_plsql", {"code": gold}),
                   ("ask_user", {"question": "What is the put-away room of a location?"})),
        tool_call("ask_selector", {"question": "How does the supplier rating change when a receipt is late?",
                                   "options": ["it rises by 0.1", "rating - 0.5, not below 0"]}),
        tool_call("submit", {"answer": gold}),
    ]


def test_solver_inspects_asks_and_submits_gold(backend: Any, task: Task, stub: StubServer) -> None:
    gold = spec_of(task).gold
    stub.push(*inspector_script(gold))
    rec = play(backend, task, stub)
    assert rec.ended == "submit" and rec.submission == gold and rec.error is None
    assert rec.steps == 8 and rec.requests == 7 == stub.count
    assert rec.actions == {"get_schema": 1, "describe_table": 1, "sample_rows": 1, "execute_scratch": 1,
                           "compile_plsql": 1, "ask_user": 1, "ask_selector": 1, "submit": 1}
    assert rec.spent == 7.5 and rec.budget_limit == 17.0
    assert rec.by_tool == {"get_schema": 1.0, "describe_table": 0.5, "sample_rows": 0.5, "execute_scratch": 1.0,
                           "compile_plsql": 0.5, "ask_user": 2.0, "ask_selector": 2.0, "submit": 0.0}
    assert rec.revealed == ["M1", "M3"] and rec.fallback_answers == 0
    assert rec.tokens["solver"] == {"prompt": 7 * 11, "completion": 7 * 7}
    results = {e["tool"]: e["result"] for e in rec.timeline}
    assert "purchase_orders" in results["describe_table"] and results["compile_plsql"] == "compiled"
    assert results["execute_scratch"].strip().endswith("0") and results["ask_selector"] == "1"
    # the Solver saw the nine tools, the price list and budget, and the units spent after each action
    first = stub.bodies()[0]
    assert [t["function"]["name"] for t in first["tools"]] == list(NAMES)
    assert "17 units" in first["messages"][0]["content"] and "ask_user 2" in first["messages"][0]["content"]
    tool_msgs = [m for m in stub.bodies()[-1]["messages"] if m["role"] == "tool"]
    assert len(tool_msgs) == 7 and tool_msgs[-1]["content"].endswith("[budget: 7.5 of 17 units spent, 9.5 left]")
    # the scratch DELETE died with the episode: gold still passes every call, from a clean state
    assert all(o.passed for o in evaluate(backend, task, rec.submission))


def test_solver_submits_at_once(backend: Any, task: Task, stub: StubServer) -> None:
    stub.push(tool_call("submit", {"answer": "CREATE OR REPLACE PROCEDURE x() LANGUAGE sql AS $$ SELECT 1 $$;"}))
    rec = play(backend, task, stub)
    assert (rec.ended, rec.steps, rec.requests, rec.spent, rec.actions) == ("submit", 1, 1, 0.0, {"submit": 1})
    assert rec.submission is not None and rec.submission.startswith("CREATE OR REPLACE PROCEDURE x()")
    assert not all(o.passed for o in evaluate(backend, task, rec.submission))


def test_malformed_actions_until_the_budget_ends(backend: Any, task: Task, stub: StubServer) -> None:
    bad = [tool_call("run_sql", {"sql": "SELECT 1"}), tool_call("ask_user", "{not json"),
           ok("Here is my plan, no tool."), tool_call("sample_rows", {"table": "no_such_table"})]
    stub.default = lambda body: bad[len([m for m in body["messages"] if m["role"] == "assistant"]) % len(bad)]
    rec = play(backend, task, stub)
    assert rec.ended == "budget" and rec.submission is None and rec.final_turn == "budget"
    # each round of four costs 1 + 1 + 1 + 0.5 (sample_rows of an unknown table is charged and answered
    # with an error): four rounds (14 units) and three more malformed actions spend exactly 17 of 17,
    # then one last turn offers submit only, which is not used.
    assert rec.spent == 17.0 and rec.steps == 19 and rec.requests == 20 == stub.count
    assert rec.actions == {"malformed": 15, "sample_rows": 4} and rec.by_tool == {"malformed": 15.0, "sample_rows": 2.0}
    errors = [e["result"] for e in rec.timeline]
    assert any("unknown action 'run_sql'" in r for r in errors) and any("not valid JSON" in r for r in errors)
    assert any("no action" in r for r in errors) and any("no table 'no_such_table'" in r for r in errors)
    last = stub.bodies()[-1]
    assert [t["function"]["name"] for t in last["tools"]] == ["submit"]
    assert "last turn" in last["messages"][-1]["content"]


def test_the_scratch_copy_never_holds_gold(backend: Any, task: Task, stub: StubServer) -> None:
    spec = spec_of(task)
    evaluate(backend, task, spec.gold)  # gold's states are now cached on this worker
    probe = (f"SELECT count(*) FROM pg_proc WHERE proname = '{spec.procedure}'; "
             "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
             "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND p.prokind = 'p'")
    stub.push(tool_call("execute_scratch", {"sql": probe}), tool_call("submit", {"answer": "x"}))
    rec = play(backend, task, stub)
    assert rec.timeline[0]["result"].split() == ["0", "0"]


def test_a_failing_simulator_model_ends_the_episode_in_error(task: Task, stub: StubServer) -> None:
    from pytest_plsqlbench.generation.client import ModelClient
    from pytest_plsqlbench.procarena.interactive.simulator import ModelSimulator

    from stub_openai import error

    spec = spec_of(task)
    assert spec.interactive is not None
    sim_client = ModelClient("openai/simulator", api_base=stub.api_base, retries=0)
    stub.push(tool_call("ask_user", {"question": "What is the put-away room?"}), error(503))
    client = ModelClient("openai/stub", api_base=stub.api_base, retries=0)
    record = EpisodeRecord(task_id=task.id, subset=task.subset, solver="openai/stub", simulator={"kind": "model"},
                           ledger_size=4, budget_limit=17.0, max_steps=MAX_STEPS)
    rec = InteractiveEpisode(task, record=record,
                             protocol=Protocol(parse_rule("paper"), parse_prices(None), MAX_STEPS, 4000),
                             simulator=ModelSimulator(spec.interactive.ledger, spec.behaviour, "openai/simulator",
                                                      lambda m: (lambda c: (c.text, c.usage))(sim_client.complete(m))),
                             solver=lambda messages, tools: client.complete(messages, tools=list(tools))).run()
    assert rec.ended == "error" and "User Simulator failed" in (rec.error or "") and rec.submission is None


def test_step_cap_ends_the_episode(backend: Any, task: Task, stub: StubServer) -> None:
    stub.default = tool_call("describe_table", {"table": "suppliers"})
    rec = play(backend, task, stub, max_steps=3)
    assert (rec.ended, rec.steps, rec.requests, rec.spent) == ("step_cap", 3, 4, 1.5)


def test_model_simulator_matches_then_phrases_and_counts_its_tokens_apart(backend: Any, task: Task,
                                                                          stub: StubServer) -> None:
    from pytest_plsqlbench.generation.client import ModelClient
    from pytest_plsqlbench.procarena.interactive.simulator import ModelSimulator

    spec = spec_of(task)
    assert spec.interactive is not None
    sim_client = ModelClient("openai/simulator", api_base=stub.api_base, retries=0)
    phrased = "The room is the location's capacity minus what is stored there."
    solver_script = [tool_call("ask_user", {"question": "What is the put-away room?"}),
                     tool_call("ask_user", {"question": "What happens to lines of discontinued items?"}),
                     tool_call("ask_user", {"question": "Anything about colours?"}),
                     tool_call("submit", {"answer": spec.gold})]

    def respond(body: Mapping[str, Any]) -> Action:
        if body.get("tools"):  # the Solver
            return solver_script[len([m for m in body["messages"] if m["role"] == "assistant"])]
        prompt = body["messages"][-1]["content"]
        if "JSON list of the ids" in prompt:  # step 1: match the question to entries
            question = prompt.rsplit("Question:", 1)[-1]
            return ok('["M1"]' if "put-away" in question else "[]", prompt_tokens=5, completion_tokens=2)
        assert "Never write code" in prompt  # step 2: phrase from the matched entries (or behaviour) only
        return ok(phrased if "sum of qty_on_hand" in prompt else "They are skipped.", prompt_tokens=5,
                  completion_tokens=3)

    stub.default = respond
    client = ModelClient("openai/stub", api_base=stub.api_base, retries=0)
    protocol = Protocol(parse_rule("paper"), parse_prices(None), MAX_STEPS, 4000)
    record = EpisodeRecord(task_id=task.id, subset=task.subset, solver="openai/stub",
                           simulator={"kind": "model"}, ledger_size=4, budget_limit=17.0, max_steps=MAX_STEPS)
    sim = ModelSimulator(spec.interactive.ledger, spec.behaviour, "openai/simulator",
                         lambda m: (lambda c: (c.text, c.usage))(sim_client.complete(m)))
    rec = InteractiveEpisode(task, record=record, protocol=protocol, simulator=sim,
                             solver=lambda messages, tools: client.complete(messages, tools=list(tools))).run()
    assert rec.ended == "submit" and rec.revealed == ["M1"] and rec.fallback_answers == 2
    assert [e["result"] for e in rec.timeline[:3]] == [phrased, "They are skipped.", NO_ANSWER]
    sim_prompts = [b["messages"][-1]["content"] for b in stub.bodies() if not b.get("tools")]
    # The question with nothing in the behaviour to speak from costs no phrasing request.
    assert len(sim_prompts) == 5 and all(spec.gold.strip()[:60] not in p for p in sim_prompts)
    assert rec.tokens["simulator"] == {"prompt": 25, "completion": 12}  # 3 matches (5+2), 2 phrasings (5+3)
    ledger = {e.id: e.answer for e in spec.interactive.ledger}
    assert ledger["M1"] in sim_prompts[1] and ledger["M2"] not in sim_prompts[1]
    # The fallback phrases from the nearest behaviour sentences, never the whole description.
    behaviour = " ".join(spec.behaviour.split())
    assert "discontinued" in sim_prompts[3] and len(sim_prompts[3]) < len(behaviour)


def test_model_simulator_phrases_once_per_holder_from_that_holders_entries(task: Task, stub: StubServer) -> None:
    from pytest_plsqlbench.generation.client import ModelClient
    from pytest_plsqlbench.procarena.interactive.simulator import HOLDER_ROLE, ModelSimulator

    spec = spec_of(task)
    assert spec.interactive is not None
    ledger = {e.id: e.answer for e in spec.interactive.ledger}

    def respond(body: Mapping[str, Any]) -> Action:
        prompt = body["messages"][-1]["content"]
        if "JSON list of the ids" in prompt:
            return ok('["M1", "M3"]')
        return ok("knowledge says so" if HOLDER_ROLE["knowledge"] in prompt else "requirement says so")

    stub.default = respond
    client = ModelClient("openai/simulator", api_base=stub.api_base, retries=0)
    sim = ModelSimulator(spec.interactive.ledger, spec.behaviour, "openai/simulator",
                         lambda m: (lambda c: (c.text, c.usage))(client.complete(m)))
    reply = sim.ask_user("What is the put-away room, and how does the rating change?")
    assert reply.revealed == ["M1", "M3"] and reply.text == "requirement says so\n\nknowledge says so"
    match, *phrasing = [b["messages"][-1]["content"] for b in stub.bodies()]
    assert "M1 [knowledge]" in match and "M3 [requirement]" in match
    assert len(phrasing) == 2
    req, know = phrasing
    assert ledger["M3"] in req and ledger["M1"] not in req and HOLDER_ROLE["requirement"] in req
    assert ledger["M1"] in know and ledger["M3"] not in know
    # A holder the Solver names is asked about its own entries only.
    pick = sim.ask_selector("How does the rating change?", ["up", "down"], "knowledge")
    routed, selected = [b["messages"][-1]["content"] for b in stub.bodies()][3:]
    assert "M1 [knowledge]" in routed and "[requirement]" not in routed
    # The routing named M3 too; it is not the knowledge holder's, so it is neither used nor revealed.
    assert pick.revealed == ["M1"] and ledger["M3"] not in selected and HOLDER_ROLE["knowledge"] in selected


# --------------------------------------------------------------------------- metrics
def _entry(subset: str, task_id: str, passed: bool, mode: str | None, episode: Mapping[str, Any] | None = None) -> dict:
    meta = {"judge": "procarena", "scenario": "a1", "dialect": "postgres", **({"mode": mode} if mode else {})}
    answers = [{"usage": {"episode": episode}}] if episode else []
    return {"subset": subset, "task_id": task_id, "dialect": "postgres", "metadata": meta, "answers": answers,
            "tests": [{"test_id": "call-1", "passed": passed, "failure_class": None if passed else "wrong_output"}]}


def test_retention_and_tool_shares() -> None:
    ep = {"steps": 4, "ended": "submit", "ledger_size": 4, "revealed": ["M1"], "spent": 3.0,
          "tokens": {"solver": {"prompt": 100, "completion": 20}, "simulator": {"prompt": 0, "completion": 0}},
          "actions": {"get_schema": 1, "ask_user": 1, "bogus": 1, "submit": 1}}
    tasks = [_entry("d", "t1", True, None), _entry("d", "t2", True, None), _entry("d", "t3", False, None),
             _entry("i", "t1", True, "interactive", ep), _entry("i", "t2", False, "interactive", ep),
             _entry("i", "t9", True, "interactive", ep)]
    fig = im.figures([t for t in tasks if t["subset"] == "i"])
    assert fig["episodes"] == 3 and fig["mean_turns"] == 4.0 and fig["mean_tokens"] == 120.0
    assert fig["tool_shares"]["malformed"] == 0.25 and fig["tool_shares"]["get_schema"] == 0.25
    assert fig["ledger_recovery"] == 0.25
    subsets: dict[str, dict[str, Any]] = {"i": {"procarena": {"interactive": fig}}, "d": {"procarena": {}}}
    im.retention(subsets, tasks)
    ret = subsets["i"]["procarena"]["interactive"]["retention"]
    # paired tasks t1, t2 only: Interactive 1/2, Direct 2/2
    assert (ret["pairs"], ret["interactive_ex"], ret["direct_ex"], ret["retention"]) == (2, 0.5, 1.0, 0.5)
    assert any("retention 50.0 %" in line for line in im.summary_lines("i", subsets["i"]["procarena"]["interactive"]))


def test_actions_by_step_are_counts_per_recorded_step_figure_7() -> None:
    def episode(*tools: str) -> dict[str, Any]:
        return {"steps": len(tools), "ended": "submit",
                "timeline": [{"step": i, "tool": t, **({"malformed": True} if t == "ask_user?" else {})}
                             for i, t in enumerate(tools, 1)]}

    eps = [episode("get_schema", "ask_user", "submit"), episode("get_schema", "ask_user?", "bogus", "submit"),
           episode("submit")]
    tasks = [_entry("i", f"t{n}", True, "interactive", ep) for n, ep in enumerate(eps)]
    by_step = im.figures(tasks)["actions_by_step"]
    assert by_step == {"1": {"get_schema": 2, "submit": 1}, "2": {"ask_user": 1, "malformed": 1},
                       "3": {"submit": 1, "malformed": 1}, "4": {"submit": 1}}
    # Counts, not shares: the stack's outline is the attrition (3 episodes at step 1, 1 at step 4).
    assert [sum(v.values()) for v in by_step.values()] == [3, 2, 2, 1]
    svg = im.actions_by_step_svg(by_step)
    assert svg.count("<rect") == 7 and "step 2: malformed 1" in svg and "Figure 7" in svg
    assert im.actions_by_step_svg({}) == ""
    html = im.html({"subsets": {"i": {"procarena": {"interactive": im.figures(tasks)}}}, "tasks": tasks})
    assert "actions-by-step" in html


# --------------------------------------------------------------------------- end to end
def responder(tasks: list[Task]) -> Any:
    """Per conversation: find the task from its prompt, then play the inspector's next step."""
    golds = {spec_of(t).procedure: spec_of(t).gold for t in tasks}

    def respond(body: Mapping[str, Any]) -> Action:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        proc = next(p for p in sorted(golds, key=len, reverse=True) if f"CREATE OR REPLACE PROCEDURE {p}(" in user)
        script = [tool_call("get_schema"), tool_call("ask_user", {"question": "What is not stated explicitly?"}),
                  tool_call("submit", {"answer": golds[proc]})]
        step = len([m for m in body["messages"] if m["role"] == "assistant"])
        return script[min(step, len(script) - 1)]

    return respond


def run(tmp: Path, stub: StubServer | None, *args: str) -> subprocess.CompletedProcess:
    model = ["--plsql-model=openai/stub", f"--plsql-api-base={stub.api_base}"] if stub else ["--plsql-model=reference"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--plsql-tasks", str(REPO / "tasks"),
         "--plsql-cache", str(tmp / "cache"), *model, *args, "-q"],
        cwd=tmp, capture_output=True, text=True, timeout=900,
    )


@pytest.mark.slow
def test_end_to_end_two_workers_and_episode_cache(tmp_path: Path, stub: StubServer) -> None:
    ids = ["postgres_a1_000", "postgres_b3_000"]
    tasks = [t for t in _tasks(INTERACTIVE, "procarena-sample-interactive") if t.id in ids]
    stub.default = responder(tasks)
    out = tmp_path / "r1.json"
    proc = run(tmp_path, stub, "--subset", "procarena-sample-interactive", "--plsql-task", ",".join(ids),
               "-n", "2", f"--plsql-results={out}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert stub.count == 6  # three requests per episode
    doc = json.loads(out.read_text())
    fam = doc["subsets"]["procarena-sample-interactive"]["procarena"]
    assert fam["ex"] == 1.0 and fam["interactive"]["episodes"] == 2 and fam["interactive"]["mean_turns"] == 3.0
    assert fam["interactive"]["tool_shares"]["ask_user"] == pytest.approx(1 / 3)
    for entry in doc["tasks"]:
        ep = entry["answers"][0]["usage"]["episode"]
        assert ep["ended"] == "submit" and ep["spent"] == 3.0 and [e["tool"] for e in ep["timeline"]] == [
            "get_schema", "ask_user", "submit"]
    assert "Interactive -- procarena-sample-interactive: 2 episode(s); mean turns 3.0" in proc.stdout
    # a rerun plays every episode from the cache: no request, the same scores
    out2 = tmp_path / "r2.json"
    proc = run(tmp_path, stub, "--subset", "procarena-sample-interactive", "--plsql-task", ",".join(ids),
               "-n", "2", f"--plsql-results={out2}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert stub.count == 6
    doc2 = json.loads(out2.read_text())
    assert [(t["task_id"], [x["passed"] for x in t["tests"]]) for t in doc2["tasks"]] == \
        [(t["task_id"], [x["passed"] for x in t["tests"]]) for t in doc["tasks"]]
    assert all(t["answers"][0]["source"] == "cache" for t in doc2["tasks"])


@pytest.mark.slow
def test_a_failed_episode_is_not_served_and_plays_again_from_its_start(tmp_path: Path, stub: StubServer) -> None:
    from stub_openai import error

    (t,) = [t for t in _tasks(INTERACTIVE, "procarena-sample-interactive") if t.id == TASK]
    stub.push(tool_call("get_schema"), error(503))  # the provider fails mid-episode
    args = ("--subset", "procarena-sample-interactive", "--plsql-task", TASK, "--plsql-retries=0", "-n", "0")
    proc = run(tmp_path, stub, *args, f"--plsql-results={tmp_path / 'r1.json'}")
    assert stub.count == 2 and "infrastructure" in proc.stdout.lower(), proc.stdout[-2000:]
    doc = json.loads((tmp_path / "r1.json").read_text())
    assert doc["tasks"][0]["answers"][0]["status"] == "error"
    # a provider failure is not an episode: nothing is cached, nothing counted
    assert not [p for p in (tmp_path / "cache" / "episodes").rglob("*.json") if ".locks" not in p.parts]
    stub.default = responder([t])
    proc = run(tmp_path, stub, *args, f"--plsql-results={tmp_path / 'r2.json'}")
    assert proc.returncode == 0, proc.stdout[-2000:]
    # the whole episode again, from its first step: three requests, none reused from the failed one
    assert stub.count == 5 and len(stub.bodies()[2]["messages"]) == 2
    assert len(list((tmp_path / "cache" / "episodes").rglob("*.json"))) == 1


@pytest.mark.slow
def test_reference_with_both_subsets_gives_retention(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run(tmp_path, None, "--subset", "procarena-sample,procarena-sample-interactive", "--plsql-task", TASK,
               f"--plsql-results={out}", "-n", "0")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    inter = doc["subsets"]["procarena-sample-interactive"]["procarena"]["interactive"]
    assert inter["retention"]["pairs"] == 1 and inter["retention"]["retention"] == 1.0
    assert inter["endings"] == {"submit": 1} and inter["mean_budget_spent"] == 0.0
    # gold's episode called no model: its answer is counted by source only, like Direct gold
    assert doc["usage"]["generated"] == 0 and doc["usage"]["by_source"] == {"reference": 2}
    # retention from two results files: split this document into a Direct and an Interactive one
    for name in ("procarena-sample", "procarena-sample-interactive"):
        part = {**doc, "subsets": {name: doc["subsets"][name]}, "tasks": [t for t in doc["tasks"] if t["subset"] == name]}
        (tmp_path / f"{name}.json").write_text(json.dumps(part))
    two = subprocess.run([sys.executable, "-m", "pytest_plsqlbench.procarena.interactive.metrics",
                          str(tmp_path / "procarena-sample.json"), str(tmp_path / "procarena-sample-interactive.json")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stdout + two.stderr
    assert "retention 100.0 % = Interactive EX 100.0 / Direct EX 100.0 over 1 paired task(s)" in two.stdout
    html = tmp_path / "r.html"
    rep = subprocess.run([sys.executable, "-m", "pytest_plsqlbench.cli", "report", str(out), "--format", "html",
                          "-o", str(html)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr[-2000:]
    text = html.read_text()
    # one episode's timeline, readable: the submit step of the reference episode
    assert "ProcArena Interactive" in text and "<details><summary>postgres_a1_000: EX pass, ended by submit" in text
    assert "<td>submit</td>" in text and "retention 100.0 %" in text


def test_interactive_run_checks_the_model_before_any_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Interactive tasks are left out of the generation layer's start-of-run check (their episodes
    play on the workers), so their own check names a missing key once, before any test runs."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with StubServer() as stub:
        proc = run(tmp_path, stub, "--subset", "procarena-sample-interactive", "--plsql-task", TASK, "-n", "2")
        assert stub.count == 0
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "OPENAI_API_KEY" in errors[0] and "Traceback" not in proc.stderr + proc.stdout
    assert " passed" not in proc.stdout


def test_the_episode_timeline_in_html_is_text_only() -> None:
    """Tool arguments and results are the model's; counts come from a results file, which can be
    edited: none of it becomes markup."""
    from pytest_plsqlbench.procarena.interactive.metrics import timeline_html

    bad = "<img src=x onerror=alert(1)>"
    ep = {"ended": bad, "steps": bad, "spent": bad, "budget_limit": bad, "ledger_size": bad, "revealed": [bad],
          "timeline": [{"step": bad, "tool": bad, "args": {"sql": bad}, "result": bad, "cost": bad, "spent": bad}]}
    entry = {"task_id": bad, "tests": [{"passed": False, "failure_class": "wrong_output"}]}
    page = timeline_html(entry, ep)
    assert bad not in page and page.count("&lt;img") >= 10


def test_text_no_database_can_take_is_a_malformed_action_not_the_end_of_the_episode(
        backend: Any, task: Task, stub: StubServer) -> None:
    """A lone surrogate (``\\ud800`` in the arguments' JSON) in a scratch query, a question or a
    submission escaped the episode as the harness's error: infrastructure, the task left out."""
    raw = '{"sql": "SELECT \'\\ud800\'"}'
    stub.push(tool_call("execute_scratch", raw), tool_call("ask_user", '{"question": "why \\ud800?"}'),
              tool_call("submit", '{"answer": "CREATE PROCEDURE p() LANGUAGE sql AS $$ SELECT \'\\ud800\' $$;"}'),
              tool_call("submit", {"answer": "x"}))
    rec = play(backend, task, stub)
    assert rec.ended == "submit" and rec.submission == "x" and rec.error is None
    assert rec.actions.get("malformed") == 3, rec.actions
    assert all("not valid Unicode" in e["result"] for e in rec.timeline[:3])


def test_a_refusal_ends_the_episode_as_the_models_failure(backend: Any, task: Task, stub: StubServer) -> None:
    """A Solver can fill its own context on purpose (its actions come back in every request): the
    provider's refusal ended the episode in error, which left the task out of the metrics. It is
    the model's failure, as in Direct mode: an empty submission."""
    from pytest_plsqlbench.procarena.interactive.episode import answer_of

    from stub_openai import context_too_long

    stub.push(tool_call("get_schema"), context_too_long())
    rec = play(backend, task, stub)
    assert rec.ended == "refused" and rec.submission is None
    answer = answer_of(rec, source="model", cached=False)
    assert answer.status == "ok" and answer.code == "" and "refused" in (answer.error or "")


def test_an_episode_the_provider_fails_run_after_run_never_costs_the_task(tmp_path: Path, stub: StubServer) -> None:
    """As in Direct mode: a provider failure is the harness's trouble in every run that meets it
    (never cached, never counted), and once the provider is back the episode is played and scored."""
    from stub_openai import malformed

    (t,) = [t for t in _tasks(INTERACTIVE, "procarena-sample-interactive") if t.id == TASK]
    stub.default = malformed()
    args = ("--subset", "procarena-sample-interactive", "--plsql-task", TASK, "--plsql-retries=0", "-n", "0")
    statuses = []
    for n in range(1, 5):
        proc = run(tmp_path, stub, *args, f"--plsql-results={tmp_path / f'r{n}.json'}")
        assert proc.returncode != 0, proc.stdout[-2000:]
        doc = json.loads((tmp_path / f"r{n}.json").read_text())
        statuses.append(doc["tasks"][0]["answers"][0]["status"])
    assert statuses == ["error"] * 4 and stub.count == 4
    assert {r["failure_class"] for r in doc["tasks"][0]["tests"]} == {"infrastructure"}
    stub.default = responder([t])
    proc = run(tmp_path, stub, *args, f"--plsql-results={tmp_path / 'back.json'}")
    assert proc.returncode == 0, proc.stdout[-2000:]
    doc = json.loads((tmp_path / "back.json").read_text())
    assert doc["tasks"][0]["answers"][0]["status"] == "ok"
    assert all(r["passed"] for r in doc["tasks"][0]["tests"])


def test_actions_and_the_episode_are_bounded_in_wall_time(backend: Any, task: Task, stub: StubServer) -> None:
    """Issue 28: an action stops at its price's share of --plsql-task-timeout (the Solver's
    failure, answered with an error), and the episode's actions share that budget: a Solver
    that sends only slow scripts gets its last turn once it is used up."""
    sleepy = "; ".join(["SELECT pg_sleep(4)"] * 5)
    plsql = ("CREATE OR REPLACE PROCEDURE answers.slow() LANGUAGE plpgsql AS $$ BEGIN NULL; END $$; "
             + "; ".join(["SELECT pg_sleep(4)"] * 5))
    stub.default = lambda body: (tool_call("execute_scratch", {"sql": sleepy})
                                 if len([m for m in body["messages"] if m["role"] == "assistant"]) % 2 == 0
                                 else tool_call("compile_plsql", {"code": plsql}))
    envs: list[Environment] = []
    rec = play(backend, task, stub, time_budget=6.0, envs=envs)
    assert rec.ended == "time" and rec.final_turn == "time" and rec.submission is None
    # 17 units over 6 s: execute_scratch (1 unit) may run 0.35 s, compile_plsql (0.5) 0.18 s, each
    # stopped within the watchdog's second of grace (a script of five 4 s sleeps ran 20 s before)
    results = [e["result"] for e in rec.timeline if e["tool"] in ("execute_scratch", "compile_plsql")]
    assert results and all("ran past its share of the episode's time" in r for r in results)
    assert rec.spent < rec.budget_limit  # time ended it, not units
    # the actions' time (not the model's): the budget, and at most one action's stop past it
    assert 6.0 <= envs[0].spent_s < 6.0 + 3.0, f"the actions took {envs[0].spent_s:.1f}s against a 6 s budget"
    assert len(results) >= 4
    last = stub.bodies()[-1]
    assert [t["function"]["name"] for t in last["tools"]] == ["submit"]
    assert "--plsql-task-timeout" in last["messages"][-1]["content"]


def test_an_action_within_its_share_runs_as_before(backend: Any, task: Task) -> None:
    env = Environment(backend, task, time_budget=300.0)
    env.start()
    try:
        out = env.call("execute_scratch", {"sql": "SELECT pg_sleep(0.2); SELECT 41 + 1"}, share=5.0)
    finally:
        env.close()
    assert out.split()[-1] == "42" and env.spent_s >= 0.2 and "share" not in out

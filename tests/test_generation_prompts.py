"""Prompts (paper App. F/G), code extraction and model aliases: the pure parts of generation."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_plsqlbench.answers import Answer, Exchange
from pytest_plsqlbench.generation import render_prompt, resolve_model, rollout_exchange
from pytest_plsqlbench.generation.extract import extract_code
from pytest_plsqlbench.generation.models import BUILTIN_ALIASES, is_real_model
from pytest_plsqlbench.generation.prompts import EMPTY_ANSWER, build_messages, system_prompt

from stub_openai import demo_task

# ----------------------------------------------------------------------------- prompts


def test_system_prompts_ask_for_executable_code_only() -> None:
    oracle, pg = system_prompt("oracle"), system_prompt("postgres")
    for text in (oracle, pg):
        assert "no markdown" in text and "no explanations" in text
    assert "slash (/)" in oracle and "DBMS_OUTPUT.PUT_LINE" in oracle
    assert "$$" in pg and "RAISE NOTICE" in pg and "never use a slash" in pg
    with pytest.raises(ValueError):
        system_prompt("mysql")


def test_schema_ddl_goes_with_the_first_turn() -> None:
    task = demo_task(1, turns=2, schema_ddl="CREATE TABLE t (x NUMBER);")
    first = build_messages(task, 1)
    assert [m["role"] for m in first] == ["system", "user"]
    assert "CREATE TABLE t (x NUMBER);" in first[1]["content"]
    assert first[1]["content"].index("CREATE TABLE") < first[1]["content"].index(task.turns[0].prompt)
    no_schema = build_messages(demo_task(2), 1)
    assert no_schema[1]["content"] == demo_task(2).turns[0].prompt


def test_multi_turn_rollout_uses_the_models_own_answers() -> None:
    task = demo_task(1, turns=3, dialect="postgres")
    own = [Answer(code="-- my turn 1"), Answer(code="")]
    history = tuple(rollout_exchange(t, a) for t, a in zip(task.turns, own))
    messages = build_messages(task, 3, history)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[2]["content"] == "-- my turn 1"
    assert messages[4]["content"] == EMPTY_ANSWER  # providers reject empty assistant messages
    assert messages[5]["content"] == task.turns[2].prompt
    assert messages[0]["content"] == system_prompt("postgres")
    with pytest.raises(ValueError):
        build_messages(task, 3, history[:1])


def test_render_prompt_single_turn_is_the_exact_request() -> None:
    task = demo_task(7, schema_ddl="CREATE TABLE t (x NUMBER);")
    text = render_prompt(task)
    for msg in build_messages(task, 1):
        assert msg["content"] in text
    assert "--- system ---" in text and "--- user ---" in text


def test_render_prompt_multi_turn_labels_reference_stand_ins() -> None:
    task = demo_task(3, turns=3)
    text = render_prompt(task)
    for turn in task.turns:
        assert turn.prompt in text
    assert text.count("reference answer standing in") == 2
    assert task.turns[0].reference in text and task.turns[2].reference not in text
    one = render_prompt(task, history=(Exchange("p", "-- mine"),))
    assert "turn 2 of 3" in one and "-- mine" in one


# ----------------------------------------------------------------------------- extraction

CODE = "CREATE OR REPLACE FUNCTION f(p NUMBER) RETURN NUMBER IS\nBEGIN\n  RETURN p + 1;\nEND;\n/"


@pytest.mark.parametrize(
    "reply",
    [
        CODE,
        f"```sql\n{CODE}\n```",
        f"```plsql\n{CODE}\n```\n",
        f"Sure! Here is the function:\n\n```\n{CODE}\n```\n\nIt adds one to p.",
        f"Here is the function:\n{CODE}\nThis function returns p + 1.\nLet me know if you need more.",
        f"<think>The user wants f. I will write it.</think>\n{CODE}",
        f"```sql\n{CODE}",  # a fence cut off by max tokens
        f"{CODE}\r\n".replace("\n", "\r\n"),
    ],
    ids=["bare", "fenced-sql", "fenced-plsql", "prose-and-fence", "prose-around", "think", "unclosed", "crlf"],
)
def test_extract_code(reply: str) -> None:
    assert extract_code(reply, "oracle") == CODE


def test_extract_joins_split_sql_blocks_and_ignores_others() -> None:
    spec = "CREATE OR REPLACE PACKAGE p IS PROCEDURE a; END p;\n/"
    body = "CREATE OR REPLACE PACKAGE BODY p IS PROCEDURE a IS BEGIN NULL; END; END p;\n/"
    reply = f"Spec:\n```sql\n{spec}\n```\nBody:\n```sql\n{body}\n```\nTest it with:\n```python\nprint(1)\n```"
    assert extract_code(reply, "oracle") == f"{spec}\n\n{body}"


def test_extract_postgres_keeps_dollar_quoting() -> None:
    code = ("CREATE OR REPLACE FUNCTION f(p int) RETURNS int AS $$\nBEGIN\n  RETURN p + 1;\nEND;\n"
            "$$ LANGUAGE plpgsql;")
    assert extract_code(f"Here you go:\n\n{code}\n\nExplanation: adds one.", "postgres") == code
    assert extract_code(f"```pgsql\n{code}\n```", "postgres") == code


def test_extract_without_code_keeps_the_text() -> None:
    assert extract_code("", "oracle") == ""
    assert extract_code(None, "oracle") == ""
    assert extract_code("I cannot help with that.", "oracle") == "I cannot help with that."


# ----------------------------------------------------------------------------- aliases


def test_aliases_resolve_and_ini_overrides() -> None:
    assert resolve_model("claude") == BUILTIN_ALIASES["claude"]
    assert resolve_model("openai/gpt-4o") == "openai/gpt-4o"
    assert resolve_model("claude", {"claude": "anthropic/claude-sonnet-4-6"}) == "anthropic/claude-sonnet-4-6"
    assert resolve_model("mine", {"mine": "ollama/llama3"}) == "ollama/llama3"
    assert not is_real_model("reference") and not is_real_model(None) and is_real_model("gpt")


def test_builtin_aliases_exist_in_litellms_cost_map() -> None:
    """Every built-in alias names a model the installed litellm prices (checked offline)."""
    script = (
        "import json, sys; from pytest_plsqlbench.generation.client import load_litellm\n"
        "from pytest_plsqlbench.generation.models import BUILTIN_ALIASES\n"
        "litellm = load_litellm()\n"
        "missing = [a for a, m in BUILTIN_ALIASES.items() if m not in litellm.model_cost and "
        "m.split('/', 1)[1] not in litellm.model_cost]\n"
        "unpriced = [a for a, m in BUILTIN_ALIASES.items() if litellm.get_model_info(m).get('input_cost_per_token') is None]\n"
        "print(json.dumps([missing, unpriced]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[[], []]"


def test_importing_the_generation_layer_does_not_import_litellm() -> None:
    code = ("import sys, pytest_plsqlbench.generation, pytest_plsqlbench.generation.plugin;"
            "print('litellm' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.stdout.strip() == "False", proc.stderr

"""``--plsql-price IN,OUT`` (USD per million tokens): a custom endpoint's answers get a cost
instead of "unknown" -- through the real litellm client against the stub server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_plsqlbench.errors import UsageError
from pytest_plsqlbench.generation.client import ModelClient
from pytest_plsqlbench.settings import parse_price

from stub_openai import StubServer, ok
from test_generation_e2e import reference_responder

MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Write p."}]


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stub-not-a-key")
    with StubServer() as server:
        yield server


@pytest.mark.parametrize(("text", "want"), [("0.15,0.60", (0.15, 0.6)), (" 3 , 15 ", (3.0, 15.0)), ("$1,$2", (1.0, 2.0)),
                                            ("0,0", (0.0, 0.0)), (None, None), ("", None)])
def test_parse_price(text: str | None, want: object) -> None:
    assert parse_price(text) == want


@pytest.mark.parametrize("text", ["1", "1,2,3", "a,b", "-1,2", "inf,1", "nan,1"])
def test_a_bad_price_is_one_clear_error(text: str) -> None:
    with pytest.raises(UsageError, match=r"--plsql-price: expected INPUT,OUTPUT in USD per million tokens"):
        parse_price(text)


def test_price_gives_the_cost_of_an_unpriced_endpoint(stub: StubServer) -> None:
    stub.push(ok("BEGIN NULL; END;", prompt_tokens=1200, completion_tokens=300))
    stub.push(ok("BEGIN NULL; END;", prompt_tokens=1200, completion_tokens=300))
    unpriced = ModelClient("openai/stub", api_base=stub.api_base, timeout=5, retries=0).complete(MESSAGES)
    assert unpriced.usage["cost_usd"] is None
    priced = ModelClient("openai/stub", api_base=stub.api_base, timeout=5, retries=0, price=(0.15, 0.6)).complete(MESSAGES)
    assert priced.usage["cost_usd"] == pytest.approx((1200 * 0.15 + 300 * 0.6) / 1e6)


def test_the_users_price_wins_over_litellms_map(stub: StubServer) -> None:
    stub.push(ok("BEGIN NULL; END;", prompt_tokens=1000, completion_tokens=500))
    completion = ModelClient("openai/gpt-5.4", api_base=stub.api_base, timeout=5, retries=0,
                             price=(1.0, 2.0)).complete(MESSAGES)
    assert completion.usage["cost_usd"] == pytest.approx((1000 * 1.0 + 500 * 2.0) / 1e6)


@pytest.mark.slow
def test_a_run_with_a_price_reports_its_cost(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stub-not-a-key")
    monkeypatch.setenv("PLSQL_PRICE", "2,8")  # the environment variable, as a CI job would set it
    with StubServer(default=reference_responder()) as stub:
        result = pytester.runpytest_subprocess(
            "--subset", "smoke", "--plsql-dialect=postgres", "--plsql-model=openai/stub",
            f"--plsql-api-base={stub.api_base}", "-p", "no:cacheprovider", "--plsql-task=clamp_value,initials",
            "--plsql-results=r.json", "-n", "0", timeout=600,
        )
        asked = stub.count
    assert result.ret == 0, result.stdout.str()[-3000:]
    usage = json.loads(Path(pytester.path / "r.json").read_text())["usage"]
    assert asked == 2 and usage["cost_known"] and not usage.get("cost_unknown")
    # The stub reports 11 prompt and 7 completion tokens per reply.
    assert usage["cost_usd"] == pytest.approx(asked * (11 * 2 + 7 * 8) / 1e6)
    line = next(x for x in result.stdout.lines if x.startswith("generation ("))
    assert f"cost ${usage['cost_usd']:.4f}" in line and "unknown" not in line

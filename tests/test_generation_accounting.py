"""Accounting: tokens, cost and latency summed from answers' usage into one end-of-run line."""

from __future__ import annotations

from pytest_plsqlbench.generation import summarize_usage, totals

GENERATED = {"model": "openai/gpt-5.4", "prompt_tokens": 1000, "completion_tokens": 500, "cost_usd": 0.01,
             "latency_s": 2.0, "status": "ok", "cached": False}
CACHED = {**GENERATED, "cached": True, "cost_usd": 0.02}
FAILED = {"model": "openai/gpt-5.4", "attempts": 6, "status": "error", "cached": False}
UNPRICED = {"model": "openai/gpt-5.4", "prompt_tokens": 10, "completion_tokens": 5, "cost_usd": None,
            "latency_s": 4.0, "status": "ok", "cached": False}


def test_totals_separate_this_runs_cost_from_cached() -> None:
    t = totals([GENERATED, CACHED, FAILED, UNPRICED, None])
    assert (t["answers"], t["generated"], t["cached"], t["failed"], t["not_generated"]) == (5, 2, 1, 1, 1)
    assert t["prompt_tokens"] == 2010 and t["completion_tokens"] == 1005
    assert abs(t["cost_usd"] - 0.01) < 1e-12 and abs(t["cached_cost_usd"] - 0.02) < 1e-12
    assert t["cost_unknown"] == 1
    assert sorted(t["latencies"]) == [2.0, 4.0]  # cached answers cost no time now
    assert t["models"] == ["openai/gpt-5.4"]


def test_summary_line() -> None:
    line = summarize_usage([GENERATED, CACHED, FAILED, UNPRICED, None])
    assert line.startswith("generation (openai/gpt-5.4): 5 answers: 2 generated, 1 cached, 1 failed, 1 not generated")
    assert "tokens 2,010 in / 1,005 out" in line
    assert "cost $0.0100 (+$0.0200 cached), unknown for 1" in line
    assert "latency mean 3.00s" in line


def test_summary_of_nothing() -> None:
    assert summarize_usage([]).startswith("generation (no model): 0 answers")

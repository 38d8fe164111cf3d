"""Tokens, cost and latency of a run, summed up from the ``usage`` of its answers.

Every answer from the generation layer carries a usage mapping: ``model``, ``prompt_tokens``,
``completion_tokens``, ``cost_usd`` (litellm's bundled cost map; None when the model has no
price there), ``latency_s`` (the successful request), ``attempts``, ``status`` and ``cached``
(True when the answer was reused from an earlier run: its cost was paid then, not now).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def totals(usages: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    """Sums over answers' usage mappings (None/empty entries count as not generated)."""
    out: dict[str, Any] = {
        "answers": 0, "generated": 0, "cached": 0, "failed": 0, "not_generated": 0,
        "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "cached_cost_usd": 0.0,
        "cost_unknown": 0, "models": [], "latencies": [],
    }
    models: dict[str, None] = {}
    for usage in usages:
        out["answers"] += 1
        if not usage:
            out["not_generated"] += 1
            continue
        if usage.get("model"):
            models[str(usage["model"])] = None
        status = usage.get("status", "ok")
        if status == "not_generated":
            out["not_generated"] += 1
            continue
        if status == "error":
            out["failed"] += 1
        elif usage.get("cached"):
            out["cached"] += 1
        else:
            out["generated"] += 1
        for name in ("prompt_tokens", "completion_tokens"):
            out[name] += int(_num(usage.get(name)) or 0)
        cost = _num(usage.get("cost_usd"))
        if status != "error":
            if cost is None:
                out["cost_unknown"] += 1
            elif usage.get("cached"):
                out["cached_cost_usd"] += cost
            else:
                out["cost_usd"] += cost
        latency = _num(usage.get("latency_s"))
        if latency is not None and not usage.get("cached") and status != "error":
            out["latencies"].append(latency)
    out["models"] = list(models)
    return out


def summarize_usage(usages: Iterable[Mapping[str, Any] | None]) -> str:
    """One line for the end of a run, e.g.
    ``generation (openai/gpt-5.4): 40 answers: 28 generated, 12 cached, 0 failed; tokens 12,345 in /
    6,789 out; cost $0.1234 (+$0.0456 cached); latency mean 2.10s p95 4.30s``."""
    t = totals(usages)
    models = ", ".join(t["models"]) or "no model"
    parts = [
        f"generation ({models}): {t['answers']} answers: {t['generated']} generated, {t['cached']} cached, "
        f"{t['failed']} failed" + (f", {t['not_generated']} not generated" if t["not_generated"] else "")
    ]
    parts.append(f"tokens {t['prompt_tokens']:,} in / {t['completion_tokens']:,} out")
    cost = f"cost ${t['cost_usd']:.4f}"
    if t["cached_cost_usd"]:
        cost += f" (+${t['cached_cost_usd']:.4f} cached)"
    if t["cost_unknown"]:
        cost += f", unknown for {t['cost_unknown']}"
    parts.append(cost)
    if t["latencies"]:
        lat = t["latencies"]
        parts.append(f"latency mean {sum(lat) / len(lat):.2f}s p95 {_percentile(lat, 0.95):.2f}s")
    return "; ".join(parts)

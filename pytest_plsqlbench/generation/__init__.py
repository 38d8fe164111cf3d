"""Answers from language models: prompts, litellm calls, a shared disk cache, prefetch, accounting.

What the core uses: :func:`render_prompt` (``--plsql-show-prompt``), :func:`rollout_exchange`
(multi-turn history), :func:`summarize_usage` (end-of-run line), :func:`runtime_info` (results
header) and the hookimpls in :mod:`.plugin`. Nothing here imports litellm; only a real model
request does (:mod:`.client`).
"""

from .accounting import summarize_usage, totals
from .client import runtime_info
from .models import BUILTIN_ALIASES, is_real_model, resolve_model
from .prompts import build_messages, render_prompt, rollout_exchange, system_prompt

__all__ = [
    "BUILTIN_ALIASES",
    "build_messages",
    "is_real_model",
    "render_prompt",
    "resolve_model",
    "rollout_exchange",
    "runtime_info",
    "summarize_usage",
    "system_prompt",
    "totals",
]

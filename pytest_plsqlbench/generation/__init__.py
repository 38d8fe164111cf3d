"""Answers from language models: prompts, litellm calls, a shared disk cache, prefetch, progress.

What the core uses: :func:`render_prompt` (``--plsql-show-prompt``), :func:`rollout_exchange`
(multi-turn history), :func:`runtime_info` (results header) and the hookimpls in :mod:`.plugin`.
Each answer's ``usage`` goes into the results document; the end-of-run usage line is the
summary's (:func:`pytest_plsqlbench.results.usage_totals`, rendered by
:func:`pytest_plsqlbench.summary.usage_line`). Nothing here imports litellm; only a real model
request does (:mod:`.client`).
"""

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
    "system_prompt",
]

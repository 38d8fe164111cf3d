"""Short model aliases and their litellm model strings.

Aliases name the families the paper evaluates (App. G), pinned to model strings present in the
installed litellm's bundled cost map, so costs are known. The ini key ``plsql_model_aliases``
extends and overrides them (``claude = anthropic/claude-sonnet-4-6``); any other name is
passed to litellm unchanged (``openai/…``, ``ollama/…``, ``gemini/…``).
"""

from __future__ import annotations

from collections.abc import Mapping

#: Built-in aliases; every target must exist in litellm's model cost map (a test checks it).
BUILTIN_ALIASES: Mapping[str, str] = {
    "claude": "anthropic/claude-opus-4-8",
    "claude-opus": "anthropic/claude-opus-4-8",
    "claude-sonnet": "anthropic/claude-sonnet-4-6",
    "claude-haiku": "anthropic/claude-haiku-4-5",
    "gpt": "openai/gpt-5.4",
    "gpt-mini": "openai/gpt-5.4-mini",
    "gpt-sol": "openai/gpt-5.6-sol",
    "gemini": "gemini/gemini-2.5-pro",
    "gemini-flash": "gemini/gemini-2.5-flash",
    "gemini-flash-lite": "gemini/gemini-2.5-flash-lite",
    "gemma": "gemini/gemma-4-31b-it",
    "grok": "xai/grok-4.3",
}

#: Model names that are not models: answers come from elsewhere (see answers.py).
NOT_A_MODEL = frozenset({"reference"})


def aliases(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """Built-in aliases updated with the ini's."""
    merged = dict(BUILTIN_ALIASES)
    merged.update(overrides or {})
    return merged


def resolve_model(name: str, overrides: Mapping[str, str] | None = None) -> str:
    """The litellm model string for ``name`` (an alias, or already a model string).

    Aliases resolve one level only, so an ini alias may point at a built-in target but a typo
    cannot loop.
    """
    name = name.strip()
    return aliases(overrides).get(name, name)


def is_real_model(name: str | None) -> bool:
    """True when ``name`` means "call a model" rather than reference answers or nothing."""
    return bool(name) and name.strip() not in NOT_A_MODEL  # type: ignore[union-attr]

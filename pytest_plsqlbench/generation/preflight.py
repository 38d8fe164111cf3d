"""Fail fast: a model that cannot be called is one usage error before any test runs.

Without this a typo in ``--plsql-model`` or a missing key turned every answer into a provider
error and every test item into an infrastructure failure, found after the whole run. Three
checks, on the process that owns the terminal (the xdist controller, or ``-n 0``), only when
some answer must actually be generated (a rerun from the cache imports nothing and calls no one):

1. litellm knows a provider for the model string (else: not an alias, not ``provider/model``);
2. the provider's keys are in the environment (litellm's own table of which variable);
3. the first answer the run needs is generated here, first: a refused key, an unknown model,
   a request the provider rejects as malformed, or a provider that cannot be reached at all
   (after the request's retries) stops the run with the provider's words and the fix. The
   answer is the run's own (cached, then used by the worker that owns the task), so the check
   costs no extra request. It is skipped when ``-k``/``-m``/``--deselect``/
   ``--lf`` may deselect that task, so no answer is paid for a task that will not run.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pytest

from ..errors import UsageError
from ..tasks import Task
from .client import ProviderError, load_litellm
from .models import aliases

if TYPE_CHECKING:
    from .service import AnswerService

log = logging.getLogger(__name__)


def check_model(name: str, model: str, api_base: str | None, overrides: Mapping[str, str] | None = None) -> None:
    """Checks 1 and 2; raise UsageError naming the fix."""
    litellm = load_litellm()
    known = aliases(overrides)
    try:
        provider = litellm.get_llm_provider(model=model, api_base=api_base)[1]
    except Exception:  # noqa: BLE001 - litellm raises BadRequestError ("LLM Provider NOT provided")
        close = difflib.get_close_matches(name, [*known, "reference"], n=3)
        hint = f" Did you mean {' or '.join(close)}?" if close else ""
        raise UsageError(
            f"--plsql-model={name}: not a model litellm can call. Give an alias "
            f"({', '.join(sorted(known))}) or a litellm model string 'provider/model' "
            f"(e.g. anthropic/claude-sonnet-4-6, openai/gpt-5.4, ollama/llama3).{hint}"
        ) from None
    try:
        missing = list(litellm.validate_environment(model=model, api_base=api_base).get("missing_keys") or [])
    except Exception:  # noqa: BLE001 - an unknown table entry: the request will tell
        log.debug("litellm.validate_environment failed for %s", model, exc_info=True)
        missing = []
    if missing:
        local = (
            f" A local server at {api_base} that takes no key accepts any value (export {missing[0]}=unused)."
            if api_base else ""
        )
        raise UsageError(
            f"--plsql-model={name} ({model}, provider {provider}) needs {' and '.join(missing)} in the "
            f"environment: export {missing[0]}=... before running pytest.{local}"
        )


def provider_hint(model: str, error: ProviderError) -> str:
    """What to change after a permanent provider error, by its status."""
    provider = model.split("/", 1)[0] if "/" in model else "the provider"
    if error.status_code == 401:
        return f"the key was refused: check {provider.upper()}_API_KEY (or the key variable litellm names for {provider})"
    if error.status_code == 403:
        return "the key may not use this model: check the account's access, or choose another --plsql-model"
    if error.status_code == 404:
        return f"the provider does not know {model!r}: check --plsql-model (and --plsql-api-base)"
    return "check --plsql-model, --plsql-api-base and the request options (--plsql-temperature, --plsql-max-tokens)"


def may_deselect(config: pytest.Config) -> bool:
    """True when the run's selection may drop tasks we cannot see from the controller."""
    option = config.option
    return bool(
        getattr(option, "keyword", "") or getattr(option, "markexpr", "") or getattr(option, "deselect", None)
        or getattr(option, "lf", False) or getattr(option, "failedfirst", False)
    )


def preflight(
    config: pytest.Config, service: AnswerService, tasks: Sequence[Task], *, name: str, model: str,
    api_base: str | None, overrides: Mapping[str, str] | None, samples: int,
) -> None:
    """Run the checks when some first-turn answer is not in the cache; raise UsageError."""
    # The first answer the run needs; a cached rerun reads every entry once and stops here.
    pending = next(((t, s) for t in tasks for s in range(samples) if not service.cached(t, 1, (), s)), None)
    if pending is None:
        return
    check_model(name, model, api_base, overrides)
    if may_deselect(config):
        return
    task, sample = pending
    service.obtain(task, 1, (), sample)
    error = service.permanent_error
    if error is not None:
        raise UsageError(f"--plsql-model={name} ({model}) cannot be called: {error}. Fix: {provider_hint(model, error)}")
    unreachable = service.unreachable_error
    if unreachable is not None:
        # Every later request would wait through the same retries, and every task would be left
        # out as infrastructure: a run that scores nothing, found only at its end.
        where = f" at {api_base}" if api_base else ""
        raise UsageError(
            f"--plsql-model={name} ({model}): the provider{where} could not be reached "
            f"({unreachable.attempts} attempt(s)): {str(unreachable).rstrip('. ')}. Fix: check the network (a proxy?), "
            "the provider's status and --plsql-api-base; nothing was scored"
        )

"""One model request through litellm: bounded retries, backoff honouring ``Retry-After``, usage.

litellm is imported here and only here, lazily, on the first real request (``import litellm``
takes seconds; collection, ``reference`` and cache-only runs never pay for it). Before the import
the environment is set so litellm uses the cost map bundled with the installed version and never
fetches anything itself: the only network traffic of a run is to the model endpoint.

litellm's own retries (and the OpenAI SDK's) are switched off so that ``--plsql-retries`` is the
one bound: a request is tried at most ``1 + retries`` times, retrying 429, 5xx, timeouts,
connection errors and malformed replies with exponential backoff and jitter, or exactly the
provider's ``Retry-After`` when it sends one.
"""

from __future__ import annotations

import atexit
import contextlib
import email.utils
import functools
import gc
import importlib.metadata
import logging
import os
import random
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ..settings import litellm_environment

log = logging.getLogger(__name__)

#: Environment set before importing litellm (``setdefault``: a user's explicit choice wins).
LITELLM_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}
#: A provider's Retry-After is honoured up to this many seconds.
MAX_RETRY_AFTER = 300.0
#: finish_reason values saying the provider broke off the reply on its side: such a reply is
#: kept (and scored) but retry-eligible, so the next run asks again. ``length`` is not here: a
#: reply that ran out of tokens is the model's doing.
INTERRUPTED_FINISH_REASONS = frozenset({"error", "timeout", "cancelled", "canceled", "abort", "aborted"})

_import_lock = threading.Lock()
_litellm: ModuleType | None = None


@functools.lru_cache(maxsize=1)
def litellm_version() -> str | None:
    """The installed litellm version, without importing it."""
    try:
        return importlib.metadata.version("litellm")
    except importlib.metadata.PackageNotFoundError:
        return None


def runtime_info() -> dict[str, Any]:
    """What a results header records about generation: litellm version and cost-map source."""
    cost_map = "local" if litellm_environment().local_cost_map else "remote"
    return {"litellm_version": litellm_version(), "cost_map": cost_map}


def load_litellm() -> ModuleType:
    """Import litellm once, offline (see module docstring); safe to call from any thread."""
    global _litellm
    with _import_lock:
        if _litellm is None:
            for name, value in LITELLM_ENV.items():
                os.environ.setdefault(name, value)
            started = time.monotonic()
            with quiet_import():
                import litellm

                litellm.suppress_debug_info = True
                litellm.telemetry = False
                if not litellm_environment().log:
                    # Its INFO lines ("Wrapper: Completed Call") would drown ours.
                    logging.getLogger("LiteLLM").setLevel(logging.WARNING)
                _warm_up(litellm)
            # Collecting litellm's object graph at interpreter exit takes seconds (every xdist
            # worker pays it); freezing the heap at exit skips that, the OS frees the memory.
            atexit.register(gc.freeze)
            log.debug("imported litellm %s in %.1fs", litellm_version(), time.monotonic() - started)
            _litellm = litellm
    return _litellm


@contextlib.contextmanager
def quiet_import() -> Iterator[None]:
    """litellm's import and first call emit pydantic UserWarnings (about 134 lines per xdist
    worker) that say nothing about the run: silence warnings while litellm builds itself."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _warm_up(litellm: ModuleType) -> None:
    """One mocked completion (litellm's ``mock_response``: no network) so the first real request
    does not pay for litellm's lazy imports and schema building (about a second)."""
    try:
        litellm.completion(model="openai/plsqlbench-warm-up", messages=[{"role": "user", "content": "-"}],
                           mock_response="-", api_key="unused")
    except Exception:  # only an optimisation
        log.debug("litellm warm-up failed", exc_info=True)


@dataclass(frozen=True)
class Completion:
    """A successful reply and what it cost."""

    text: str
    finish_reason: str | None
    usage: Mapping[str, Any] = field(default_factory=dict)
    #: Tool calls of the reply (``{"id", "name", "arguments"}``, arguments as sent), when tools were offered.
    tool_calls: tuple[Mapping[str, Any], ...] = ()

    @property
    def interrupted(self) -> bool:
        return (self.finish_reason or "").lower() in INTERRUPTED_FINISH_REASONS


class ProviderError(Exception):
    """The provider failed after the allowed retries (or with an error retrying cannot fix)."""

    def __init__(self, message: str, *, transient: bool, attempts: int, status_code: int | None = None,
                 usage: Mapping[str, Any] | None = None, refused: bool = False, permanent: bool = False,
                 unreachable: bool = False) -> None:
        super().__init__(message)
        self.transient = transient
        #: No reply at all: the provider could not be reached (DNS, refused connection), whatever
        #: status litellm wrapped it in (an unreachable Anthropic comes back as a 500).
        self.unreachable = unreachable
        #: The configuration is wrong (key, model name, request): every request will fail alike.
        self.permanent = permanent
        #: The model itself could not answer this prompt (its context window is too small, its
        #: content policy refused): a model failure to score, not an infrastructure error.
        self.refused = refused
        self.attempts = attempts
        self.status_code = status_code
        self.usage = dict(usage or {})

    @property
    def from_model(self) -> bool:
        """Whether the model itself produced this outcome (it refused the prompt), so it is stored
        and scored as the model's answer. The one rule for every cache (answers and Interactive
        episodes): any other failure -- refused connection, DNS, TLS, a timeout before a reply, 429
        or 5xx after the retries, a malformed reply, a rejected key -- is the transport's or the
        configuration's, never stored as an answer nor counted towards giving up on a task: a
        provider outage must not cost the model a task."""
        return self.refused


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``Retry-After`` (seconds or HTTP date), or None."""
    if not headers:
        return None
    get = headers.get
    raw_ms = get("retry-after-ms") or get("Retry-After-Ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = get("retry-after") or get("Retry-After")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    return code if isinstance(code, int) else None


def _unreachable(exc: BaseException) -> bool:
    """A connection that never got a reply somewhere down the exception chain (httpx's
    ``ConnectError``/``ConnectTimeout``, a DNS failure, a refused connection)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names = {cls.__name__ for cls in type(current).__mro__}
        if names & {"ConnectError", "ConnectTimeout"} or isinstance(current, (ConnectionError, socket.gaierror)):
            return True
        current = current.__cause__ or current.__context__
    return False


def _headers(exc: BaseException) -> Mapping[str, str] | None:
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    return headers


#: litellm exceptions that say the model cannot answer this prompt at all.
REFUSAL_ERRORS = ("ContextWindowExceededError", "ContentPolicyViolationError")


def is_refusal(exc: BaseException, litellm: ModuleType) -> bool:
    """The prompt exceeds the model's context or its content policy: the model's limitation."""
    types = tuple(t for t in (getattr(litellm, n, None) for n in REFUSAL_ERRORS) if isinstance(t, type))
    return bool(types) and isinstance(exc, types)


#: litellm exceptions that no retry can fix: the key, the model name or the request is wrong.
PERMANENT_ERRORS = ("AuthenticationError", "PermissionDeniedError", "NotFoundError", "BadRequestError",
                    "UnprocessableEntityError", "UnsupportedParamsError")
#: HTTP statuses that say the same.
PERMANENT_STATUSES = frozenset({400, 401, 403, 404, 405, 422})


def is_permanent(exc: BaseException, litellm: ModuleType) -> bool:
    """The request can never succeed as configured (wrong key, unknown model, bad request)."""
    types = tuple(t for t in (getattr(litellm, n, None) for n in PERMANENT_ERRORS) if isinstance(t, type))
    return (bool(types) and isinstance(exc, types)) or _status(exc) in PERMANENT_STATUSES


def is_transient(exc: BaseException, litellm: ModuleType) -> bool:
    """429, 5xx, timeouts, connection failures and malformed replies: worth another try.

    Never an error :func:`is_permanent` recognises, whatever status litellm wrapped it in."""
    if is_permanent(exc, litellm):
        return False
    transient_types = tuple(
        t for t in (
            getattr(litellm, name, None)
            for name in ("RateLimitError", "Timeout", "APIConnectionError", "InternalServerError",
                         "ServiceUnavailableError", "BadGatewayError")
        ) if isinstance(t, type)
    )
    if isinstance(exc, (*transient_types, TimeoutError, ConnectionError)):
        return True
    status = _status(exc)
    if status is not None:
        return status in (408, 409, 425, 429) or status >= 500
    return isinstance(exc, getattr(litellm, "APIError", ())) or type(exc).__name__ in ("JSONDecodeError",)


def _priced(price: tuple[float, float], prompt_tokens: Any, completion_tokens: Any) -> float | None:
    """USD for a reply at ``price`` (per million input, output tokens); None when the endpoint
    reported no token counts (then the cost stays unknown rather than a made-up zero)."""
    if not isinstance(prompt_tokens, int) or not isinstance(completion_tokens, int):
        return None
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000


class ModelClient:
    """Chat completions for one model with the run's parameters; thread-safe."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 8192,
        timeout: float = 300.0,
        retries: int = 5,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        price: tuple[float, float] | None = None,
    ) -> None:
        self.model = model
        #: ``--plsql-price``: USD per million (input, output) tokens, instead of litellm's cost map.
        self.price = price
        self.api_base = api_base
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.retries = retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._sleep = sleep
        self._rng = random.Random()

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Delay before retry number ``attempt`` (1-based): Retry-After if given, else
        exponential backoff with equal jitter."""
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER)
        ceiling = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        return ceiling / 2 + self._rng.uniform(0, ceiling / 2)

    def complete(self, messages: Sequence[Mapping[str, Any]], **extra: Any) -> Completion:
        """The reply to ``messages``; raises :class:`ProviderError` once retries are spent.

        ``extra`` goes to litellm as is (``tools=...`` for ProcArena's Interactive Solver)."""
        litellm = load_litellm()
        started = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            t0 = time.monotonic()
            try:
                response = litellm.completion(
                    model=self.model,
                    messages=[dict(m) for m in messages],
                    temperature=self.temperature,
                    max_tokens=self.max_tokens,
                    timeout=self.timeout,
                    api_base=self.api_base,
                    num_retries=0,
                    max_retries=0,
                    drop_params=True,
                    **extra,
                )
            except Exception as exc:  # every provider failure is reported; the run goes on
                refused = is_refusal(exc, litellm)
                transient = not refused and is_transient(exc, litellm)
                permanent = not refused and is_permanent(exc, litellm)
                message = f"{type(exc).__name__}: {str(exc).strip() or 'no message'}"
                if len(message) > 500:
                    message = message[:500] + " ..."
                if not transient or attempts > self.retries:
                    usage = {"attempts": attempts, "elapsed_s": round(time.monotonic() - started, 3), "model": self.model}
                    raise ProviderError(
                        message if transient else f"{message} (not retried)",
                        transient=transient, attempts=attempts, status_code=_status(exc), usage=usage,
                        refused=refused, permanent=permanent, unreachable=_unreachable(exc),
                    ) from exc
                delay = self.backoff(attempts, parse_retry_after(_headers(exc)))
                log.info("%s: attempt %d failed (%s); retrying in %.2fs", self.model, attempts, message[:120], delay)
                self._sleep(delay)
                continue
            latency = time.monotonic() - t0
            return self._completion(litellm, response, latency, attempts, time.monotonic() - started)

    def _completion(self, litellm: ModuleType, response: Any, latency: float, attempts: int,
                    elapsed: float) -> Completion:
        choice = response.choices[0] if getattr(response, "choices", None) else None
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None) or ""
        if not isinstance(text, str):
            text = str(text)
        usage_obj = getattr(response, "usage", None)
        hidden = getattr(response, "_hidden_params", None) or {}
        cost: float | None = None
        if self.price is not None:  # the user's price (a custom endpoint litellm cannot price)
            cost = _priced(self.price, getattr(usage_obj, "prompt_tokens", None),
                           getattr(usage_obj, "completion_tokens", None))
        elif hidden.get("response_cost") is not None:  # litellm priced it already
            cost = float(hidden["response_cost"])
        elif "response_cost" not in hidden:
            try:
                cost = float(litellm.completion_cost(completion_response=response))
            except Exception:  # noqa: BLE001 - unknown models have no price: cost unknown, not an error
                cost = None
        usage = {
            "model": self.model,
            "prompt_tokens": getattr(usage_obj, "prompt_tokens", None),
            "completion_tokens": getattr(usage_obj, "completion_tokens", None),
            "cost_usd": cost,
            "latency_s": round(latency, 3),
            "elapsed_s": round(elapsed, 3),
            "attempts": attempts,
            "finish_reason": getattr(choice, "finish_reason", None),
            **runtime_info(),
        }
        calls = tuple(
            {"id": getattr(c, "id", None) or f"call_{n}", "name": getattr(getattr(c, "function", None), "name", None) or "",
             "arguments": getattr(getattr(c, "function", None), "arguments", None)}
            for n, c in enumerate(getattr(message, "tool_calls", None) or [], 1)
        )
        return Completion(text=text, finish_reason=usage["finish_reason"], usage=usage, tool_calls=calls)

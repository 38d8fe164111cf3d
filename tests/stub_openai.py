"""A small OpenAI-compatible chat-completions server for tests and benchmarks.

Serves ``POST /v1/chat/completions`` on 127.0.0.1 (an ephemeral port by default) and answers each
request from a script: queued :class:`Action` objects are used first, in order, then the
``default`` action (or a callable deciding per request). Every request is logged with its body, so
tests can count requests and see exactly what a client asked for.

The tests drive the real litellm client over real HTTP against it; nothing in litellm is patched.
Run it standalone (``python tests/stub_openai.py --latency 0.5``) for the throughput benchmark: it
prints ``PORT <n>`` on stdout and appends one JSON line per request to ``--log``.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Action", "StubServer", "context_too_long", "demo_task", "echo", "error", "fenced", "last_user_message", "malformed", "ok", "slow",
           "tool_call", "tool_calls"]


@dataclass(frozen=True)
class Action:
    """How to answer one request.

    ``kind``: ``ok`` (a normal completion with ``content``), ``status`` (an HTTP error ``code``
    with ``headers``), ``malformed`` (200 with a body that is not JSON). ``delay`` seconds pass
    before anything is sent, so a delay past the client's timeout is a slow reply.
    """

    kind: str = "ok"
    content: str = "BEGIN NULL; END;"
    code: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    prompt_tokens: int = 11
    completion_tokens: int = 7
    finish_reason: str = "stop"
    #: Error body for ``status`` actions (OpenAI's shape); None gives a generic message.
    error_message: str | None = None
    error_code: str | None = None
    #: Tool calls of an ``ok`` reply (see :func:`tool_calls`): ``(name, arguments)`` pairs, the
    #: arguments a dict (sent as JSON) or a string sent as is (malformed JSON, for tests).
    tool_calls: tuple[tuple[str, Any], ...] = ()


def ok(content: str, delay: float = 0.0, **kw: Any) -> Action:
    return Action("ok", content=content, delay=delay, **kw)


def tool_calls(*calls: tuple[str, Any], content: str = "", **kw: Any) -> Action:
    """A reply calling tools, e.g. ``tool_calls(("ask_user", {"question": "..."}))``."""
    return Action("ok", content=content, tool_calls=tuple(calls), finish_reason="tool_calls", **kw)


def tool_call(name: str, arguments: Any = None, **kw: Any) -> Action:
    """A reply with one tool call (``arguments`` defaults to ``{}``)."""
    return tool_calls((name, {} if arguments is None else arguments), **kw)


def fenced(code: str, lang: str = "sql", prose: str = "") -> Action:
    """A reply in the markdown style many models use despite the system prompt."""
    return Action("ok", content=f"{prose}```{lang}\n{code}\n```\n")


def error(code: int, retry_after: float | None = None, delay: float = 0.0,
          message: str | None = None, error_code: str | None = None) -> Action:
    headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
    return Action("status", code=code, headers=headers, delay=delay, error_message=message, error_code=error_code)


def context_too_long() -> Action:
    """OpenAI's reply when the prompt does not fit the model's context window."""
    return error(400, message="This model's maximum context length is 8192 tokens. However, your messages "
                 "resulted in 9000 tokens. Please reduce the length of the messages.",
                 error_code="context_length_exceeded")


def malformed(delay: float = 0.0) -> Action:
    return Action("malformed", delay=delay)


def slow(delay: float, content: str = "BEGIN NULL; END;") -> Action:
    return Action("ok", content=content, delay=delay)


def last_user_message(body: Mapping[str, Any]) -> str:
    for msg in reversed(body.get("messages") or []):
        if msg.get("role") == "user":
            content = msg.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


Responder = Callable[[Mapping[str, Any]], Action]


def echo(delay: float = 0.0) -> Responder:
    """Answer each request with a comment naming its last user message: distinct per task-turn."""

    def respond(body: Mapping[str, Any]) -> Action:
        first_line = last_user_message(body).strip().splitlines()[-1] if last_user_message(body).strip() else ""
        return ok(f"-- answer to: {first_line}\nBEGIN NULL; END;\n/", delay=delay)

    return respond


@dataclass
class Request:
    """One request as the server saw it."""

    n: int
    path: str
    body: Any
    started: float
    action: str = ""
    finished: float | None = None


class StubServer:
    """A threaded HTTP server with a request log; use as a context manager."""

    def __init__(
        self,
        default: Action | Responder | None = None,
        script: Sequence[Action] = (),
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: str | None = None,
    ) -> None:
        self.default: Action | Responder = default or ok("BEGIN NULL; END;")
        self._script: list[Action] = list(script)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.requests: list[Request] = []
        #: Requests being answered right now, and the most there ever were at once.
        self.in_flight = 0
        self.max_in_flight = 0
        self._log_path = log_path
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Headers and body go out as separate writes: without this, Nagle's algorithm and
                # the client's delayed ACK add ~40 ms to every reply.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                stub._handle(self)

            def do_GET(self) -> None:
                self._send(404, b'{"error": {"message": "not found"}}')

            def _send(self, code: int, body: bytes, headers: Mapping[str, str] = {}) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

        self._handler = Handler
        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="stub-openai", daemon=True)

    # ------------------------------------------------------------------ lifecycle
    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> StubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ scripting
    def push(self, *actions: Action) -> None:
        """Queue actions for the next requests, before the default applies again."""
        with self._lock:
            self._script.extend(actions)

    @property
    def count(self) -> int:
        """Requests received on the completions endpoint."""
        with self._lock:
            return sum(1 for r in self.requests if r.path.endswith("/chat/completions"))

    def bodies(self) -> list[Any]:
        with self._lock:
            return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._script.clear()
            self.max_in_flight = self.in_flight

    # ------------------------------------------------------------------ serving
    def _next_action(self, body: Mapping[str, Any]) -> Action:
        with self._lock:
            if self._script:
                return self._script.pop(0)
        default = self.default
        return default(body) if callable(default) else default

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        with self._lock:
            req = Request(n=len(self.requests) + 1, path=h.path, body=body, started=time.time())
            self.requests.append(req)
        if not h.path.endswith("/chat/completions"):
            h._send(404, b'{"error": {"message": "unknown path"}}')  # type: ignore[attr-defined]
            return
        action = self._next_action(body)
        req.action = action.kind if action.kind != "status" else str(action.code)
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self._answer(h, body, action, req)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer(self, h: BaseHTTPRequestHandler, body: Any, action: Action, req: Request) -> None:
        if action.delay and self._stop.wait(action.delay):
            return
        try:
            if action.kind == "ok":
                h._send(200, json.dumps(self._completion(body, action)).encode())  # type: ignore[attr-defined]
            elif action.kind == "malformed":
                h._send(200, b'{"id": "chatcmpl-broken", "choices": [{"message": {"content": "trunc')  # type: ignore[attr-defined]
            else:
                text = action.error_message or f"stub error {action.code}"
                kind = "invalid_request_error" if action.code < 500 else "server_error"
                msg = {"error": {"message": text, "type": kind, "code": action.error_code}}
                h._send(action.code, json.dumps(msg).encode(), action.headers)  # type: ignore[attr-defined]
        except (BrokenPipeError, ConnectionResetError):
            return  # the client gave up (timeout); that is what a slow reply is for
        req.finished = time.time()
        if self._log_path:
            with self._lock, open(self._log_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"n": req.n, "action": req.action, "user": last_user_message(body)}) + "\n")

    @staticmethod
    def _completion(body: Mapping[str, Any], action: Action) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": action.content}
        if action.tool_calls:
            message["content"] = action.content or None
            message["tool_calls"] = [
                {"id": f"call_{n}", "type": "function",
                 "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                for n, (name, args) in enumerate(action.tool_calls, 1)
            ]
        return {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": action.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": action.prompt_tokens,
                "completion_tokens": action.completion_tokens,
                "total_tokens": action.prompt_tokens + action.completion_tokens,
            },
        }


def demo_task(
    n: int | str, turns: int = 1, dialect: str = "oracle", subset: str = "demo", schema_ddl: str | None = None
) -> Any:
    """A small task (``demo/T<n>``) for generation tests and the benchmark; prompts name the task
    and turn, so the stub's request log shows who asked what."""
    from pytest_plsqlbench.tasks import Task, Turn, UnitTest

    return Task(
        id=f"T{n}",
        subset=subset,
        dialect=dialect,  # type: ignore[arg-type]
        turns=tuple(
            Turn(index=k, prompt=f"Write procedure p_{n}_{k} (task T{n} turn {k}).",
                 tests=(UnitTest(id="t1", kind="assert", script="BEGIN NULL; END;"),),
                 reference=f"CREATE OR REPLACE PROCEDURE p_{n}_{k} IS BEGIN NULL; END;\n/")
            for k in range(1, turns + 1)
        ),
        schema_ddl=schema_ddl,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--answer", default="BEGIN NULL; END;", help="content of every answer")
    parser.add_argument("--log", default=None, help="append one JSON line per answered request here")
    args = parser.parse_args(argv)
    server = StubServer(default=ok(args.answer, delay=args.latency), port=args.port, log_path=args.log)
    server.start()
    sys.stdout.write(f"PORT {server.port}\n")
    sys.stdout.flush()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

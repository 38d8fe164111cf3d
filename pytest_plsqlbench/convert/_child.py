"""Child process that runs a canonical Python solution on test inputs (stdlib only).

Run as a script by :mod:`.sandbox`, never imported by it for execution. Reads one JSON
request on stdin -- ``{"code", "calls": [[function, tagged args]], "timeout"}`` -- and writes
one JSON line per call: ``{"i", "ok", "out"}`` or ``{"i", "ok": false, "error"}``.

With ``--zygote`` it is a fork server instead: it imports what a run needs once, then reads one
request per line and forks a fresh child for each (so a batch costs a fork, not an interpreter
start), announces ``{"pid"}``, lets the child write its result lines, and ends the batch with
``{"end"}`` once the child has exited. Each forked child is as fresh as a new process: the
zygote never runs solution code.
Sockets and subprocesses are disabled before the solution is executed, its own output goes
to /dev/null, and every call runs under its own CPU-time limit (SIGPROF, so a
busy machine does not cause false timeouts).

Values travel as tagged JSON so tuples, sets, dicts with non-string keys and floats
survive the trip: see :func:`encode` / :func:`decode` (also used by the parent).
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys

TYPE_CHECKING = False  # not from typing: importing it costs every child several milliseconds
if TYPE_CHECKING:
    from typing import Any

MAX_OUTPUT_CHARS = 5_000_000


class OpaqueValue:
    """A value with no JSON form (generators, match objects ...), kept as its description."""

    def __init__(self, description: str) -> None:
        self.description = description

    def __repr__(self) -> str:
        return f"<{self.description}>"


#: Element types a list of plain values is made of: what JSON keeps as it is (ints and floats
#: within the bounds :func:`plain` checks). Exact types: a subclass takes the long way.
_SCALARS = frozenset({str, bool, type(None), int, float})
#: What :func:`decode` must look inside (tagged values are dicts).
_NESTED = frozenset({list, dict})


def _plain(values: Any) -> bool:
    """Whether every element of a list or tuple encodes as itself (checked in C where it can be:
    large outputs -- lists of a million numbers -- were most of a conversion child's own time)."""
    types = set(map(type, values))
    if not types <= _SCALARS:
        return False
    if int in types:
        ints = values if len(types) == 1 else [v for v in values if type(v) is int]
        if max(ints) >= 2**53 or min(ints) <= -(2**53):
            return False
    if float in types:
        floats = values if len(types) == 1 else [v for v in values if type(v) is float]
        if not all(map(math.isfinite, floats)):
            return False
    return True


def encode(value: Any, depth: int = 0) -> Any:
    """Tagged JSON for a Python value (recursion-limited)."""
    if depth > 200:
        raise ValueError("value nested deeper than 200 levels")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**53 else {"$i": str(value)}
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$f": repr(value)}
    if isinstance(value, list):
        return value if depth < 200 and _plain(value) else [encode(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return {"$t": list(value) if depth < 200 and _plain(value) else [encode(v, depth + 1) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"$s": [encode(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {"$d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, complex):
        return {"$c": [value.real, value.imag]}
    if isinstance(value, OpaqueValue):
        return {"$o": value.description}
    return {"$o": f"{type(value).__module__}.{type(value).__qualname__}"}


def decode(value: Any) -> Any:
    """Inverse of :func:`encode` (opaque values become :class:`OpaqueValue`)."""
    if isinstance(value, list):
        return value if _NESTED.isdisjoint(map(type, value)) else [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$t" in value:
        return tuple(decode(v) for v in value["$t"])
    if "$s" in value:
        return {decode(v) for v in value["$s"]}
    if "$d" in value:
        return {decode(k): decode(v) for k, v in value["$d"]}
    if "$i" in value:
        return int(value["$i"])
    if "$f" in value:
        return float(value["$f"])
    if "$c" in value:
        return complex(*value["$c"])
    if "$o" in value:
        return OpaqueValue(value["$o"])
    raise ValueError(f"unknown tagged value {value!r}")


_NUMBERS = frozenset({int, float, bool, type(None)})
_STRINGS = frozenset({str})


def json_size_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value``'s JSON is certainly longer than ``limit``, found without building it.

    Counts a lower bound (string contents and quotes, one character per other scalar, list
    separators) and stops as soon as it passes ``limit``; False means "not certainly", and the
    exact length is then measured. Giant outputs (a million-tuple list) are refused in a fraction
    of the time and memory their encoding would take, so the refusal never races the watchdog.
    """
    total = 0
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            total += len(v) + 2
        elif isinstance(v, (list, tuple, set, frozenset)):
            total += 2 + 2 * max(len(v) - 1, 0)
            # The same count as element by element, in C, for a collection of scalars.
            types = set(map(type, v))
            if types <= _NUMBERS:
                total += len(v)
            elif types == _STRINGS:
                total += sum(map(len, v)) + 2 * len(v)
            else:
                stack.extend(v)
        elif isinstance(v, dict):
            total += 2 + 2 * max(len(v) - 1, 0)
            for k, item in v.items():
                stack.append(k)
                stack.append(item)
        else:
            total += 1
        if total > limit:
            return True
    return False


class CallTimeout(BaseException):
    """Raised by the alarm handler; a BaseException so solutions' ``except Exception`` miss it."""


def _no_network() -> None:
    import socket

    def refuse(*_a: Any, **_k: Any) -> Any:
        raise OSError("network access is disabled while computing expected outputs")

    class NoSocket:
        def __init__(self, *_a: Any, **_k: Any) -> None:
            refuse()

    socket.socket = NoSocket  # type: ignore[misc,assignment]
    for name in (
        "create_connection",
        "create_server",
        "getaddrinfo",
        "gethostbyname",
        "socketpair",
        "fromfd",
    ):
        if hasattr(socket, name):
            setattr(socket, name, refuse)
    import subprocess

    subprocess.Popen = NoSocket  # type: ignore[misc,assignment]
    for name in (
        "system",
        "popen",
        "fork",
        "forkpty",
        "execv",
        "execve",
        "execvp",
        "spawnv",
        "kill",
        "killpg",
    ):
        if hasattr(os, name):
            setattr(os, name, refuse)


def _limit_memory(megabytes: int) -> None:
    try:
        import resource

        limit = megabytes * 1024**2
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass


def main() -> int:
    if sys.argv[1:] == ["--zygote"]:
        return zygote()
    return run(json.loads(sys.stdin.read()))


def zygote() -> int:
    """Fork one child per request line; report its pid, then ``{"end"}`` when it has exited."""
    import resource  # noqa: F401 - imported once here, used by every child
    import socket  # noqa: F401
    import subprocess  # noqa: F401

    stdin = sys.stdin.buffer
    out = sys.stdout
    while True:
        line = stdin.readline()
        if not line:
            return 0
        if not line.strip():
            continue
        request = json.loads(line)
        gate_r, gate_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: wait until the zygote has announced us, then run the batch
            os.close(gate_w)
            os.read(gate_r, 1)
            os.close(gate_r)
            try:
                os.mkdir(f"batch-{os.getpid()}")
                os.chdir(f"batch-{os.getpid()}")
            except OSError:
                pass
            code = 1
            try:
                code = run(request)
            finally:
                os._exit(code)
        os.close(gate_r)
        out.write(json.dumps({"pid": pid}) + "\n")
        out.flush()
        os.write(gate_w, b"x")
        os.close(gate_w)
        _, status = os.waitpid(pid, 0)
        out.write(json.dumps({"end": True, "status": status}) + "\n")
        out.flush()


def run(request: dict[str, Any]) -> int:
    """Run one batch of calls; one JSON line per call on stdout (fd 1)."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    sys.stdout = sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    memory_mb = int(request.get("memory_mb", 4096))
    _limit_memory(memory_mb)
    _no_network()
    timeout = float(request.get("timeout", 5.0))

    def alarm(_signum: int, _frame: Any) -> None:
        raise CallTimeout()

    signal.signal(signal.SIGPROF, alarm)

    def emit(record: dict[str, Any]) -> None:
        out.write(json.dumps(record) + "\n")
        out.flush()

    namespace: dict[str, Any] = {"__name__": "__canonical__"}
    try:
        signal.setitimer(signal.ITIMER_PROF, timeout * 4)
        exec(compile(request["code"], "<canonical>", "exec"), namespace)  # noqa: S102 - the point of this child
        signal.setitimer(signal.ITIMER_PROF, 0)
    except BaseException as exc:  # noqa: BLE001
        signal.setitimer(signal.ITIMER_PROF, 0)
        for i, _ in enumerate(request["calls"]):
            emit(
                {
                    "i": i,
                    "ok": False,
                    "error": f"the solution does not load: {type(exc).__name__}: {exc}"[:300],
                }
            )
        return 0
    for i, (fn_name, args) in enumerate(request["calls"]):
        fn = namespace.get(fn_name)
        if not callable(fn):
            emit({"i": i, "ok": False, "error": f"no function {fn_name!r} in the solution"})
            continue
        try:
            call_args = decode(args)
            signal.setitimer(signal.ITIMER_PROF, timeout)
            try:
                result = fn(*call_args)
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
            if json_size_exceeds(result, MAX_OUTPUT_CHARS):
                emit({"i": i, "ok": False, "error": "output larger than 5 MB"})
                continue
            encoded = encode(result)
            text = json.dumps({"i": i, "ok": True, "out": encoded})
            if len(text) > MAX_OUTPUT_CHARS:
                emit({"i": i, "ok": False, "error": "output larger than 5 MB"})
                continue
            out.write(text + "\n")
            out.flush()
        except CallTimeout:
            emit({"i": i, "ok": False, "timeout": True, "error": f"no result within {timeout:g}s"})
        except RecursionError:
            emit({"i": i, "ok": False, "error": "RecursionError"})
        except MemoryError:
            emit({"i": i, "ok": False, "error": f"MemoryError (over the {memory_mb} MB memory limit)"})
        except BaseException as exc:  # noqa: BLE001 - report anything the solution raises
            emit({"i": i, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]})
    return 0


if __name__ == "__main__":
    sys.exit(main())

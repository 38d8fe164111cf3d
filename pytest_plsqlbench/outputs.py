"""Turn what a test printed or selected into text lines, and compare line lists.

Both dialects capture output the same way: ``DBMS_OUTPUT``/``RAISE NOTICE`` lines and the
rows of plain ``SELECT`` statements, in execution order, each row one line with its values
comma-separated (PLSQLBench's Spider convention: DATE ``YYYY-MM-DD``, TIMESTAMP ``YYYY-MM-DD
HH24:MI:SS``, strings unquoted, NULL empty).
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Iterable, Sequence
from typing import Any


def format_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return str(value)
        text = format(value.normalize(), "f")
        return "0" if text in ("-0", "") else text
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return str(value)
        if value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return format(value, ".15g")
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, dt.date):
        return value.strftime("%Y-%m-%d")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex().upper()
    if hasattr(value, "read"):  # Oracle LOBs
        return format_value(value.read())
    return str(value)


def format_row(row: Sequence[Any]) -> str:
    return ",".join(format_value(v) for v in row)


def normalize_lines(lines: Iterable[str]) -> list[str]:
    """Right-strip each line and drop trailing empty lines (what a terminal would show)."""
    out = [line.rstrip() for line in lines]
    while out and out[-1] == "":
        out.pop()
    return out


def describe_mismatch(expected: Sequence[str], actual: Sequence[str], limit: int = 6) -> str:
    """A few lines a person can read in a CI log: counts, then the first differing lines."""
    exp, act = normalize_lines(expected), normalize_lines(actual)
    lines = [f"expected {len(exp)} line(s), got {len(act)}"]
    shown = 0
    for i in range(max(len(exp), len(act))):
        e = exp[i] if i < len(exp) else "<none>"
        a = act[i] if i < len(act) else "<none>"
        if e != a:
            shown_e, shown_a, column = differing_pair(e, a)
            col = f", column {column}" if column is not None and column > 60 else ""
            lines.append(f"  line {i + 1}{col}: expected {shown_e}")
            lines.append(f"  {' ' * len(str(i + 1) + col)}       got      {shown_a}")
            shown += 1
            if shown >= limit // 2:
                break
    return "\n".join(lines)


#: Marker a failing Oracle MBPP case writes after its message, before the value its function
#: returned (:mod:`pytest_plsqlbench.convert.oracle`): ``<characters shown> <characters in all>:``
#: then the value as an Oracle literal. RAISE_APPLICATION_ERROR has no DETAIL as PostgreSQL's
#: RAISE has, and the value can hold newlines, so its length is written before it.
RETURNED_MARK = "plsqlbench-actual "
_RETURNED = re.compile(re.escape(RETURNED_MARK) + r"(\d+) (\d+):")


def returned_value(message: str) -> tuple[str, str, int] | None:
    """``(message without the value, the value as shown, its length in all)`` from an error
    message carrying :data:`RETURNED_MARK`, or None when it carries none."""
    m = _RETURNED.search(message)
    if m is None:
        return None
    shown, total = int(m.group(1)), int(m.group(2))
    value = message[m.end() : m.end() + shown]
    rest = message[: m.start()].rstrip("\n") + message[m.end() + shown :]
    return rest, value, max(total, len(value))


def first_difference(expected: str, actual: str) -> int:
    """Index of the first character where two texts differ (the shorter one's length if one
    is a prefix of the other)."""
    return next((i for i, (e, a) in enumerate(zip(expected, actual)) if e != a), min(len(expected), len(actual)))


def around(text: str, at: int, width: int) -> str:
    """``text`` cut to about ``width`` characters so that position ``at`` stays in view.

    Clipping a value at its start hides the part that differs whenever the difference lies
    further in (a long output line, a long returned list); this keeps a little context before
    ``at`` and fills the rest after it, marking each cut with ``...``."""
    width = max(width, 12)
    if len(text) <= width:
        return text
    start = max(0, min(at - width // 4, len(text) - (width - 3)))
    head = "..." if start > 0 else ""
    end = start + width - len(head)
    if end < len(text):
        end -= 3
        return head + text[start:end] + "..."
    return head + text[start:]


def around_difference(expected: str, actual: str, width: int) -> tuple[str, str]:
    """Both texts cut to about ``width`` characters each around their first difference."""
    at = first_difference(expected, actual)
    return around(expected, at, width), around(actual, at, width)


def _clip(text: str, width: int = 100) -> str:
    text = repr(text) if text != "<none>" else text
    return text if len(text) <= width else text[: width - 3] + "..."


def differing_pair(expected: str, actual: str, width: int = 100) -> tuple[str, str, int | None]:
    """Two differing lines as shown (``repr``, ``<none>`` for a missing one), each cut to
    ``width`` around their first difference, and that difference's 1-based column (None when
    a line is missing)."""
    if "<none>" in (expected, actual):
        return _clip(expected, width), _clip(actual, width), None
    shown_e, shown_a = around_difference(repr(expected), repr(actual), width)
    return shown_e, shown_a, first_difference(expected, actual) + 1


#: Characters shown as escapes when answer-controlled text reaches a terminal, a CI log or a
#: rendered report: C0/C1 controls but newline and tab (``ESC[2K`` erases a line, ``ESC[1A``
#: moves up: a message could overwrite the summary above it), and the bidirectional overrides
#: that make text read differently from what it is.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with control and direction-override characters (and lone surrogates) escaped."""
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                            text)

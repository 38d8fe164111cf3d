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
from typing import Any, Iterable, Sequence


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
            lines.append(f"  line {i + 1}: expected {_clip(e)!s}")
            lines.append(f"  {' ' * len(str(i + 1))}       got      {_clip(a)!s}")
            shown += 1
            if shown >= limit // 2:
                break
    return "\n".join(lines)


def _clip(text: str, width: int = 100) -> str:
    text = repr(text) if text != "<none>" else text
    return text if len(text) <= width else text[: width - 3] + "..."


#: Characters shown as escapes when answer-controlled text reaches a terminal, a CI log or a
#: rendered report: C0/C1 controls but newline and tab (``ESC[2K`` erases a line, ``ESC[1A``
#: moves up: a message could overwrite the summary above it), and the bidirectional overrides
#: that make text read differently from what it is.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with control and direction-override characters (and lone surrogates) escaped."""
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                            text)

"""A benchmark item's report on the xdist wire: its many small parts as one JSON string.

execnet serialises a report object by object, in Python, on the worker and again on the
controller; a benchmark item's record (``report.plsql``), keywords and properties were most of
those objects, and sending and reading them most of each side's cost per item under ``-n``.
The worker packs them into one string after pytest has made the report serialisable; the
controller unpacks them before pytest rebuilds the report, so every hook there (ours, junitxml,
the terminal, third-party plugins) sees the report as it would have. Only values a JSON round
trip gives back equal are packed; anything else travels as before.
"""

from __future__ import annotations

import json
from typing import Any

from . import nodeids

#: The key of the packed parts in a serialised report.
PACKED = "plsql_packed"
#: What is packed, where present.
PARTS = ("plsql", "keywords", "user_properties")


#: One encoder and decoder for every report (``json.dumps`` with options makes a new one per call).
_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_decode = json.JSONDecoder().decode


def _restored(parts: dict[str, Any]) -> dict[str, Any]:
    """Decoded parts as pytest made them: properties are (name, value) tuples."""
    props = parts.get("user_properties")
    if isinstance(props, list):
        parts["user_properties"] = [tuple(p) if isinstance(p, list) else p for p in props]
    return parts


def pack(data: dict[str, Any]) -> None:
    """Move :data:`PARTS` of a benchmark item's serialised report into one string, in place."""
    if PACKED in data or not nodeids.is_benchmark(str(data.get("nodeid", ""))):
        return
    parts = {key: data[key] for key in PARTS if key in data}
    if not parts:
        return
    try:
        text = _encode(parts)
    except (TypeError, ValueError):
        return
    # JSON keeps str, int, float, bool and None as they are; a round trip that changes anything
    # else (a tuple in the record, a non-string key, a plugin's own property) leaves that part
    # as it was.
    back = _restored(_decode(text))
    if back != parts:
        kept = {key: value for key, value in parts.items() if back.get(key) == value}
        if not kept:
            return
        text = _encode(kept)
        parts = kept
    for key in parts:
        del data[key]
    data[PACKED] = text


def unpack(data: dict[str, Any]) -> None:
    """Put the packed parts back into a serialised report, in place (no-op when none)."""
    text = data.pop(PACKED, None)
    if isinstance(text, str):
        data.update(_restored(_decode(text)))

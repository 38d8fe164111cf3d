#!/usr/bin/env python3
"""Compare the results files of two runs: equal but for what changes from one run to the next.

usage: compare_results.py BEFORE AFTER [--ignore KEY ...]

BEFORE and AFTER are two results files, or two directories whose ``*.json`` files are compared by
name (a file on one side only is a difference). Left out: the header's ``started`` and
``finished``, and every ``duration_s`` and ``worker`` key at any depth (``--ignore`` adds keys).
Prints one line per difference (file, path, both values); exit 1 when there is one (stdlib only).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def diff(a: Any, b: Any, ignore: set[str], path: str = "") -> list[str]:
    """The differences between two JSON values, as ``path: before != after`` lines."""
    if isinstance(a, dict) and isinstance(b, dict):
        skip = ignore | ({"started", "finished"} if path == "header" else set())
        out = [f"{path}.{k}: only in {'before' if k in a else 'after'}".lstrip(".") for k in sorted((a.keys() ^ b.keys()) - skip)]
        return out + [d for k in sorted((a.keys() & b.keys()) - skip) for d in diff(a[k], b[k], ignore, f"{path}.{k}".lstrip("."))]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, ignore, f"{path}[{i}]")]
    return [] if a == b else [f"{path or '.'}: {json.dumps(a)[:200]} != {json.dumps(b)[:200]}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--ignore", action="append", default=[], metavar="KEY", help="another key to leave out")
    args = parser.parse_args(argv)
    ignore = {"duration_s", "worker", *args.ignore}
    if args.before.is_dir():
        names = sorted({p.name for d in (args.before, args.after) for p in d.glob("*.json")})
        pairs = [(args.before / n, args.after / n) for n in names]
    else:
        pairs = [(args.before, args.after)]
    problems = []
    for before, after in pairs:
        if not (before.is_file() and after.is_file()):
            problems.append(f"{before.name}: only in {before.parent if before.is_file() else after.parent}")
            continue
        before_doc, after_doc = (json.loads(p.read_text(encoding="utf-8")) for p in (before, after))
        problems += [f"{before.name}: {d}" for d in diff(before_doc, after_doc, ignore)]
    print("\n".join(problems) or f"compare_results: {len(pairs)} file(s) equal")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""Compare two conversion caches task by task: the converted output must not move.

    python benchmarks/convert_compare.py OLD_DIR NEW_DIR

Each DIR is a ``converted`` cache folder (``<data cache>/converted``, or the ``--cache-dir`` of
``benchmarks/convert_speed.py --keep``). Files are matched by subset, source, dialect and
assertion mode (the converter fingerprint in their names differs by design). For every task
in both, the JSON line must be byte-for-byte identical; a task only in NEW must not exist; a
task only in OLD, or one NEW marks as left out (``metadata.left_out``), is listed as left out
-- the one allowed difference -- with its reason. Exits 1 on any other difference.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

KEY = re.compile(r"^(?P<key>.+-(?:oracle|postgres)-(?:null-safe|published)-[0-9a-f]{16})-v\w+-[0-9a-f]+\.jsonl$")


def _files(folder: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(folder.glob("*.jsonl")):
        match = KEY.match(path.name)
        if match:
            out[match["key"]] = path
    return out


def _lines(path: Path) -> dict[str, str]:
    return {json.loads(line)["id"]: line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}


def compare(old_dir: Path, new_dir: Path) -> tuple[list[str], list[str]]:
    """(problems, left-out notes) of NEW against OLD."""
    problems: list[str] = []
    notes: list[str] = []
    old_files, new_files = _files(old_dir), _files(new_dir)
    if not old_files:
        problems.append(f"{old_dir}: no converted files")
    for key in sorted(set(old_files) | set(new_files)):
        if key not in new_files or key not in old_files:
            problems.append(f"{key}: only in {'OLD' if key in old_files else 'NEW'}")
            continue
        old, new = _lines(old_files[key]), _lines(new_files[key])
        same = left = 0
        for tid, line in new.items():
            meta = json.loads(line)["metadata"]
            if "left_out" in meta:
                left += 1
                notes.append(f"{key}: {tid} left out ({meta['left_out']}: {meta.get('left_out_detail', '')})")
            elif tid not in old:
                problems.append(f"{key}: {tid} is new")
            elif old[tid] != line:
                problems.append(f"{key}: {tid} differs")
            else:
                same += 1
        for tid in old.keys() - new.keys():
            left += 1
            notes.append(f"{key}: {tid} no longer written")
        notes.append(f"{key}: {same} identical, {left} left out, {len(old)} before")
    return problems, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    args = parser.parse_args(argv)
    problems, notes = compare(args.old, args.new)
    for line in notes:
        print(line)
    for line in problems:
        print("DIFFERENT", line)
    print("identical apart from left-out tasks" if not problems else f"{len(problems)} difference(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

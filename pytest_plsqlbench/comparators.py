"""Judging a test's captured output against what was expected.

``output``/``reference`` tests compare line lists exactly (right-stripped). ``rows`` tests
(Spider-PLSQL) compare the answer's printed lines with the gold SQL's result rows, as
PLSQLBench §3.4 describes: one line per row, values comma-separated, trying a bounded set of
column permutations because an answer may print the gold columns in another order.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any, Mapping, Sequence

from .outputs import describe_mismatch, normalize_lines

#: At most this many column orders are tried (all of them up to 5 columns).
MAX_PERMUTATIONS = 120


def compare_output(expected: Sequence[str], actual: Sequence[str]) -> tuple[bool, str]:
    if normalize_lines(expected) == normalize_lines(actual):
        return True, ""
    return False, describe_mismatch(expected, actual)


def _cells(line: str) -> tuple[str, ...]:
    return tuple(cell.strip() for cell in line.split(","))


def compare_rows(expected: Sequence[str], actual: Sequence[str], options: Mapping[str, Any]) -> tuple[bool, str]:
    """Gold rows vs printed lines, strict on values, ordered only if the gold query orders.

    ``expected`` rows carry the gold values comma-joined; ``options["ordered"]`` says whether
    the gold query has a top-level ORDER BY; ``options["columns"]`` gives the gold column count
    (defaults to the cells in the first expected row).
    """
    exp = [_cells(line) for line in normalize_lines(expected)]
    act = [_cells(line) for line in normalize_lines(actual)]
    ordered = bool(options.get("ordered", False))
    if len(exp) != len(act):
        return False, describe_mismatch(expected, actual)
    if not exp:
        return True, ""
    ncols = int(options.get("columns") or len(exp[0]))
    if any(len(row) != ncols for row in act):
        return False, describe_mismatch(expected, actual)
    perms = itertools.islice(itertools.permutations(range(ncols)), MAX_PERMUTATIONS)
    for perm in perms:
        permuted = [tuple(row[i] for i in perm) for row in exp]
        if (permuted == act) if ordered else (Counter(permuted) == Counter(act)):
            return True, ""
    return False, describe_mismatch(expected, actual)

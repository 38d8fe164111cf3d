"""Judging a test's captured output against what was expected.

``output``/``reference`` tests compare line lists exactly (right-stripped). ``rows`` tests
(Spider-PLSQL) compare the answer's printed lines with the gold SQL's result rows under the
output rules the task prompt states (PLSQLBench §3.4 and Fig. 2): one line per row, fields
separated by a bare comma, no headers or labels, strings unquoted, DATE ``YYYY-MM-DD``,
TIMESTAMP ``YYYY-MM-DD HH24:MI:SS``, NULL as an empty field -- trying a bounded set of
permutations of the gold columns, because an answer may print them in another order.

:func:`compare_rows` is that strict comparator and the only one that scores. Every printed line
is a row, trailing empty ones included: an empty line is a row of NULLs, so a final NULL row of
a one-column result (or a single NULL row) must be printed. The rules fix no spelling for
numbers, so two fields that are both *canonical* numbers -- no sign but ``-``, no leading zeros
other than one ``0`` before the decimal point -- compare by exact decimal value (``.5``, Oracle's
``TO_CHAR(0.5)``, equals ``0.5``; ``3.00`` equals ``3``); every other field compares as text, so
``007`` (a code, a zero-padded string) never equals ``7``.

:func:`compare_rows_lenient` exists only to *report* how many answers (in particular the
published reference answers) fail the strict comparator merely on formatting; it names the
formatting rules it had to relax, so the report can say which ones.
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .outputs import describe_mismatch, differing_pair, normalize_lines

#: At most this many column orders are tried (every order up to 5 columns).
MAX_PERMUTATIONS = 120

_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
#: How a database prints a number: ``-`` or no sign, no leading zeros but one ``0`` before the point.
_CANONICAL_NUMBER = re.compile(r"^-?(?:(?:0|[1-9]\d*)(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")


def compare_output(expected: Sequence[str], actual: Sequence[str]) -> tuple[bool, str]:
    if normalize_lines(expected) == normalize_lines(actual):
        return True, ""
    return False, describe_mismatch(expected, actual)


# --------------------------------------------------------------------------- cells
def _decimal(cell: str) -> decimal.Decimal | None:
    if not _NUMBER.match(cell):
        return None
    try:
        value = decimal.Decimal(cell)
    except decimal.InvalidOperation:
        return None
    return value if value.is_finite() else None


#: Normalising without rounding and within any exponent a printed number can have.
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def _cell_key(cell: str) -> object:
    """What a field is compared by: its exact decimal value for canonical numbers, else its text.

    Only canonical spellings count as numbers, so two fields compare by value only when both are
    canonical: ``007`` stays the text ``007`` and never equals ``7``.
    """
    number = _decimal(cell) if _CANONICAL_NUMBER.match(cell) else None
    if number is None:
        return cell
    if number == 0:
        return ("#", decimal.Decimal(0))
    try:
        # Exact: the default context would round past 28 digits (two different long numbers
        # equal) and overflow past an exponent of 999999 (an answer printing ``1e9999999``
        # crashed the comparison).
        return ("#", number.normalize(_EXACT))
    except decimal.DecimalException:
        return cell


def _line_key(cells: Sequence[str]) -> tuple[object, ...]:
    return tuple(_cell_key(c) for c in cells)


def column_orders(ncols: int, limit: int = MAX_PERMUTATIONS) -> Iterator[tuple[int, ...]]:
    """A bounded set of column orders, identity first.

    Up to 5 columns: all of them. Wider rows: swaps of two columns, rotations and the
    reversal -- the mistakes an answer makes in practice -- up to ``limit`` orders.
    """
    identity = tuple(range(ncols))
    if ncols <= 5:
        yield from itertools.islice(itertools.permutations(identity), limit)
        return
    seen = {identity}
    yield identity
    count = 1

    def fresh(order: tuple[int, ...]) -> bool:
        nonlocal count
        if order in seen or count >= limit:
            return False
        seen.add(order)
        count += 1
        return True

    candidates: list[tuple[int, ...]] = []
    for i, j in itertools.combinations(identity, 2):
        swapped = list(identity)
        swapped[i], swapped[j] = swapped[j], swapped[i]
        candidates.append(tuple(swapped))
    candidates += [identity[k:] + identity[:k] for k in range(1, ncols)]
    candidates.append(identity[::-1])
    for order in candidates:
        if fresh(order):
            yield order


def _split_rows(lines: Sequence[str], ncols: int) -> list[tuple[str, ...]] | None:
    """Cells of each gold line, or None when a value itself contains a comma (ambiguous)."""
    rows = [tuple(line.split(",")) for line in lines]
    return rows if all(len(r) == ncols for r in rows) else None


def _infer_columns(lines: Sequence[str], options: Mapping[str, Any]) -> int | None:
    if options.get("columns"):
        return int(options["columns"])
    counts = {line.count(",") for line in lines}
    return counts.pop() + 1 if len(counts) == 1 else None


def _row_lines(lines: Sequence[str]) -> list[str]:
    """Right-stripped lines, *all* of them: a trailing empty line is a NULL row, not noise."""
    return [line.rstrip() for line in lines]


def _describe_rows(exp: Sequence[str], act: Sequence[str], limit: int = 3) -> str:
    """Like :func:`describe_mismatch`, but counting (and showing) trailing empty rows."""
    lines = [f"expected {len(exp)} row(s), got {len(act)}"]
    shown = 0
    for i in range(max(len(exp), len(act))):
        e = exp[i] if i < len(exp) else "<none>"
        a = act[i] if i < len(act) else "<none>"
        if e != a:
            shown_e, shown_a, column = differing_pair(e, a)
            col = f", column {column}" if column is not None and column > 60 else ""
            lines.append(f"  row {i + 1}{col}: expected {shown_e}")
            lines.append(f"  {' ' * len(str(i + 1) + col)}      got      {shown_a}")
            shown += 1
            if shown >= limit:
                break
    return "\n".join(lines)


def _matches(exp_keys: list[tuple[object, ...]], act_keys: list[tuple[object, ...]], ordered: bool) -> bool:
    return exp_keys == act_keys if ordered else Counter(exp_keys) == Counter(act_keys)


def compare_rows(
    expected: Sequence[str], actual: Sequence[str], options: Mapping[str, Any]
) -> tuple[bool, str]:
    """Gold rows vs printed lines under the Spider output rules (strict; see module doc).

    ``expected`` rows carry the gold values comma-joined (as the backend formats them);
    ``options["ordered"]`` says whether the gold query orders its rows (otherwise rows
    compare as a multiset); ``options["columns"]`` gives the gold column count when known.
    A gold value that itself contains a comma makes its row ambiguous to split; such rows
    are compared in the gold column order only.
    """
    exp = _row_lines(expected)
    act = _row_lines(actual)
    ordered = bool(options.get("ordered", False))
    if len(exp) != len(act):
        return False, _describe_rows(exp, act)
    if not exp:
        return True, ""
    act_keys = [_line_key(line.split(",")) for line in act]
    ncols = _infer_columns(exp, options)
    rows = _split_rows(exp, ncols) if ncols else None
    if rows is None:
        ok = _matches([_line_key(line.split(",")) for line in exp], act_keys, ordered)
        return (True, "") if ok else (False, _describe_rows(exp, act))
    for order in column_orders(len(rows[0])):
        if _matches([_line_key([row[i] for i in order]) for row in rows], act_keys, ordered):
            return True, ""
    return False, _describe_rows(exp, act)


# --------------------------------------------------------------------------- lenient (report only)
#: Formatting rules the lenient comparator relaxes, in the order it tries them.
LENIENT_RULES: Mapping[str, str] = {
    "whitespace": "spaces around fields or separators",
    "quotes": "string fields printed inside quotes",
    "null-text": "NULL printed as the word NULL instead of an empty field",
    "datetime": "DATE/TIMESTAMP printed in another format (e.g. a zero time, DD-MON-YY)",
    "label": "a constant label field printed before the values on every line",
    "header": "one header line printed before the rows",
    "one-line": "a single-column result printed as one comma-separated line",
}

_DATE_FORMATS = ("%Y-%m-%d", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S",
                 "%d-%b-%y", "%d-%b-%Y", "%d-%b-%y %H:%M:%S", "%m/%d/%Y", "%Y/%m/%d")


def _as_datetime(cell: str) -> str | None:
    for fmt in _DATE_FORMATS:
        try:
            value = dt.datetime.strptime(cell, fmt)
        except ValueError:
            continue
        if value.time() == dt.time(0):
            return value.strftime("%Y-%m-%d")
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return None


def _relax_cell(cell: str, used: set[str]) -> str:
    out = cell
    if out != out.strip():
        out = out.strip()
        used.add("whitespace")
    if len(out) >= 2 and out[0] == out[-1] and out[0] in "'\"":
        out = out[1:-1]
        used.add("quotes")
    if out.upper() in ("NULL", "<NULL>"):
        out = ""
        used.add("null-text")
    as_date = _as_datetime(out)
    if as_date is not None and as_date != out:
        out = as_date
        used.add("datetime")
    return out


def _relax_lines(lines: Sequence[str], used: set[str]) -> list[str]:
    return [",".join(_relax_cell(c, used) for c in line.split(",")) for line in lines]


def _structural_variants(act: list[str], ncols: int | None, nexp: int) -> Iterator[tuple[str, list[str]]]:
    """Ways a printout may differ from the rules in layout rather than in values."""
    if act and len(act) == nexp + 1:
        yield "header", act[1:]
    if act and all("," in line for line in act):
        labels = {line.split(",", 1)[0] for line in act}
        if len(labels) == 1 and _decimal(next(iter(labels)).strip()) is None:
            yield "label", [line.split(",", 1)[1] for line in act]
    if ncols == 1 and len(act) == 1 and nexp > 1:
        yield "one-line", act[0].split(",")


def compare_rows_lenient(
    expected: Sequence[str], actual: Sequence[str], options: Mapping[str, Any]
) -> tuple[bool, tuple[str, ...]]:
    """Whether ``actual`` matches once formatting is forgiven, and which rules that took.

    Never used to score: :func:`compare_rows` decides pass/fail. Returns ``(True, ())``
    when the strict comparator already passes.
    """
    if compare_rows(expected, actual, options)[0]:
        return True, ()
    exp = _row_lines(expected)
    act = _row_lines(actual)
    ncols = _infer_columns(exp, options) if exp else None
    strict: Callable[[list[str], list[str]], bool] = lambda e, a: compare_rows(e, a, options)[0]  # noqa: E731
    used: set[str] = set()
    exp_relaxed = _relax_lines(exp, set())  # the gold side is already well-formed
    act_relaxed = _relax_lines(act, used)
    if strict(exp_relaxed, act_relaxed):
        return True, tuple(r for r in LENIENT_RULES if r in used)
    for rule, variant in _structural_variants(act, ncols, len(exp)):
        used_here = set(used) | {rule}
        relaxed = _relax_lines(variant, used_here)
        if strict(exp_relaxed, relaxed):
            return True, tuple(r for r in LENIENT_RULES if r in used_here)
    return False, ()

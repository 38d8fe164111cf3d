"""Concise failure output: one line per failed task turn instead of a section per test item.

A weak model fails tens of thousands of items; pytest's default then prints a traceback
section and a short-summary line for each (20 MB of output for MBPP+), and its terminal summary
pairs every failure with its teardown reports by rescanning all reports, which grows with the
square of the failures. A benchmark reader wants the other granularity: which task turns failed,
how, and the first difference. So, unless the user asked for details (``-v``, ``--tb=...`` or
``-r...``), a benchmark run prints no per-item failure sections (``--tb=no``, no ``f``/``E`` in
``-r``) and ends with one line per failed task turn, built from the results document.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import pytest

from .metrics import unit_class
from .outcomes import INFRASTRUCTURE, LABELS, PASSED, SKIPPED
from .outputs import around_difference, differing_pair, first_difference, normalize_lines, printable

#: pytest's own default for ``-r``; any other value was asked for.
DEFAULT_REPORTCHARS = ("fE", "")
CONCISE_KEY = pytest.StashKey[bool]()
#: Characters of a failure line (a first difference can be a long value).
LINE_WIDTH = 240
#: Characters of an infrastructure line in the terminal (a fixture's file, line and the
#: database's message must be read whole to be fixed).
ERROR_LINE_WIDTH = 1200


def apply(config: pytest.Config) -> None:
    """Switch pytest's per-item failure output off where the user did not ask for it."""
    option = config.option
    if getattr(option, "tbstyle", "auto") != "auto" or config.get_verbosity() > 0:
        return
    if getattr(option, "reportchars", "fE") not in DEFAULT_REPORTCHARS:
        return
    option.tbstyle = "no"
    option.reportchars = ""
    config.stash[CONCISE_KEY] = True


def is_concise(config: pytest.Config) -> bool:
    return config.stash.get(CONCISE_KEY, False)


def _natural(text: str) -> list[Any]:
    import re

    return [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", text)]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


def _returned_difference(test: Mapping[str, Any], call: str, budget: int) -> str:
    """``CALL returned A; expected E`` with A and E cut around where they differ, the call
    shortened first: the values are what the line is for."""
    expected = [str(e) for e in test["expected"]]
    actual = str(test["actual"][0]) if test["actual"] else ""
    # The accepted value closest to what came back (several are accepted for some cases).
    nearest = max(expected, key=lambda e: first_difference(e, actual)) if expected else ""
    others = f" (or {len(expected) - 1} other accepted value(s))" if len(expected) > 1 else ""
    fixed = len(" returned ; expected ") + len(others)
    width = max(24, (budget - fixed - 24) // 2)
    shown_e, shown_a = around_difference(nearest, actual, width)
    room = max(24, budget - fixed - len(shown_e) - len(shown_a))
    return f"{_cut(call, room)} returned {shown_a}; expected {shown_e}{others}"


def _first_difference(test: Mapping[str, Any], budget: int = LINE_WIDTH) -> str:
    """The test's message, with the first difference between its expected and actual values
    kept in view within about ``budget`` characters (the message is cut first)."""
    raw = str(test.get("message") or "")
    message = " ".join(raw.split())
    expected, actual = test.get("expected"), test.get("actual")
    call = (test.get("extra") or {}).get("call")
    if isinstance(call, str) and expected and actual is not None and raw.startswith(f"{call} returned "):
        return printable(_returned_difference(test, call, budget))
    if expected is None or actual is None or isinstance(call, str):  # a call that raised: its error
        return printable(_cut(message, budget))
    exp, act = normalize_lines(str(x) for x in expected), normalize_lines(str(x) for x in actual)
    diff = next((i for i, (e, a) in enumerate(zip(exp, act)) if e != a), None)
    if diff is None and len(exp) == len(act):
        return printable(_cut(message, budget))
    if diff is None:
        note = f"expected {len(exp)} lines, got {len(act)}"
        return printable(f"{_cut(message, max(budget - len(note) - 3, 24))} ({note})" if message else note)
    head = " ".join(raw.splitlines()[0].split()) if raw.strip() else ""
    width = max(24, (budget - len(head) - 40) // 2) if len(head) < budget // 3 else max(24, (budget - 40) // 3)
    shown_e, shown_a, column = differing_pair(exp[diff], act[diff], width)
    col = f", column {column}" if column is not None and column > 1 else ""
    detail = f"line {diff + 1}{col}: expected {shown_e}, got {shown_a}"
    if not head:
        return printable(detail)
    return printable(f"{_cut(head, max(budget - len(detail) - 3, 24))} ({detail})")


def failure_lines(document: Mapping[str, Any], width: int = LINE_WIDTH, error_width: int | None = None) -> list[str]:
    """``subset/task[/turn-N][/sample-k]: [class] f of n tests failed; e.g. test: difference``.

    The class is the turn's, as the summary counts it (its earliest failing stage); the example
    is a test failing with that class, with the first line where its output differs."""
    lines = []
    for task in sorted(document.get("tasks") or (), key=lambda t: (t["subset"], _natural(t["task_id"]))):
        units: dict[tuple[int, int], list[Mapping[str, Any]]] = defaultdict(list)
        for test in task.get("tests") or ():
            units[(int(test.get("sample") or 0), int(test.get("turn", 1)))].append(test)
        for (sample, turn), tests in sorted(units.items()):
            failed = [t for t in tests if t.get("failure_class", PASSED) not in (PASSED, SKIPPED)]
            cls = unit_class(t["failure_class"] for t in failed)
            if cls is None:
                continue
            first = next(t for t in failed if t["failure_class"] == cls)
            where = f"{task['subset']}/{task.get('node') or task['task_id']}"
            if int(task.get("n_turns") or 1) > 1:
                where += f"/turn-{turn}"
            if int(document.get("header", {}).get("samples") or 1) > 1:
                where += f"/sample-{sample + 1}"
            head = (f"{where}: [{LABELS.get(cls, cls)}] {len(failed)} of {len(tests)} tests failed; "
                    f"e.g. {first['test_id']}: ")
            # The harness's own errors (a fixture that cannot load: file, line, the database's
            # message) are what a user must read whole to fix them. A difference is cut around
            # where it lies, never off: a line may run past ``width`` rather than hide it.
            limit = max(width, error_width or width) if cls == INFRASTRUCTURE else width
            lines.append(head + _first_difference(first, max(limit - len(head), 60)))
    return lines


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # tryfirst: the terminal reporter reads -r when it is created, in its own pytest_configure.
    if config.getoption("plsql_subset", None) and not config.getoption("collectonly", False):
        apply(config)

"""One ProcArena task entry's outcome and the percent format: the leaf both metrics modules
(ProcArena's and Interactive's) use, so neither imports the other for them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .. import outcomes
from .failure_types import of_error


def _first_sample(tests: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    tests = list(tests)
    first = min((int(t.get("sample") or 0) for t in tests), default=0)
    return sorted((t for t in tests if int(t.get("sample") or 0) == first), key=lambda t: _call_no(t.get("test_id")))


def _call_no(test_id: Any) -> int:
    text = str(test_id or "")
    return int(text.rsplit("-", 1)[-1]) if text.rsplit("-", 1)[-1].isdigit() else 0


def task_outcome(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """(ex, test_pass, failure_type) of one task entry; None when it judged nothing."""
    tests = [t for t in _first_sample(entry.get("tests") or []) if t.get("failure_class") not in outcomes.EXCLUDED
             and t.get("failure_class") != outcomes.SKIPPED]
    if not tests:
        return None
    passed = [bool(t.get("passed")) for t in tests]
    ftype = None
    for t in tests:
        if not t.get("passed"):
            # Calls of an answer that did not install are failed by the runner itself, without
            # the judge: their type comes from the install error.
            ftype = (t.get("extra") or {}).get("failure_type") or of_error(
                t.get("error_code"), str(t.get("failure_class") or ""), str(t.get("message") or ""))
            break
    return {"ex": all(passed), "test_pass": sum(passed) / len(passed), "failure_type": ftype}


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"

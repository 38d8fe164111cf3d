"""Hollow call-suite tasks: tasks whose score says nothing about the procedure under test.

A task is hollow when

- its requirement asks for printed output (``RAISE NOTICE``, ``DBMS_OUTPUT``, "print ..."): the
  call-suite judge compares tables only, so that part of the requirement is never judged;
- gold raises on every call: the suite checks error paths only, and "both raised" passes any
  procedure that raises the same way (a gold that cannot even run its own statements);
- gold leaves every table as it found it: a procedure that does nothing is as right as gold;
- a procedure that does nothing passes every call (no call raises and no state differs from the
  clean one);
- under PLForge's rule (any exception fails), gold raises on any call.

The static check (printed output) runs when a task file or PLForge record is loaded; the others
need gold's run, so the judge applies them when it has run gold (the task's calls are then left
out as a reference failure and counted as such) and ``plsqlbench validate`` reports them as problems.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from . import state as st

if TYPE_CHECKING:
    from .judge import GoldRun

#: Phrases of a requirement that ask for output only a console would see.
_OUTPUT = re.compile(
    r"\bRAISE\s+(NOTICE|INFO|LOG|DEBUG)\b|\bDBMS_OUTPUT\b|\bPUT_LINE\b|\bSERVEROUTPUT\b"
    r"|\b(print|prints|printed|printing|display|displays|echo|echoes)\b"
    r"|\b(emit|emits|report|reports|output|outputs|show|shows|log|logs)\b[^.\n]{0,40}\b(notice|message|console)\b",
    re.I,
)


def output_request(requirement: str) -> str | None:
    """Why the requirement asks for behaviour the judge cannot see (``None``: it does not)."""
    m = _OUTPUT.search(requirement)
    if m is None:
        return None
    return (f"the requirement asks for printed output ({m.group(0)!r}), which the call-suite judge never sees "
            "(it compares tables): ask for it in a table, or drop it")


_PRINTS = re.compile(r"\bRAISE\s+(NOTICE|INFO|LOG|DEBUG)\b|\bDBMS_OUTPUT\s*\.", re.I)


def gold_prints(gold: str) -> str | None:
    """Why gold's printed output is a hollow part of the task (``None``: it prints nothing)."""
    m = _PRINTS.search(gold)
    if m is None:
        return None
    return (f"gold prints output ({m.group(0)}), which the call-suite judge never sees: "
            "a requirement that follows gold asks for behaviour no call can check")


def spec_problems(spec) -> list[str]:  # noqa: ANN001 - ProcSpec
    """Hollow-task problems of a task file visible without a database (printed output)."""
    texts = [("requirement", spec.requirement), *((f"material {m.file}", m.text) for m in spec.materials)]
    if spec.interactive is not None:
        texts.append(("interactive requirement", spec.interactive.requirement))
    problems = [f"{name}: {why}" for name, text in texts if (why := output_request(text))]
    why = gold_prints(spec.gold)
    return problems + ([why] if why else [])


def of_gold_run(run: GoldRun, rule: str = "procarena") -> str | None:
    """Why gold's run makes the task hollow (``None``: it does not); ``rule`` is the judging mode."""
    if run.error or not run.calls:
        return None  # reported as gold's own error
    raised = [c for c in run.calls if c.error is not None]
    if len(raised) == len(run.calls):
        first = raised[0].error
        assert first is not None
        return f"gold raises on every call (call-1: {first.short()})"
    if rule == "plforge" and raised:
        n = next(k for k, c in enumerate(run.calls, 1) if c.error is not None)
        first = run.calls[n - 1].error
        assert first is not None
        return f"gold raises on call-{n} ({first.short()}), and under PLForge's rule any exception fails"
    if not raised and all(not st.diff(run.clean, c.state) for c in run.calls):
        return "a procedure that does nothing passes every call (gold neither raises nor changes any table)"
    if not st.diff(run.clean, run.calls[-1].state):
        return "gold changes nothing: the final state equals the clean one"
    return None

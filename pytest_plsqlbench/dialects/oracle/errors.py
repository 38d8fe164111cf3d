"""Oracle error codes and how they map onto failure classes (PLSQLBench App. E.2).

Also the driver import (python-oracledb is optional) and reading codes off its exceptions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ... import outcomes
from ...errors import UsageError
from ...outputs import returned_value
from ..base import Phase

# --------------------------------------------------------------------------- error classes
#: Codes that say the answer does not match the database-facing contract (E.2 "interface,
#: signature, or schema grounding"): missing entry point, wrong arguments, missing package
#: member, unknown table/column/object.
INTERFACE_CODES = frozenset(
    {
        "PLS-00201",
        "PLS-00306",
        "PLS-00302",
        "PLS-00307",
        "PLS-00222",
        "PLS-00225",
        "PLS-00313",
        "PLS-00904",
        "ORA-00904",
        "ORA-00942",
        "ORA-04043",
        "ORA-00980",
        "ORA-06564",
        "ORA-02289",
    }
)
#: Codes that say the artifact is invalid or incomplete (E.2): invalid compiled objects.
INVALID_CODES = frozenset({"PLS-00905", "ORA-04063", "ORA-06508", "ORA-24344", "ORA-06575", "DPY-7000"})
#: Wrapper codes that point at the real error rather than being one.
WRAPPER_CODES = frozenset({"ORA-06550", "ORA-06512", "ORA-04088"})
TIMEOUT_CODES = frozenset({"DPY-4024", "ORA-01013", "ORA-00040", "ORA-56735", "ORA-30006"})
CONNECTION_CODES = frozenset(
    {
        "DPY-1001",
        "DPY-4011",
        "DPY-6005",
        "DPY-4005",
        "ORA-03113",
        "ORA-03114",
        "ORA-03135",
        "ORA-00028",
        "ORA-01012",
        "ORA-01033",
        "ORA-01034",
        "ORA-01089",
        "ORA-01092",
        "ORA-00603",
        "ORA-12514",
        "ORA-12541",
        "ORA-12170",
        "ORA-02396",
        "ORA-12537",
        "ORA-12547",
    }
)
UNSAFE_CODES = frozenset({"ORA-01031", "ORA-01749", "ORA-01950", "ORA-01536"})
PACKAGE_STATE_CODES = frozenset({"ORA-04068", "ORA-04061", "ORA-04065", "ORA-04062"})

_CODE = re.compile(r"\b(ORA|PLS|DPY|PLW)-(\d{3,5})\b")


def error_codes(message: str) -> list[str]:
    """Every ORA-/PLS-/DPY- code in ``message``, in order, without repeats (ORA/PLS numbers
    padded to five digits, DPY to four, as the driver prints them)."""
    out = (
        f"{m.group(1)}-{m.group(2).zfill(4 if m.group(1) == 'DPY' else 5)}"
        for m in _CODE.finditer(message or "")
    )
    return list(dict.fromkeys(out))


def primary_code(codes: Sequence[str]) -> str | None:
    """The code that names the problem: an interface code, else the first PLS- code, else the
    first code that is not a wrapper (``ORA-06550 line x`` only points at the PLS- error)."""
    for code in codes:
        if code in INTERFACE_CODES:
            return code
    for code in codes:
        if code.startswith("PLS-"):
            return code
    for code in codes:
        if code not in WRAPPER_CODES:
            return code
    return codes[0] if codes else None


def is_assertion(code: str | None) -> bool:
    """ORA-20000..ORA-20999: RAISE_APPLICATION_ERROR, what test assertions raise."""
    return code is not None and code.startswith("ORA-20") and len(code) == 9 and code[4:].isdigit()


def classify(codes: Sequence[str], phase: Phase) -> str:
    """Failure class of an Oracle error raised while installing or testing an answer.

    PLSQLBench App. E.2: PLS-00905 (invalid object) -> invalid artifact; PLS-00201 (missing
    entry point), PLS-00306 (wrong arguments), ORA-00904/00942 (unknown column/table) ->
    interface; ORA-20xxx raised by an assertion and other run-time errors -> wrong output;
    call timeouts -> timeout; lost connections -> infrastructure (excluded from metrics).
    """
    code_set = set(codes)
    if code_set & TIMEOUT_CODES:
        return outcomes.TIMEOUT
    if code_set & CONNECTION_CODES:
        return outcomes.INFRASTRUCTURE
    if code_set & UNSAFE_CODES:
        return outcomes.UNSAFE
    if code_set & INTERFACE_CODES:
        return outcomes.INTERFACE
    if code_set & INVALID_CODES:
        return outcomes.INVALID_ARTIFACT
    if any(c.startswith("PLS-") for c in codes):
        return outcomes.INVALID_ARTIFACT  # compile-time errors of the answer's code
    main = primary_code(codes)
    if is_assertion(main):
        return outcomes.WRONG_OUTPUT
    if main is None:
        return outcomes.INVALID_ARTIFACT if phase == "install" else outcomes.WRONG_OUTPUT
    if main.startswith("ORA-009") or main in ("ORA-01756", "ORA-01740", "ORA-00972"):
        return outcomes.INVALID_ARTIFACT  # SQL syntax: ORA-00900 ... ORA-00999
    if phase == "install":
        return outcomes.INVALID_ARTIFACT
    return outcomes.WRONG_OUTPUT



def _driver() -> Any:
    try:
        import oracledb
    except ImportError:
        raise UsageError(
            "--plsql-dialect=oracle needs python-oracledb: pip install 'pytest-plsqlbench[oracle]'"
        ) from None
    return oracledb


def _codes_of(exc: BaseException) -> tuple[list[str], str]:
    err = exc.args[0] if exc.args else None
    message = getattr(err, "message", None) or str(exc)
    # The value a failing MBPP case returned is the answer's text: an "ORA-00942" in a returned
    # string must not turn a wrong value into an interface failure.
    shown = returned_value(message)
    codes = error_codes(shown[0] if shown is not None else message)
    full = getattr(err, "full_code", None)
    if full and full not in codes:
        codes.insert(0, full)
    return codes, message.strip()


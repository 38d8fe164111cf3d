"""ProcArena's failure types (§5.5), assigned after evaluation by deterministic rules.

* **Schema** -- a wrong table or column: the database says an object does not exist
  (PostgreSQL 42P01/42703/3F000, Oracle ORA-00942/ORA-00904), at install or in a call.
* **Contract** -- installation or interface: the answer does not install (syntax, compile
  errors), the procedure is missing or its signature does not take the calls' arguments
  (42883/42P13/42725, PLS-00306/PLS-00201/ORA-06550 wrapping them), or it was refused.
* **Exception** -- a remaining runtime failure of a call that gold's call did not have.
* **Control flow** vs **State effect** -- the state differs (or a call did not raise where
  gold's did): a lexical comparison of branch, loop and return structure between candidate and
  gold -- counts of IF/ELSIF/CASE, LOOP/FORALL and RETURN/EXIT/CONTINUE, comments and
  strings excluded -- separates the two: a different structure is Control flow, the same
  structure with a different write is State effect.

The type of a task is the type of its first failing call.
"""

from __future__ import annotations

import re
from collections import Counter

from .. import outcomes

SCHEMA, CONTRACT, EXCEPTION, CONTROL_FLOW, STATE_EFFECT = "schema", "contract", "exception", "control_flow", "state_effect"
TYPES = (SCHEMA, CONTRACT, EXCEPTION, CONTROL_FLOW, STATE_EFFECT)
LABELS = {SCHEMA: "Schema", CONTRACT: "Contract", EXCEPTION: "Exception", CONTROL_FLOW: "Control flow",
          STATE_EFFECT: "State effect"}

SCHEMA_CODES = {"42P01", "42703", "3F000", "42P02", "ORA-00942", "ORA-00904", "PLS-00302"}
CONTRACT_CODES = {"42883", "42P13", "42725", "42809", "42P18", "PLS-00306", "PLS-00201", "PLS-00905", "ORA-06550",
                  "ORA-06576", "2D000"}

_COMMENT_OR_STRING = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\$\$|\$[A-Za-z_]*\$", re.S)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$#]*")
BRANCH, LOOP, RETURN = "branch", "loop", "return"


def structure(code: str) -> Counter:
    """Branch, loop and return counts of ``code`` (lexical; comments and strings removed)."""
    words = [w.upper() for w in _WORD.findall(_COMMENT_OR_STRING.sub(" ", code or ""))]
    counts: Counter = Counter()
    for i, w in enumerate(words):
        prev = words[i - 1] if i else ""
        if prev == "END":  # END IF / END LOOP / END CASE close, they do not open
            continue
        if w in ("IF", "ELSIF", "ELSEIF", "CASE"):
            counts[BRANCH] += 1
        elif w in ("LOOP", "FORALL"):  # every FOR/WHILE loop has its LOOP; FORALL has none
            counts[LOOP] += 1
        elif w in ("RETURN", "EXIT", "CONTINUE"):
            counts[RETURN] += 1
    return counts


def same_structure(candidate: str, gold: str) -> bool:
    return structure(candidate) == structure(gold)


def of_error(code: str | None, failure_class: str, message: str = "") -> str:
    """Type of a failure that carries a database error (install or call)."""
    codes = set(re.findall(r"\b(?:ORA|PLS)-\d{5}\b", message)) | ({code} if code else set())
    if codes & SCHEMA_CODES:
        return SCHEMA
    if codes & CONTRACT_CODES or failure_class in (outcomes.INTERFACE, outcomes.INVALID_ARTIFACT, outcomes.UNSAFE):
        return CONTRACT
    return EXCEPTION


def of_call(*, candidate_error: tuple[str | None, str, str] | None, gold_raised: str | None, candidate: str,
            gold: str) -> str:
    """Type of one failing call: ``candidate_error`` is (code, failure class, message) when it
    raised, ``gold_raised`` gold's error code (None: gold's call did not raise)."""
    if candidate_error is not None and (gold_raised is None or candidate_error[0] != gold_raised):
        return of_error(*candidate_error)
    return STATE_EFFECT if same_structure(candidate, gold) else CONTROL_FLOW

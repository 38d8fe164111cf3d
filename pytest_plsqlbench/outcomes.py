"""Failure classes and a judge's verdict on one unit test.

The classes follow PLSQLBench App. E.2 (three model-attributable categories) plus the
statuses a harness needs so that it never scores its own trouble against a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PASSED = "passed"
#: Does not compile / is not SQL / was truncated / empty (paper: invalid or incomplete artifact).
INVALID_ARTIFACT = "invalid_artifact"
#: Missing entry point, wrong signature, unknown table or column (paper: interface/schema).
INTERFACE = "interface"
#: Runs but produces the wrong result, or fails at run time (paper: wrong logic or output).
WRONG_OUTPUT = "wrong_output"
#: A statement ran past --plsql-timeout.
TIMEOUT = "timeout"
#: Refused by the safety pre-check (paper: "skipped by the safety checker").
UNSAFE = "unsafe"
#: The harness could not evaluate (database down, provider failure): excluded from metrics.
INFRASTRUCTURE = "infrastructure"
#: No answer exists (an answers file without the task, --plsql-cache-only without a cached
#: answer): a failure, unless ``--plsql-missing=exclude`` (then excluded, and the run is marked
#: not comparable) -- otherwise a file holding only the answers a model got right scores 100 %.
NOT_GENERATED = "not_generated"
#: ``outcome.extra`` key marking a ``not_generated`` test left out under --plsql-missing=exclude.
MISSING_EXCLUDED_KEY = "missing_excluded"
#: ``extra`` key of a test left out because its reference output could not be captured.
REFERENCE_FAILED_KEY = "reference_failed"
#: ``extra`` key of every test of a task that an empty answer passes (every test, as judged):
#: such a task measures nothing, so it is left out (skipped, named) unless
#: ``--plsql-keep-constant-tasks`` keeps it (then the key says so in its records).
EMPTY_ANSWER_PASSES_KEY = "empty_answer_passes"
#: How the skip message of such a task's tests begins (the summary counts them apart).
LEFT_OUT_PREFIX = "left out:"

#: A plugin skipped the item (e.g. a task the data at hand cannot run): not judged, listed apart.
SKIPPED = "skipped"

FAILURE_CLASSES = (INVALID_ARTIFACT, INTERFACE, WRONG_OUTPUT, TIMEOUT, UNSAFE, INFRASTRUCTURE, NOT_GENERATED)
#: Classes that say nothing about the model: the metrics leave these items out.
EXCLUDED = (INFRASTRUCTURE,)

LABELS = {
    PASSED: "passed",
    INVALID_ARTIFACT: "invalid artifact",
    INTERFACE: "interface/schema",
    WRONG_OUTPUT: "wrong output/logic",
    TIMEOUT: "timeout",
    UNSAFE: "unsafe (safety check)",
    INFRASTRUCTURE: "infrastructure",
    NOT_GENERATED: "not generated",
    SKIPPED: "skipped",
}


@dataclass
class Verdict:
    """What a judge found of one unit test of one turn. The item adds its identity and makes the
    record that travels to the report (:class:`pytest_plsqlbench.results.record.TestOutcome`)."""

    turn: int
    test_id: str
    passed: bool
    failure_class: str = PASSED
    message: str = ""
    expected: list[str] | None = None
    actual: list[str] | None = None
    error_code: str | None = None
    duration_s: float = 0.0
    #: Typed facts for the record: numbers stay numbers (speed ratios, counters), text is text.
    extra: dict[str, Any] = field(default_factory=dict)
    #: The test's score: 1.0 / 0.0 from ``passed`` unless a graded judge sets another number
    #: (ProcArena B2: an acceleration ratio). Metrics of the PLSQLBench family use ``passed``.
    score: float | None = None

    def __post_init__(self) -> None:
        if self.score is None:
            self.score = 1.0 if self.passed else 0.0

    @property
    def excluded(self) -> bool:
        return self.failure_class in EXCLUDED

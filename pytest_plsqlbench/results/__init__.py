"""Results of a run, by job: the typed records of a test and of a task (:mod:`.record`), collecting
them on the controller (:mod:`.collector`), scoring them into the versioned results document
(:mod:`.document`), and reading, checking and writing results files (:mod:`.reading`). Format,
version by version, in ``docs/reporting.md``.

Names are re-exported here for callers that import them from ``pytest_plsqlbench.results``.
"""

from __future__ import annotations

from ..reporting.leaderboard import (
    HEADLINE_ORDER,
    MULTI_TURN_METRICS,
    SINGLE_TURN_METRICS,
    macro_means,
    site_figures,
    split_overall,
    subset_kind_metrics,
)
from .collector import ResultsCollector
from .document import (
    answers_digest,
    build_document,
    data_revisions,
    manifest_digest,
    score,
    tests_run,
    unique_answers,
    usage_totals,
)
from .reading import (
    RESULTS_FORMAT,
    RESULTS_VERSION,
    RUN_IDENTITY,
    ResultsFormatError,
    check_document,
    read_document,
    read_results,
    write_document,
)
from .record import ResultsFile, TaskResult, TestOutcome

__all__ = [
    "HEADLINE_ORDER", "MULTI_TURN_METRICS", "RESULTS_FORMAT", "RESULTS_VERSION", "RUN_IDENTITY", "SINGLE_TURN_METRICS",
    "ResultsCollector", "ResultsFile", "ResultsFormatError", "TaskResult", "TestOutcome", "answers_digest", "build_document", "check_document",
    "data_revisions", "macro_means", "manifest_digest", "read_document", "read_results", "score",
    "site_figures", "split_overall", "subset_kind_metrics", "tests_run", "unique_answers", "usage_totals", "write_document",
]

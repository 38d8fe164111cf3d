"""Results of a run, by job: collecting records on the controller (:mod:`.collector`), building
the versioned results document from them (:mod:`.document`), and reading, checking and writing
documents (:mod:`.reading`). Format, version by version, in ``docs/reporting.md``.

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
    write_document,
)

__all__ = [
    "HEADLINE_ORDER", "MULTI_TURN_METRICS", "RESULTS_FORMAT", "RESULTS_VERSION", "RUN_IDENTITY", "SINGLE_TURN_METRICS",
    "ResultsCollector", "ResultsFormatError", "answers_digest", "build_document", "check_document",
    "data_revisions", "macro_means", "manifest_digest", "read_document", "site_figures",
    "split_overall", "subset_kind_metrics", "tests_run", "unique_answers", "usage_totals", "write_document",
]

"""The results document's format name and version: a leaf both the builder
(:mod:`.document`, which stamps them) and the reader (:mod:`.reading`, which checks them) import,
so neither imports the other for them."""

from __future__ import annotations

RESULTS_FORMAT = "pytest-plsqlbench/results"
#: 2: samples are scored as one task (pass@k), bootstrap CIs, analysis-unit failure counts,
#: usage, per-subset paper mapping and data revision. 1 (never released) had none of these.
#: Added within version 2 (readers ignore what they do not know): each test's ``score`` and typed
#: ``extra`` values, each subset's ``metric_family``; the header's ``interrupted``, ``items_collected``
#: and ``system_prompt``, each task's ``prompts``, each answer's ``code``/``raw``, each test's ``script``;
#: the header's ``answer_code: "exact"`` (each answer's ``code`` is the whole answer, never clipped;
#: files without it clipped ``code`` at 20,000 characters).
RESULTS_VERSION = 2

"""ProcArena B2, performance optimization (issue 14; paper §5.1, §5.3, Figure 4).

Equivalence is a gate, not the score: a candidate whose states equal gold's on the call suite
(the Direct judge) is measured at the task's scale against gold and against the degraded input
it was handed. Modules: :mod:`.catalog` (tables, keys and foreign keys from the catalog),
:mod:`.scale` (grow the tables with generated rows), :mod:`.work` (a deterministic work
counter), :mod:`.timing` (the rotating measurement protocol, PostgreSQL's bench, the choice of
bench by dialect), :mod:`.oracle` (Oracle's bench: scaled rows restored between runs), :mod:`.metrics` (ratios,
harmonic means, Figure 4's bins), :mod:`.quiet` (one measurement at a time across workers),
:mod:`.judge` (the ``perf`` item), :mod:`.validate` (gold beats the degraded input).
See docs/procarena-b2.md.
"""

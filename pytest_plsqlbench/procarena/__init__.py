"""ProcArena (Direct mode): stored procedures judged by the database state their call suite leaves.

Modules: :mod:`.spec` (the task file format), :mod:`.loader` (``loader: procarena`` manifests),
:mod:`.plforge` (PLForge-format records over Spider databases), :mod:`.describe` and
:mod:`.prompt` (what the model sees), :mod:`.state` (snapshots and their canonical form),
:mod:`.judge` (the call-suite judge), :mod:`.dialects` (what differs per dialect: prompt words,
call forms, the judge's :mod:`.access`), :mod:`.oracle_restore` (clean state after Oracle's
commits), :mod:`.failure_types` (ProcArena §5.5), :mod:`.metrics` (EX per subscenario and
dialect), :mod:`.validate` (``plsqlbench validate`` checks). See docs/procarena.md.
"""

#: The nine Direct subscenarios, in the paper's order (§3.2.1).
SYNTHESIS = ("a1", "a2", "a3", "a4", "a5")
EDITING = ("b1", "b2", "b3", "b4")
SCENARIOS = SYNTHESIS + EDITING
#: The subscenarios EX is reported for (Table 6): B2 is scored by speed and work (§5.3), not EX.
EX_SCENARIOS = tuple(s for s in SCENARIOS if s != "b2")
SCENARIO_NAMES = {
    "a1": "From-scratch synthesis",
    "a2": "Document-grounded synthesis",
    "a3": "Example-guided synthesis",
    "a4": "Template instantiation",
    "a5": "Code composition",
    "b1": "Functional modification",
    "b2": "Performance optimization",
    "b3": "Code repair",
    "b4": "Code completion",
}
#: ``Task.metadata["judge"]`` of every task this package builds.
JUDGE = "procarena"

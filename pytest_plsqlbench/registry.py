"""The modules registered as plug-ins of every run (a leaf: ``plugin.py`` registers them, and
``families.py`` asks them for metric families outside pytest, without importing ``plugin``)."""

from __future__ import annotations

#: Built-in plugins: each implements some of our hookspecs with ``trylast`` impls.
BUILTIN_PLUGINS = (
    "pytest_plsqlbench.builtin_answers",
    "pytest_plsqlbench.loaders.yaml_tasks",
    "pytest_plsqlbench.loaders.mbpp",
    "pytest_plsqlbench.loaders.plsqlbench",
    "pytest_plsqlbench.procarena.loader",
    "pytest_plsqlbench.procarena.family",
    "pytest_plsqlbench.procarena.plforge",
    "pytest_plsqlbench.procarena.perf.b2",
    "pytest_plsqlbench.procarena.interactive.play",
    "pytest_plsqlbench.generation.plugin",
    "pytest_plsqlbench.faults",
    "pytest_plsqlbench.concise",
    "pytest_plsqlbench.loading",
)

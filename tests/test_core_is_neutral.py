"""Principle 1 of docs/redesign.md: the core names no benchmark family and no dialect.

The core is every module of the package outside the plug-in packages below. The test walks each
with ``ast`` and fails on a string constant equal to a registered dialect or family name, and on
an import of a plug-in package. Today's remaining offenders are listed in :data:`ALLOWED`, each
with the step of the redesign that removes it; an entry that no longer occurs fails too, so the
list can only shrink.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from pytest_plsqlbench import registry

PACKAGE = Path(registry.__file__).parent
#: The plug-ins' packages (families' and dialects'). ``families.py`` is still a core module (the
#: family base classes); the ``families/`` package of step 17 joins this list when it exists.
PLUGIN_PACKAGES = frozenset({"dialects", "procarena", "spider", "convert", "loaders"})
#: The built-in names, so the test cannot pass vacuously if the entry points are not installed.
BUILTIN_NAMES = frozenset({"postgres", "oracle", "plsqlbench", "procarena"})

#: (module, "str NAME" or "import MODULE") -> occurrences still allowed, with the step removing them.
ALLOWED: dict[tuple[str, str], int] = {
    # Not the family: the command's and the option group's names (the project's name).
    ("cli.py", "str plsqlbench"): 1,
    ("settings.py", "str plsqlbench"): 1,
}


def _core_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in PLUGIN_PACKAGES)


def _imported(node: ast.Import | ast.ImportFrom, module: list[str]) -> list[str]:
    """The absolute names an import statement in ``module`` (dotted parts) reaches."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = module[: len(module) - node.level] if node.level else []
    head = ".".join([*base, *([node.module] if node.module else [])])
    return [head, *(f"{head}.{a.name}" for a in node.names)]


def offences(source: str, module: str, names: frozenset[str]) -> Counter[str]:
    """Each family or dialect name and each plug-in import in the core ``module``'s ``source``."""
    found: Counter[str] = Counter()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
            found[f"str {node.value}"] += 1
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for target in _imported(node, module.split(".")):
                parts = target.split(".")
                if parts[0] == "pytest_plsqlbench" and len(parts) > 1 and parts[1] in PLUGIN_PACKAGES:
                    found[f"import {'.'.join(parts[:3])}"] += 1
                    break
    return found


def test_core_names_no_family_and_no_dialect() -> None:
    reg = registry.outside_pytest()
    names = frozenset(reg.dialects) | frozenset(reg.families) | BUILTIN_NAMES
    found: dict[tuple[str, str], int] = {}
    for path in _core_modules():
        rel = path.relative_to(PACKAGE)
        module = ".".join(["pytest_plsqlbench", *rel.with_suffix("").parts])
        for what, n in offences(path.read_text(encoding="utf-8"), module, names).items():
            found[rel.as_posix(), what] = n
    new = {k: n for k, n in found.items() if n > ALLOWED.get(k, 0)}
    gone = {k: n for k, n in ALLOWED.items() if found.get(k, 0) < n}
    assert not new, f"the core names a family or a dialect (docs/redesign.md section 1): {new}"
    assert not gone, f"fewer offenders than allowed, shrink ALLOWED: {gone} (found: {found})"


def test_the_walker_sees_names_and_plugin_imports() -> None:
    """Relative and absolute imports of a plug-in package count; a longer string does not."""
    source = (
        "from .dialects.base import Execution\nfrom . import procarena\nimport pytest_plsqlbench.spider.ddl\n"
        "from .families import Column\n\ndef f(d):\n    return d != 'oracle' and 'oracle database'\n"
    )
    assert offences(source, "pytest_plsqlbench.x", BUILTIN_NAMES) == Counter({
        "import pytest_plsqlbench.dialects.base": 1,
        "import pytest_plsqlbench.procarena": 1,
        "import pytest_plsqlbench.spider.ddl": 1,
        "str oracle": 1,
    })

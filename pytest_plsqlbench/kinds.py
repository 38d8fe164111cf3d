"""Well-formedness rules of the built-in unit-test kinds (``output``, ``rows``).

A leaf module: :class:`~pytest_plsqlbench.tasks.UnitTest` checks itself at construction and
the built-in judges' :meth:`~pytest_plsqlbench.judges.Judge.validate` apply the same rules,
without ``tasks`` importing ``judges`` (which imports the dialect types that import ``tasks``).
Kinds not listed here (``assert``, ``reference``, a plug-in's) have no construction-time rule;
a plug-in kind is checked against the run's judges at collection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tasks import UnitTest


def check_output(test: UnitTest) -> None:
    """``output`` compares printed lines, so it needs them."""
    if test.expected is None:
        raise ValueError(f"unit test {test.id!r}: kind 'output' needs 'expected'")


def check_rows(test: UnitTest) -> None:
    """``rows`` compares rows given in the task or computed from its gold SQL."""
    if test.expected is None and not test.options.get("gold_sql"):
        raise ValueError(f"unit test {test.id!r}: kind 'rows' needs 'expected' or options.gold_sql")


#: Built-in kind -> its rule; a kind absent here is well formed as far as construction goes.
RULES: dict[str, Callable[[UnitTest], None]] = {"output": check_output, "rows": check_rows}


def check_builtin(test: UnitTest) -> None:
    """Raise ``ValueError`` naming ``test`` if it breaks its built-in kind's rule."""
    rule = RULES.get(test.kind)
    if rule is not None:
        rule(test)

"""The one place the core turns a dialect name into its :class:`~pytest_plsqlbench.lexicon.Lexicon`
and :class:`~pytest_plsqlbench.lexicon.SafetyRules`, until the registry (``Dialect.lexicon``,
``Dialect.safety``) replaces :func:`rules_for`."""

from __future__ import annotations

from ..errors import UsageError
from ..lexicon import Lexicon, SafetyRules
from .oracle_text import ORACLE_LEXICON, ORACLE_SAFETY
from .postgres_text import POSTGRES_LEXICON, POSTGRES_SAFETY

_RULES = {"postgres": (POSTGRES_LEXICON, POSTGRES_SAFETY), "oracle": (ORACLE_LEXICON, ORACLE_SAFETY)}


def rules_for(dialect: str) -> tuple[Lexicon, SafetyRules]:
    """How ``dialect``'s scripts are read and what its answers may touch."""
    try:
        return _RULES[dialect]
    except KeyError:
        raise UsageError(f"no SQL rules for dialect {dialect!r} (known: {', '.join(sorted(_RULES))})") from None

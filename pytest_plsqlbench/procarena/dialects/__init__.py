"""ProcArena's per-dialect adapters (:class:`.base.Adapter`), one module per dialect.

:func:`adapter_for` is the family's one lookup: a dialect without an adapter here is refused
with one line, whichever part of ProcArena asks first.
"""

from __future__ import annotations

from ...errors import UsageError
from .base import Adapter
from .oracle import OracleAdapter
from .postgres import PostgresAdapter

ADAPTERS: dict[str, Adapter] = {a.name: a for a in (PostgresAdapter(), OracleAdapter())}


def adapter_for(dialect: str) -> Adapter:
    """The adapter of ``dialect``; UsageError naming the dialects ProcArena supports otherwise."""
    try:
        return ADAPTERS[dialect]
    except KeyError:
        raise UsageError(f"ProcArena has no adapter for dialect {dialect!r} "
                         f"(it runs on {', '.join(ADAPTERS)})") from None

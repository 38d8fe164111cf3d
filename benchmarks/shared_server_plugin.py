"""A pytest plug-in for ``pristine_overhead.py`` only: pristine copies switched off.

Loaded with ``-p shared_server_plugin`` (``benchmarks/`` on ``PYTHONPATH``), it makes the
embedded server's pristine store report itself unavailable, so ProcArena runs every contender on
the worker's own database, rolled back, and B2 on its refilled bench -- what the harness does on
``--plsql-dsn``, and did everywhere before issue 28. The same checkout and the same tasks on both
sides: the difference in wall time is what the copies cost, nothing else.
"""

from __future__ import annotations

from pytest_plsqlbench.dialects.pg_pristine import PristineStore

PristineStore.available = property(lambda self: False)  # type: ignore[assignment,method-assign]

"""Checks the dialects' ``preflight`` share: a run whose database cannot be had here is one error
at its start, on the process that owns the terminal, before any worker starts.

Without them, a missing driver, a missing Docker or an unreachable DSN surfaced once per test
item, each as its own infrastructure error repeating the same hint. They are cheap (an import, a
Docker ping, one connection) and say what to install or which option to change.
"""

from __future__ import annotations

from ..errors import UsageError
from ..settings import DatabaseSettings

#: Seconds one probe connection to a --plsql-dsn server may take.
PROBE_TIMEOUT_S = 15


def check_docker(database: DatabaseSettings, extra: str, dsn_hint: str = "") -> None:
    """``--plsql-db=container``: testcontainers installed (the pip ``extra`` that brings it) and a
    Docker that answers; ``dsn_hint`` names another way to give the DSN."""
    try:
        import docker
        import testcontainers  # noqa: F401
    except ImportError:
        raise UsageError(
            f"--plsql-db=container needs testcontainers: pip install 'pytest-plsqlbench[{extra}]'"
        ) from None
    try:
        docker.from_env().ping()
    except Exception as exc:  # noqa: BLE001 - no socket, no daemon, no permission
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(
            f"--plsql-db=container needs a running Docker, and none answers ({detail}); "
            f"or point --plsql-dsn{dsn_hint} at a {database.dialect} database"
        ) from None

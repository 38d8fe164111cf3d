"""Fail fast on the database: a run whose dialect cannot run here is one error at start.

Without this, a missing driver, a missing Docker or an unreachable DSN surfaced once per test
item, each as its own infrastructure error repeating the same hint. The checks run once, on the
process that owns the terminal, before any worker starts; they are cheap (an import, a Docker
ping, one connection) and say what to install or which option to change.
"""

from __future__ import annotations

from .errors import UsageError
from .settings import DatabaseSettings

#: Seconds one probe connection to a --plsql-dsn server may take.
PROBE_TIMEOUT_S = 15


def check_database(database: DatabaseSettings) -> None:
    """Raise UsageError when the run's database cannot be had (driver, Docker, DSN)."""
    if database.dialect == "oracle":
        try:
            import oracledb  # noqa: F401
        except ImportError:
            raise UsageError(
                "--plsql-dialect=oracle needs python-oracledb: pip install 'pytest-plsqlbench[oracle]'"
            ) from None
    if database.kind == "container":
        _check_docker(database)
    elif database.kind == "dsn" and database.dsn:
        _check_dsn(database)


def _check_docker(database: DatabaseSettings) -> None:
    extra = "oracle" if database.dialect == "oracle" else "container"
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
        env = " (or PLSQL_ORACLE_DSN)" if database.dialect == "oracle" else ""
        raise UsageError(
            f"--plsql-db=container needs a running Docker, and none answers ({detail}); "
            f"or point --plsql-dsn{env} at a {database.dialect} database"
        ) from None


def _check_dsn(database: DatabaseSettings) -> None:
    assert database.dsn
    if database.dialect == "postgres":
        import psycopg

        try:
            psycopg.connect(database.dsn, connect_timeout=PROBE_TIMEOUT_S, autocommit=True).close()
        except psycopg.Error as exc:
            detail = " ".join(str(exc).split())
            raise UsageError(f"--plsql-dsn: cannot connect to PostgreSQL ({detail})") from None
        return
    import oracledb

    from .dialects.oracle import parse_dsn

    dsn = parse_dsn(database.dsn)
    try:
        oracledb.connect(user=dsn.user, password=dsn.password, dsn=dsn.dsn, tcp_connect_timeout=PROBE_TIMEOUT_S,
                         **dict(dsn.params)).close()
    except oracledb.Error as exc:
        detail = " ".join(str(exc).split())
        raise UsageError(f"--plsql-dsn: cannot connect to Oracle as {dsn.redacted()} ({detail})") from None

"""Oracle / PL/SQL backend (python-oracledb thin mode: no Oracle Client needed).

Where the database comes from: ``--plsql-db=container`` starts testcontainers' Oracle
Database Free container per worker; ``--plsql-dsn`` (or ``PLSQL_ORACLE_DSN``/``PLSQL_DSN``)
uses an existing database -- e.g. Autonomous Database, as the paper did -- with one candidate
schema per worker.

Roles, as in the PostgreSQL backend: the harness's admin account owns the benchmark schemas
(``CHINOOK``, ``SHOP`` ...: schema-only accounts it creates before loading a fixture); each
worker's candidate user may create program units in its own schema and only *read* the
benchmark schemas. On a shared DSN, each benchmark schema is loaded once per database: a
registry table (``PLSQLBENCH_FIXTURES``) records what is loaded (keyed by content digest) and
a row lock held by a separate connection serialises the workers, DDL commits notwithstanding.

Isolation: DDL commits implicitly in Oracle, so rollback alone cannot undo an answer. The
session snapshots the candidate's objects (``USER_OBJECTS``, with ``USER_SOURCE`` for program
units) and its janitor drops what appeared and re-creates program units that were replaced:
after each isolated script, after a failed install (its partial effects are undone), and at
the end of each task, which also restores the task's baseline (objects fixtures put into the
candidate schema) and resets session state (package state, NLS settings, DBMS_OUTPUT).

Output: result rows of plain queries, then the statement's DBMS_OUTPUT lines
(``DBMS_OUTPUT.ENABLE``/``GET_LINES``), in execution order, capped by ``--plsql-max-output``;
``SET SERVEROUTPUT OFF`` in a script stops the capture as it would in SQL*Plus. Errors carry
their ORA-/PLS- code and are classified as in PLSQLBench App. E.2 (:func:`classify`).
Statement timeout: the driver's ``call_timeout``; after it the session is replaced.

The package is split by job: :mod:`.errors` (codes, classes), :mod:`.dsn` (connection strings,
names), :mod:`.provisioning` (the backend: container or DSN, candidate user, recovery),
:mod:`.fixtures` (loading benchmark schemas), :mod:`.locks` (cross-worker locks),
:mod:`.janitor` (undoing DDL), :mod:`.session` (the candidate's session).
"""

from __future__ import annotations

from .dsn import USER_PREFIX, OracleDsn, candidate_name, new_password, parse_dsn, quote_ident
from .errors import (
    CONNECTION_CODES,
    INTERFACE_CODES,
    INVALID_CODES,
    PACKAGE_STATE_CODES,
    TIMEOUT_CODES,
    UNSAFE_CODES,
    WRAPPER_CODES,
    classify,
    error_codes,
    is_assertion,
    primary_code,
)
from .fixtures import REGISTRY, fixture_owners, partition_fixture
from .janitor import (
    DROP_ORDER,
    NOT_DROPPED,
    PLSQL_UNITS,
    ObjectState,
    Snapshot,
    diff_snapshots,
    drop_statement,
    janitor_statements,
    restore_statements,
)
from .locks import LOCK_WAIT_S
from .provisioning import CANDIDATE_PRIVILEGES, DEFAULT_IMAGE, OracleBackend
from .session import MAX_ROWS, OUTPUT_CHUNK, OracleSession, created_unit, format_cell

__all__ = [
    "CANDIDATE_PRIVILEGES", "CONNECTION_CODES", "DEFAULT_IMAGE", "DROP_ORDER", "INTERFACE_CODES", "INVALID_CODES",
    "LOCK_WAIT_S", "MAX_ROWS", "NOT_DROPPED", "OUTPUT_CHUNK", "PACKAGE_STATE_CODES", "PLSQL_UNITS", "REGISTRY",
    "TIMEOUT_CODES", "UNSAFE_CODES", "USER_PREFIX", "WRAPPER_CODES", "ObjectState", "OracleBackend", "OracleDsn",
    "OracleSession", "Snapshot", "candidate_name", "classify", "created_unit", "diff_snapshots", "drop_statement",
    "error_codes", "fixture_owners", "format_cell", "is_assertion", "janitor_statements", "new_password",
    "parse_dsn", "partition_fixture", "primary_code", "quote_ident", "restore_statements",
]

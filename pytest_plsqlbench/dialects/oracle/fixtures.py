"""Fixtures in Oracle: which statements go to which schema, and loading them once per database.

Benchmark schemas (``CHINOOK``, ``SHOP`` ...) are schema-only accounts the harness's admin
creates and loads once per database (a registry table and a row lock serialise the workers of a
shared DSN, see :mod:`.locks`); the candidate may only read them. Statements without a schema go
to the candidate's own schema and become part of its baseline.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import FixtureError, InfrastructureError, UsageError
from ...scripts import Statement, split
from ...tasks import Fixture
from .dsn import _bare, quote_ident
from .errors import CONNECTION_CODES, _codes_of, _driver

log = logging.getLogger(__name__)

#: The table recording which fixtures a shared database holds (keyed by content digest).
REGISTRY = "PLSQLBENCH_FIXTURES"

# --------------------------------------------------------------------------- fixture scripts
_QUALIFIED_CREATE = re.compile(
    r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:(?:NON)?EDITIONABLE\s+)?(?:GLOBAL\s+TEMPORARY\s+|PRIVATE\s+TEMPORARY\s+)?"
    r"(?:UNIQUE\s+|BITMAP\s+)?(?:TABLE|VIEW|MATERIALIZED\s+VIEW|SEQUENCE|TYPE|PACKAGE|PROCEDURE|FUNCTION|"
    r"SYNONYM|INDEX|TRIGGER)\s+(?:BODY\s+)?(\"[^\"]+\"|[A-Za-z][\w$#]*)\s*\.",
    re.I,
)




def fixture_owners(statements: Iterable[Statement]) -> list[str]:
    """Schemas a fixture creates objects in (``CREATE TABLE SHOP.ORDERS`` -> ``SHOP``)."""
    owners: list[str] = []
    for stmt in statements:
        m = _QUALIFIED_CREATE.match(stmt.text)
        if m and _bare(m.group(1)) not in owners:
            owners.append(_bare(m.group(1)))
    return owners


def partition_fixture(script: str) -> tuple[list[str], list[tuple[str | None, Statement]], list[Statement]]:
    """(owners, owner statements with the owner to run them as, candidate-schema statements).

    Statements naming an owner's objects (``SHOP.``) load once per database into that owner;
    the rest create objects in each worker's candidate schema (its task baseline). COMMIT and
    SQL*Plus commands are dropped: the loader commits.
    """
    statements = [
        s for s in split(script, "oracle") if s.kind != "client" and s.first_word not in ("COMMIT",)
    ]
    owners = fixture_owners(statements)
    patterns = {
        o: re.compile(rf"(?<![\w$#\"]){re.escape(o)}\s*\.|\"{re.escape(o)}\"\s*\.", re.I) for o in owners
    }
    owned: list[tuple[str | None, Statement]] = []
    candidate: list[Statement] = []
    for stmt in statements:
        head = stmt.text[:2000]  # where a statement names its target (a 30 KB INSERT need not be read)
        hits = [o for o, p in patterns.items() if p.search(head)]
        if hits:
            owned.append((hits[0], stmt))
        else:
            candidate.append(stmt)
    return owners, owned, candidate



class FixtureLoading:
    """The backend's fixture loading (mixed into :class:`~.provisioning.OracleBackend`)."""

    if TYPE_CHECKING:  # what it uses of the backend it is mixed into
        from .dsn import OracleDsn

        admin: Any
        admin_dsn: OracleDsn | None
        candidate: str
        tablespace: str
        _candidate_statements: list[Statement]
        _baseline: Any

        def _admin_sql(
            self, text: str, params: Sequence[Any] | Mapping[str, Any] = (), ignore: Iterable[str] = ()
        ) -> list[tuple[Any, ...]]: ...
        def _drop_user(self, name: str) -> None: ...
        def _lock_conn_sql(self, text: str, params: Sequence[Any] = ()) -> None: ...
        def _database_lock(self, key: str) -> contextlib._GeneratorContextManager[str | None]: ...

    # ----------------------------------------------------------------- fixtures
    def _load(self, fixture: Fixture) -> None:
        owners, owned, candidate = partition_fixture(fixture.script)
        if owned:
            with self._database_lock(fixture.key) as status:
                if status == "loaded" and self._missing_users(owners):
                    log.warning(
                        "fixture %s is registered as loaded but its schemas are gone; reloading", fixture.key
                    )
                    status = None
                if status != "loaded":
                    self._load_owners(fixture, owners, owned)
                    status_row = ",".join(owners)
                    self._lock_conn_sql(
                        f"UPDATE {REGISTRY} SET status = 'loaded', owners = :o, "
                        "loaded_at = SYSTIMESTAMP WHERE fixture_key = :k",
                        [status_row, fixture.key],
                    )
        for owner in owners:
            self._grant_read(owner)
        if candidate:
            self._run_as(self.candidate, candidate, fixture)
            self._candidate_statements.extend(candidate)
        # The candidate schema as fixtures leave it changed: take its baseline again on next use.
        self._baseline = None

    def _load_owners(
        self, fixture: Fixture, owners: list[str], owned: list[tuple[str | None, Statement]]
    ) -> None:
        ours = self._harness_owners()
        existing = set(owners) - set(self._missing_users(owners))
        foreign = sorted(existing - ours)
        if foreign:
            raise UsageError(
                f"fixture {fixture.description or fixture.key}: schema(s) {', '.join(foreign)} already exist in the "
                "database and were not created by pytest-plsqlbench; use another database or drop them"
            )
        ts = quote_ident(self.tablespace)
        for owner in owners:
            # Recorded (and committed) before the user exists, so a crash mid-load leaves a
            # schema the next run knows it may drop.
            self._admin_sql(
                f"INSERT INTO {REGISTRY} (fixture_key, status, owners) VALUES (:k, 'owned', :o)",
                [f"owner:{owner}", owner],
                ignore=("ORA-00001",),
            )
            self._admin_sql(
                f"UPDATE {REGISTRY} SET status = 'stale' WHERE fixture_key NOT LIKE 'owner:%' "
                "AND fixture_key <> :k AND INSTR(',' || owners || ',', ',' || :o || ',') > 0",
                [fixture.key, owner],
            )
            self.admin.commit()
            if owner in existing:
                log.info("reloading schema %s (its content changed)", owner)
                self._drop_user(owner)
            self._admin_sql(
                f"CREATE USER {quote_ident(owner)} NO AUTHENTICATION DEFAULT TABLESPACE {ts} "
                f"QUOTA UNLIMITED ON {ts}"
            )
        by_owner: dict[str, list[Statement]] = {}
        for holder, stmt in owned:
            by_owner.setdefault(holder or owners[0], []).append(stmt)
        log.info("loading fixture %s into %s", fixture.key, ", ".join(owners))
        for owner in owners:
            self._run_as(owner, by_owner.get(owner, []), fixture)

    def _missing_users(self, names: Sequence[str]) -> list[str]:
        binds = ", ".join(f":{i}" for i in range(len(names)))
        found = {
            r[0]
            for r in self._admin_sql(
                f"SELECT username FROM all_users WHERE username IN ({binds})", list(names)
            )
        }
        return [n for n in names if n not in found]

    def _harness_owners(self) -> set[str]:
        """Schemas pytest-plsqlbench created in this database (it may drop and reload them)."""
        rows = self._admin_sql(f"SELECT owners FROM {REGISTRY} WHERE fixture_key LIKE 'owner:%'")
        return {owner for (owner,) in rows if owner}

    def _run_as(self, schema: str, statements: Sequence[Statement], fixture: Fixture | str) -> None:
        """Run fixture statements as the admin with ``schema`` as the current schema; an error
        names the fixture's file and line (``fixture``: the fixture, or what the statements are)."""
        source = fixture if isinstance(fixture, Fixture) else Fixture(key=fixture, script="")
        key = source.key
        oracledb = _driver()
        self._admin_sql(f"ALTER SESSION SET CURRENT_SCHEMA = {quote_ident(schema)}")
        try:
            with self.admin.cursor() as cur:
                for stmt in statements:
                    try:
                        cur.execute(stmt.text)
                    except oracledb.Error as exc:
                        codes, message = _codes_of(exc)
                        if set(codes) & CONNECTION_CODES:
                            raise InfrastructureError(
                                f"lost the database while loading fixture {key!r}: {message}"
                            ) from exc
                        raise FixtureError(source.load_error(stmt.line, message.splitlines()[0])) from exc
                    if cur.warning is not None:
                        raise FixtureError(source.load_error(stmt.line, "the statement compiled with errors"))
            self.admin.commit()
        finally:
            self._admin_sql(
                "ALTER SESSION SET CURRENT_SCHEMA = "
                + quote_ident(self.admin_dsn.user.upper() if self.admin_dsn else "SYSTEM"),
                ignore=("ORA-01435", "ORA-02421"),
            )

    def allow_writes(self, schemas: Sequence[str]) -> None:
        """INSERT/UPDATE/DELETE on the schemas' tables for the candidate (ProcArena). Oracle calls
        may COMMIT: the caller restores the clean state after every run (procarena.oracle_restore)."""
        grantee = quote_ident(self.candidate)
        for owner in schemas:
            rows = self._admin_sql(
                "SELECT table_name FROM all_tables WHERE owner = :o AND table_name NOT LIKE 'PA$%'", [owner.upper()]
            )
            for (name,) in rows:
                self._admin_sql(
                    f"GRANT INSERT, UPDATE, DELETE ON {quote_ident(owner.upper())}.{quote_ident(name)} TO {grantee}"
                )

    def _grant_read(self, owner: str) -> None:
        """SELECT on the owner's tables and views, EXECUTE on its types and program units."""
        rows = self._admin_sql(
            "SELECT object_name, object_type FROM all_objects WHERE owner = :o AND object_type IN "
            "('TABLE', 'VIEW', 'MATERIALIZED VIEW', 'SEQUENCE', 'TYPE', 'PACKAGE', 'FUNCTION', "
            "'PROCEDURE')",
            [owner],
        )
        grantee = quote_ident(self.candidate)
        for name, kind in rows:
            priv = "SELECT" if kind in ("TABLE", "VIEW", "MATERIALIZED VIEW", "SEQUENCE") else "EXECUTE"
            self._admin_sql(
                f"GRANT {priv} ON {quote_ident(owner)}.{quote_ident(name)} TO {grantee}",
                ignore=("ORA-01720", "ORA-04042"),
            )

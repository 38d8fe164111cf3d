"""Cross-worker locks on a shared database: one worker loads a fixture, the others wait.

A row lock in the registry table is held by a connection of its own, so the loader's DDL
(which commits) does not release it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import InfrastructureError
from ..base import SharedStep
from .errors import _codes_of, _driver
from .fixtures import REGISTRY

LOCK_WAIT_S = 1800


class DatabaseLocks:
    """The backend's cross-worker fixture lock (mixed into :class:`~.provisioning.OracleBackend`)."""

    _lock_conn: Any

    if TYPE_CHECKING:  # what it uses of the backend it is mixed into
        def _admin_connect(self) -> Any: ...

    @contextlib.contextmanager
    def _database_lock(self, key: str) -> Iterator[str | None]:
        """Serialise loading ``key`` across workers sharing the database (a row lock held by
        a connection of its own, so the loader's DDL commits do not release it)."""
        oracledb = _driver()
        conn = self._admin_connect()
        self._lock_conn = conn
        try:
            with conn.cursor() as cur:
                try:
                    cur.execute(f"INSERT INTO {REGISTRY} (fixture_key, status) VALUES (:k, 'new')", [key])
                    conn.commit()
                except oracledb.IntegrityError:
                    conn.rollback()
                cur.execute(
                    f"SELECT status FROM {REGISTRY} WHERE fixture_key = :k FOR UPDATE WAIT {LOCK_WAIT_S}",
                    [key],
                )
                row = cur.fetchone()
            yield row[0] if row else None
            conn.commit()
        except oracledb.Error as exc:
            with contextlib.suppress(Exception):
                conn.rollback()
            raise InfrastructureError(f"fixture {key!r}: registry lock failed: {_codes_of(exc)[1]}") from exc
        except BaseException:
            with contextlib.suppress(Exception):
                conn.rollback()
            raise
        finally:
            self._lock_conn = None
            with contextlib.suppress(Exception):
                conn.close()

    def _lock_conn_sql(self, text: str, params: Sequence[Any]) -> None:
        with self._lock_conn.cursor() as cur:
            cur.execute(text, params)

    @contextlib.contextmanager
    def shared_once(self, key: str) -> Iterator[SharedStep]:
        """The step ``key`` under the registry's row lock (:meth:`_database_lock`); done when the
        registry says ``loaded``, which :meth:`SharedStep.mark_done` writes."""
        with self._database_lock(key) as status:
            yield SharedStep(status == "loaded", lambda: self._lock_conn_sql(
                f"UPDATE {REGISTRY} SET status = 'loaded' WHERE fixture_key = :k", [key]))

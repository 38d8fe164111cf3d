"""ProcArena on Oracle: restoring the clean state (calls COMMIT there), snapshots that cannot be
redirected, and -- where an Oracle is reachable -- gold passing and mutants failing.

The restore and snapshot code is exercised against stand-ins that record the SQL and return
canned catalog rows, as tests/test_oracle.py does for the backend's pure parts.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
from pathlib import Path

import pytest

from pytest_plsqlbench.dialects.oracle import OracleBackend, OracleSession
from pytest_plsqlbench.errors import InfrastructureError
from pytest_plsqlbench.procarena import oracle_restore as orr
from pytest_plsqlbench.procarena import state as st

REPO = Path(__file__).resolve().parent.parent


def test_parents_first_orders_by_foreign_keys_deterministically() -> None:
    tables = ["ORDER_ITEMS", "ORDERS", "CUSTOMERS", "PRODUCTS", "EMPLOYEES"]
    edges = [("ORDER_ITEMS", "ORDERS"), ("ORDER_ITEMS", "PRODUCTS"), ("ORDERS", "CUSTOMERS"),
             ("EMPLOYEES", "EMPLOYEES"), ("ORDERS", "ELSEWHERE")]
    order = orr.parents_first(tables, edges)
    assert order == ["CUSTOMERS", "EMPLOYEES", "PRODUCTS", "ORDERS", "ORDER_ITEMS"]
    assert orr.parents_first(reversed(tables), reversed(edges)) == order


def test_fk_cycle_is_one_clear_error() -> None:
    with pytest.raises(InfrastructureError, match="form a cycle"):
        orr.parents_first(["A", "B"], [("A", "B"), ("B", "A")])


def test_restore_deletes_children_first_and_inserts_parents_first() -> None:
    stmts = orr.restore_statements("WAREHOUSE", ["ITEMS", "MOVES"])
    assert stmts == [
        'DELETE FROM "WAREHOUSE"."MOVES"',
        'DELETE FROM "WAREHOUSE"."ITEMS"',
        'INSERT INTO "WAREHOUSE"."ITEMS" SELECT * FROM "WAREHOUSE"."PA$ITEMS"',
        'INSERT INTO "WAREHOUSE"."MOVES" SELECT * FROM "WAREHOUSE"."PA$MOVES"',
    ]
    assert orr.shadow_name("X" * 200) == ("PA$" + "X" * 200)[:128]


class FakeAdmin:
    """Records the admin's SQL; answers catalog queries from canned rows."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.commits = 0

    def sql(self, text: str, params: list) -> list:
        self.log.append(text)
        if text == orr.TABLES_SQL:
            assert params == ["WAREHOUSE"]
            return [("ITEMS",), ("MOVES",), ("SUPPLIERS",)]
        if text == orr.FK_SQL:
            return [("MOVES", "ITEMS"), ("ITEMS", "SUPPLIERS")]
        return []

    def commit(self) -> None:
        self.commits += 1
        self.log.append("COMMIT")


def test_restorer_shadows_then_restores_in_order() -> None:
    admin = FakeAdmin()
    r = orr.Restorer("warehouse", admin.sql, admin.commit)
    r.make_shadows()
    creates = [s for s in admin.log if s.startswith("CREATE TABLE")]
    assert creates == [f'CREATE TABLE "WAREHOUSE"."PA${t}" AS SELECT * FROM "WAREHOUSE"."{t}"'
                       for t in ("SUPPLIERS", "ITEMS", "MOVES")]
    assert admin.log[-1] == "COMMIT"
    admin.log.clear()
    r.restore()
    assert admin.log == [*orr.restore_statements("WAREHOUSE", ["SUPPLIERS", "ITEMS", "MOVES"]), "COMMIT"]
    # the catalog queries name SYS views and never list shadow tables
    assert "SYS.ALL_TABLES" in orr.TABLES_SQL and "NOT LIKE 'PA$%'" in orr.TABLES_SQL


def test_restore_failure_names_the_schema() -> None:
    def broken(text: str, params: list) -> list:
        if text.startswith("DELETE"):
            raise InfrastructureError("ORA-02292: integrity constraint violated")
        return FakeAdmin().sql(text, params)

    r = orr.Restorer("warehouse", broken, lambda: None)
    with pytest.raises(InfrastructureError, match="could not restore schema WAREHOUSE"):
        r.restore()


class FakeLob:
    def __init__(self, text: str) -> None:
        self.text = text

    def read(self) -> str:
        return self.text


class FakeCursor:
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.rows: list = []

    def execute(self, text: str, params: object = None) -> None:
        self.log.append(text)
        if "SYS.ALL_TABLES" in text:
            self.rows = [("WAREHOUSE", "ITEMS"), ("PLSQLB_W1", "LOG")]
        elif "SYS.ALL_TAB_COLUMNS" in text:
            assert isinstance(params, dict)
            self.rows = ([("ID", "NUMBER"), ("PRICE", "BINARY_DOUBLE"), ("SEEN", "DATE"), ("NOTE", "CLOB")]
                         if params["t"] == "ITEMS" else [("MSG", "VARCHAR2")])
        elif '"ITEMS"' in text:
            self.rows = [(decimal.Decimal("1.50"), 0.1 + 0.2, dt.datetime(2024, 1, 2), FakeLob("x")),
                         (decimal.Decimal("2"), None, dt.datetime(2024, 1, 3, 4, 5), None)]
        else:
            self.rows = [("hello",)]

    def fetchall(self) -> list:
        return self.rows

    def close(self) -> None:
        pass


class FakeConn:
    def __init__(self) -> None:
        self.log: list[str] = []

    def cursor(self) -> FakeCursor:
        return FakeCursor(self.log)


def test_oracle_snapshot_reads_qualified_names_in_canonical_form() -> None:
    conn = FakeConn()
    state = st.ora_snapshot(conn, ["warehouse", "PLSQLB_W1"])
    assert set(state) == {"warehouse.items", "plsqlb_w1.log"}
    items = state["warehouse.items"]
    assert items.columns == ("id", "price", "seen", "note")
    assert items.rows == {("1.5", "0.3", "2024-01-02 00:00:00", "x"): 1, ("2", None, "2024-01-03 04:05:00", None): 1}
    reads = [q for q in conn.log if q.startswith('SELECT "')]
    assert reads[0].startswith('SELECT "ID", "PRICE", "SEEN", "NOTE" FROM "WAREHOUSE"."ITEMS"')
    assert all("SYS." in q for q in conn.log if "ALL_T" in q)


# --------------------------------------------------------------------------- live Oracle
SKIP_REASON = "no Oracle reachable: set PLSQL_ORACLE_DSN"


@pytest.mark.skipif(not os.environ.get("PLSQL_ORACLE_DSN"), reason=SKIP_REASON)
def test_oracle_gold_passes_mutants_fail_and_state_is_restored() -> None:
    from pytest_plsqlbench.manifests import load_manifest
    from pytest_plsqlbench.procarena.evaluation import evaluate
    from pytest_plsqlbench.procarena.loader import load, spec_of
    from pytest_plsqlbench.runner import open_backend
    from pytest_plsqlbench.settings import Settings

    settings = Settings.of(subsets=("procarena-sample",), dialect="oracle", db="dsn", dsn=os.environ["PLSQL_ORACLE_DSN"])
    if not any((REPO / "tasks" / "procarena-sample" / "oracle").glob("*.yaml")):
        pytest.fail("procarena-sample has no Oracle tasks")
    tasks = load(load_manifest(REPO / "tasks" / "procarena-sample.yaml"), settings)
    with open_backend(settings, "procarena") as backend:
        for task in tasks:
            spec = spec_of(task)
            assert all(o.passed for o in evaluate(backend, task, spec.gold)), task.id
            for mutant in spec.mutants:
                assert not all(o.passed for o in evaluate(backend, task, mutant.code)), f"{task.id}: {mutant.why}"
            # after the runs (which committed), gold from the clean state still passes: restored
            assert all(o.passed for o in evaluate(backend, task, spec.gold)), f"{task.id}: state not restored"


# --------------------------------------------------------------------------- the judge's Oracle access
class FakeBackend(OracleBackend):
    """An OracleBackend whose driver-facing private members are stand-ins (grants, admin SQL, the
    registry lock, the session): OracleAccess runs through its real public members."""

    def __init__(self) -> None:
        from types import SimpleNamespace

        self.db = FakeAdmin()
        self.admin = SimpleNamespace(commit=self.db.commit)
        self.grants: list = []
        self.locks: list[str] = []
        self.registry: dict[str, str] = {}
        self.candidate = "PLSQLB_GW0_1"
        self._loaded = [type("F", (), {"key": "procarena:warehouse:oracle:abc"})()]
        self.session_sql: list[str] = []

    def allow_writes(self, schemas: list) -> None:
        self.grants.append(list(schemas))

    def _admin_sql(self, text: str, params: list, ignore: object = ()) -> list:  # type: ignore[override]
        return self.db.sql(text, params)

    @__import__("contextlib").contextmanager
    def _database_lock(self, key: str):  # noqa: ANN202
        self.locks.append(f"acquire {key}")
        yield self.registry.get(key)
        self.locks.append(f"release {key}")

    def _lock_conn_sql(self, text: str, params: list) -> None:
        assert "status = 'loaded'" in text
        self.registry[params[0]] = "loaded"

    def session(self):  # noqa: ANN201
        backend = self

        class S(OracleSession):
            conn = FakeConn()

            def __init__(self) -> None:
                pass

            def _sql(self, text: str, params: object = ()) -> list:
                backend.session_sql.append(text)
                return []

        return S()


def _task(**meta: object):  # noqa: ANN202
    from pytest_plsqlbench.tasks import Task, Turn, UnitTest

    test = UnitTest(id="call-1", kind="procarena-state", script="BEGIN p(1); END;", options={"call": 1})
    return Task(id="oracle_a1_000", subset="s", dialect="oracle", turns=(Turn(1, "p", (test,), reference="x"),),
                metadata={"schema": "warehouse", **meta})


def test_oracle_access_grants_shadows_once_and_holds_the_schema_per_task() -> None:
    from pytest_plsqlbench.procarena.dialects.oracle import OracleAccess
    from pytest_plsqlbench.procarena.judge import access_for

    backend = FakeBackend()
    for _ in range(2):  # two tasks on one worker
        access = access_for(backend, _task())  # type: ignore[arg-type]
        assert type(access) is OracleAccess  # the judge's lookup: the Oracle adapter's access
        access.prepare()
        access.hold()
        access.restore()
        access.release()
    assert backend.grants == [["warehouse"]]
    creates = [s for s in backend.db.log if s.startswith("CREATE TABLE")]
    assert len(creates) == 3, "shadows are made once per fixture content, not per task"
    shadow_key = next(k for k in backend.registry if k.startswith("procarena-shadow:WAREHOUSE:"))
    run_key = "procarena-run:WAREHOUSE"
    assert backend.locks == [f"acquire {shadow_key}", f"release {shadow_key}",
                             f"acquire {run_key}", f"release {run_key}", f"acquire {run_key}", f"release {run_key}"]
    deletes = [s for s in backend.db.log if s.startswith("DELETE")]
    assert deletes[:3] == ['DELETE FROM "WAREHOUSE"."MOVES"', 'DELETE FROM "WAREHOUSE"."ITEMS"',
                           'DELETE FROM "WAREHOUSE"."SUPPLIERS"'] and len(deletes) == 6


def test_oracle_access_plforge_synonyms_are_made_and_dropped() -> None:
    from pytest_plsqlbench.procarena.dialects.oracle import OracleAccess

    backend = FakeBackend()
    access = OracleAccess(backend, _task(search_path=["warehouse"]))  # type: ignore[arg-type]
    access.prepare()
    assert backend.session_sql[:3] == [f'CREATE OR REPLACE SYNONYM "{t}" FOR "WAREHOUSE"."{t}"'
                                        for t in ("ITEMS", "MOVES", "SUPPLIERS")]
    access.hold()
    access.release()
    assert all("DROP SYNONYM" in s for s in backend.session_sql[3:]) and len(backend.session_sql) == 6

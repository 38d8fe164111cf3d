"""The Oracle session's plumbing against a scripted stand-in for python-oracledb.

These tests run everywhere. They check what the session does with what the driver reports --
rows then DBMS_OUTPUT in order, SET SERVEROUTPUT OFF, the output cap, compile errors read
from ALL_ERRORS, error classes, timeouts (server session ended, new connection), the retry
after ORA-04068, lost connections as infrastructure errors, and the janitor's drops and
restores. Whether Oracle itself behaves as scripted here is what tests/test_oracle.py checks
on a real database.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import sys
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_plsqlbench import outcomes
from pytest_plsqlbench.dialects import oracle
from pytest_plsqlbench.errors import InfrastructureError
from pytest_plsqlbench.settings import Settings


class DbType:
    def __init__(self, name: str) -> None:
        self.name = name


DB = SimpleNamespace(
    **{
        n: DbType(n)
        for n in (
            "DB_TYPE_NUMBER",
            "DB_TYPE_CLOB",
            "DB_TYPE_NCLOB",
            "DB_TYPE_BLOB",
            "DB_TYPE_LONG",
            "DB_TYPE_LONG_RAW",
            "DB_TYPE_DATE",
            "DB_TYPE_TIMESTAMP",
            "DB_TYPE_VARCHAR",
        )
    }
)


class Error(Exception):
    pass


class DatabaseError(Error):
    pass


class IntegrityError(DatabaseError):
    pass


def ora(code: str, text: str) -> DatabaseError:
    return DatabaseError(SimpleNamespace(full_code=code, message=f"{code}: {text}"))


@dataclass
class Obj:
    oid: int
    ddl: int
    status: str = "VALID"
    source: str | None = None


@dataclass
class FakeDb:
    """The state of one candidate schema and its session."""

    objects: dict[tuple[str, str], Obj] = field(default_factory=dict)
    errors: dict[tuple[str, str], list[tuple[int, int, str, str]]] = field(default_factory=dict)
    output: list[str] = field(default_factory=list)
    executed: list[str] = field(default_factory=list)
    killed: list[tuple[int, int]] = field(default_factory=list)
    connects: int = 0
    next_id: int = 100
    stale_package_calls: int = 0

    def create(self, kind: str, name: str, source: str | None, broken: bool) -> None:
        self.next_id += 1
        old = self.objects.get((name, kind))
        self.objects[(name, kind)] = Obj(
            old.oid if old else self.next_id, self.next_id, "INVALID" if broken else "VALID", source
        )
        if broken:
            self.errors[(name, kind)] = [(1, 10, 'PLS-00103: Encountered the symbol "END"', "ERROR")]
        else:
            self.errors.pop((name, kind), None)


class Var:
    def __init__(self, n: int = 1) -> None:
        self.value: Any = [None] * n if n > 1 else None

    def setvalue(self, pos: int, value: Any) -> None:
        if isinstance(self.value, list):
            self.value[pos] = value
        else:
            self.value = value

    def getvalue(self) -> Any:
        return self.value


class Cursor:
    arraysize = 100

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.db = conn.db
        self.description: list[Any] | None = None
        self.rows: list[tuple[Any, ...]] = []
        self.warning: Any = None

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *a: object) -> None:
        pass

    def __iter__(self) -> Any:
        return iter(self.rows)

    def fetchall(self) -> list[tuple[Any, ...]]:
        return list(self.rows)

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None

    def var(self, typ: Any, arraysize: int = 1) -> Var:
        return Var()

    def arrayvar(self, typ: Any, n: int, size: int = 0) -> Var:
        return Var(n)

    def callproc(self, name: str, args: Any = ()) -> None:
        self.conn.check()
        if name == "dbms_output.get_lines":
            lines_var, count_var = args
            want = count_var.getvalue()
            taken, self.db.output[:] = self.db.output[:want], self.db.output[want:]
            lines_var.value = taken + [None] * (want - len(taken))
            count_var.value = len(taken)

    def _result(self, rows: list[tuple[Any, ...]], types: list[Any]) -> None:
        self.rows = rows
        self.description = [SimpleNamespace(type_code=t) for t in types]

    def execute(self, text: str, params: Any = ()) -> None:  # noqa: C901 - a small interpreter
        self.conn.check()
        db = self.db
        db.executed.append(text)
        self.description, self.rows, self.warning = None, [], None
        up = text.upper()
        if "SYS_CONTEXT('USERENV', 'SID')" in up:
            return self._result([(57,)], [DB.DB_TYPE_NUMBER])
        if "FROM NLS_SESSION_PARAMETERS" in up:
            return self._result(sorted(self.conn.nls.items()), [DB.DB_TYPE_VARCHAR] * 2)
        if up.startswith("ALTER SESSION SET NLS_"):
            param, value = re.match(r"ALTER SESSION SET (\w+) = '(.*)'", text).groups()
            self.conn.nls[param] = value
            return None
        if "FROM USER_OBJECTS" in up:
            rows = [(n, k, o.oid, o.ddl, o.status) for (n, k), o in db.objects.items()]
            return self._result(rows, [DB.DB_TYPE_VARCHAR] * 5)
        if "FROM USER_SOURCE" in up:
            rows = [(n, k, o.source) for (n, k), o in sorted(db.objects.items()) if o.source]
            return self._result(rows, [DB.DB_TYPE_VARCHAR] * 3)
        if "FROM ALL_ERRORS" in up:
            rows = db.errors.get((params["n"], params["t"]), [])
            return self._result(
                rows, [DB.DB_TYPE_NUMBER, DB.DB_TYPE_NUMBER, DB.DB_TYPE_VARCHAR, DB.DB_TYPE_VARCHAR]
            )
        m = re.match(r"CREATE OR REPLACE (FUNCTION|PROCEDURE|PACKAGE BODY|PACKAGE) (\w+)", text, re.I)
        if m:
            source = text[len("CREATE OR REPLACE ") :]
            broken = "BROKEN" in up
            db.create(m.group(1).upper(), m.group(2).upper(), source, broken)
            if broken:
                self.warning = SimpleNamespace(full_code="DPY-7000")
            return None
        m = re.match(r"CREATE TABLE (\w+)", text, re.I)
        if m:
            db.create("TABLE", m.group(1).upper(), None, False)
            return None
        m = re.match(r'DROP (\w+(?: BODY)?) "([^"]+)"', text)
        if m:
            kind = m.group(1)
            db.objects.pop((m.group(2), kind), None)
            if kind == "PACKAGE":
                db.objects.pop((m.group(2), "PACKAGE BODY"), None)
            return None
        if up.startswith("SELECT"):
            if "1/0" in text:
                raise ora("ORA-01476", "divisor is equal to zero")
            if "NOPE" in up:
                raise ora("ORA-00904", '"NOPE": invalid identifier')
            m = re.match(r"SELECT (\d+) FROM DUAL", up)
            if m:
                db.output.append("printed by a function")
                return self._result([(decimal.Decimal(m.group(1)),)], [DB.DB_TYPE_NUMBER])
            if "ROWS" in up:
                return self._result(
                    [
                        (
                            decimal.Decimal("0.50"),
                            dt.datetime(2024, 2, 3, 4, 5, 6),
                            dt.datetime(2024, 2, 3, 4, 5, 6),
                            None,
                        )
                    ],
                    [DB.DB_TYPE_NUMBER, DB.DB_TYPE_DATE, DB.DB_TYPE_TIMESTAMP, DB.DB_TYPE_VARCHAR],
                )
            return self._result([], [DB.DB_TYPE_VARCHAR])
        if up.startswith("BEGIN") or up.startswith("DECLARE"):
            if "LOOP NULL" in up:
                raise ora("DPY-4024", "call timeout of 2000 ms exceeded")
            if "CONNECTION_DIES" in up:
                self.conn.healthy = False
                raise ora("DPY-4011", "the database or network closed the connection")
            if "STATEFUL" in up and db.stale_package_calls == 0:
                db.stale_package_calls += 1
                raise ora("ORA-04068", "existing state of packages has been discarded")
            for literal in re.findall(r"PUT_LINE\('([^']*)'\)", text):
                db.output.append(literal)
            if "FAKE_LOST" in up:  # PRAGMA EXCEPTION_INIT(e, -3113); RAISE e; on a live connection
                raise ora("ORA-03113", "end-of-file on communication channel\nORA-06512: at line 1")
            m = re.search(r"RAISE_APPLICATION_ERROR\(-(\d+), '([^']*)'\)", text)
            if m:
                raise ora(f"ORA-{m.group(1)}", m.group(2))
            if "MISSING_FN" in up:
                raise ora(
                    "ORA-06550", "line 1, column 28:\nPLS-00201: identifier 'MISSING_FN' must be declared"
                )
            return None
        return None


class Connection:
    def __init__(self, db: FakeDb) -> None:
        self.db = db
        self.healthy = True
        self.outputtypehandler = None
        self.call_timeout = 0
        self.nls = {"NLS_DATE_FORMAT": "DD-MON-RR", "NLS_NUMERIC_CHARACTERS": ".,"}
        db.connects += 1

    def check(self) -> None:
        if not self.healthy:
            raise ora("DPY-1001", "not connected to database")

    def cursor(self) -> Cursor:
        return Cursor(self)

    def rollback(self) -> None:
        self.check()

    def close(self) -> None:
        self.healthy = False

    def is_healthy(self) -> bool:
        return self.healthy

    def ping(self) -> None:
        self.check()


class FakeBackend:
    """What OracleSession needs from its backend."""

    def __init__(self, db: FakeDb, **settings: Any) -> None:
        self.db = db
        self.settings = Settings.of(subsets=(), dialect="oracle", db="dsn", dsn="u/p@h/s", **settings)
        self.candidate, self.candidate_password = "PLSQLB_T_1", "pw"
        self.connect_string, self.connect_params = "h/s", {}
        self.rebuilt = 0
        self._baseline: Any = None

    def serial_of(self, sid: int) -> int:
        return 999

    def kill_session(self, sid: int, serial: int) -> None:
        self.db.killed.append((sid, serial))

    def baseline_snapshot(self, session: Any) -> Any:
        if self._baseline is None:
            self._baseline = session.snapshot()
        return self._baseline

    def rebuild_candidate(self) -> None:
        self.rebuilt += 1


@pytest.fixture
def db(monkeypatch: pytest.MonkeyPatch) -> FakeDb:
    state = FakeDb()
    driver = SimpleNamespace(
        Error=Error,
        DatabaseError=DatabaseError,
        IntegrityError=IntegrityError,
        connect=lambda **kw: Connection(state),
        **vars(DB),
    )
    monkeypatch.setitem(sys.modules, "oracledb", driver)  # what every module's _driver() imports
    return state


def make_session(db: FakeDb, **settings: Any) -> oracle.OracleSession:
    session = oracle.OracleSession(FakeBackend(db, **settings))  # type: ignore[arg-type]
    session.begin_task()
    return session


def test_rows_then_output_in_statement_order(db: FakeDb) -> None:
    s = make_session(db)
    result = s.run(
        "SET SERVEROUTPUT ON\nBEGIN DBMS_OUTPUT.PUT_LINE('first'); END;\n/\nSELECT 7 FROM dual;\n"
        "SELECT rows FROM t;\n",
        isolated=True,
        phase="test",
    )
    assert result.ok
    assert result.lines == ["first", "7", "printed by a function", "0.5,2024-02-03,2024-02-03 04:05:06,"]


def test_serveroutput_off_discards_output(db: FakeDb) -> None:
    s = make_session(db)
    result = s.run(
        "SET SERVEROUTPUT OFF\nEXEC DBMS_OUTPUT.PUT_LINE('hidden');\nSET SERVEROUTPUT ON\n"
        "EXEC DBMS_OUTPUT.PUT_LINE('shown');\n",
        isolated=True,
        phase="test",
    )
    assert result.lines == ["shown"] and db.output == []


def test_output_cap(db: FakeDb) -> None:
    s = make_session(db, max_output=10)
    result = s.run(
        "BEGIN " + " ".join(f"DBMS_OUTPUT.PUT_LINE('line{i}');" for i in range(5)) + " END;\n/",
        isolated=True,
        phase="test",
    )
    assert result.truncated and result.lines == ["line0", "line", "<output truncated at 10 characters>"]


def test_leftover_output_is_not_the_next_scripts(db: FakeDb) -> None:
    s = make_session(db)
    db.output.append("left by the harness")
    assert s.run("SELECT rows FROM t;", isolated=True, phase="test").lines[0].startswith("0.5,")


def test_compile_errors_come_from_all_errors(db: FakeDb) -> None:
    s = make_session(db)
    result = s.run(
        "CREATE OR REPLACE FUNCTION f_broken RETURN NUMBER IS BEGIN RETURN 1 END;\n/",
        isolated=False,
        phase="install",
    )
    assert result.error is not None
    assert (result.error.failure_class, result.error.code) == (outcomes.INVALID_ARTIFACT, "PLS-00103")
    assert "FUNCTION F_BROKEN has compilation errors" in result.error.message
    assert ("F_BROKEN", "FUNCTION") not in db.objects  # a failed install leaves nothing behind


def test_error_classes_reach_the_outcome(db: FakeDb) -> None:
    s = make_session(db)
    cases = {
        "BEGIN DBMS_OUTPUT.PUT_LINE(missing_fn(1)); END;\n/": (outcomes.INTERFACE, "PLS-00201"),
        "BEGIN RAISE_APPLICATION_ERROR(-20001, 'case failed'); END;\n/": (outcomes.WRONG_OUTPUT, "ORA-20001"),
        "SELECT 1/0 FROM dual;": (outcomes.WRONG_OUTPUT, "ORA-01476"),
        "SELECT nope FROM dual;": (outcomes.INTERFACE, "ORA-00904"),
    }
    for script, want in cases.items():
        err = s.run(script, isolated=True, phase="test").error
        assert err is not None and (err.failure_class, err.code) == want, script


def test_error_stops_the_script_but_keeps_earlier_output(db: FakeDb) -> None:
    s = make_session(db)
    result = s.run(
        "BEGIN DBMS_OUTPUT.PUT_LINE('before'); RAISE_APPLICATION_ERROR(-20002, 'x'); END;\n/\n"
        "EXEC DBMS_OUTPUT.PUT_LINE('never');\n",
        isolated=True,
        phase="test",
    )
    assert result.lines == ["before"] and result.error is not None and result.error.line == 1


def test_timeout_ends_the_server_session_and_reconnects(db: FakeDb) -> None:
    s = make_session(db)
    before = db.connects
    result = s.run("BEGIN LOOP NULL; END LOOP; END;\n/", isolated=True, phase="test")
    assert result.error is not None and result.error.failure_class == outcomes.TIMEOUT
    assert db.killed == [(57, 999)] and db.connects == before + 1
    assert s.run("SELECT 5 FROM dual;", isolated=True, phase="test").lines[0] == "5"


def test_package_state_error_is_retried_once(db: FakeDb) -> None:
    s = make_session(db)
    result = s.run(
        "BEGIN pkg_stateful.run; DBMS_OUTPUT.PUT_LINE('ran'); END;\n/", isolated=True, phase="test"
    )
    assert result.ok and result.lines == ["ran"]


def test_lost_connection_is_infrastructure(db: FakeDb) -> None:
    s = make_session(db)
    with pytest.raises(InfrastructureError, match="connection lost"):
        s.run("BEGIN connection_dies; END;\n/", isolated=True, phase="test")


def test_a_connection_loss_code_the_answer_raises_is_its_failure(db: FakeDb) -> None:
    """ORA-03113 raised by PL/SQL on a connection that still answers a ping is not infrastructure."""
    s = make_session(db)
    result = s.run("BEGIN fake_lost; END;\n/", isolated=True, phase="test")
    assert not result.ok and result.error is not None
    assert result.error.failure_class == outcomes.WRONG_OUTPUT and result.error.code == "ORA-03113"
    install = s.run("BEGIN fake_lost; END;\n/", isolated=False, phase="install")
    assert install.error is not None and install.error.failure_class == outcomes.INVALID_ARTIFACT


def test_janitor_drops_new_objects_and_restores_replaced_units(db: FakeDb) -> None:
    s = make_session(db)
    ok = s.run(
        "CREATE OR REPLACE FUNCTION turn_f RETURN NUMBER IS BEGIN RETURN 1; END;\n/",
        isolated=False,
        phase="install",
    )
    assert ok.ok and ("TURN_F", "FUNCTION") in db.objects
    broken = s.run(
        "CREATE OR REPLACE FUNCTION turn_f RETURN NUMBER IS BROKEN\n/\n", isolated=False, phase="install"
    )
    assert broken.error is not None
    assert (
        db.objects[("TURN_F", "FUNCTION")].source == "FUNCTION turn_f RETURN NUMBER IS BEGIN RETURN 1; END;"
    )
    s.run("CREATE TABLE made_in_test (a NUMBER);", isolated=True, phase="test")
    assert ("MADE_IN_TEST", "TABLE") not in db.objects
    s.end_task()
    assert db.objects == {}
    assert any(x.startswith('DROP FUNCTION "TURN_F"') for x in db.executed)


def test_end_task_restores_nls_settings(db: FakeDb) -> None:
    s = make_session(db)
    s.conn.nls["NLS_DATE_FORMAT"] = "YYYY"  # as if an answer ran ALTER SESSION
    s.end_task()
    assert s.conn.nls["NLS_DATE_FORMAT"] == "DD-MON-RR"
    assert "dbms_session.reset_package" not in db.executed  # a procedure call, not SQL text


def test_task_baseline_change_rebuilds_the_candidate_schema(db: FakeDb) -> None:
    db.create("TYPE", "NUM_NTT", "TYPE num_ntt AS TABLE OF NUMBER", False)
    backend = FakeBackend(db)
    s = oracle.OracleSession(backend)  # type: ignore[arg-type]
    s.begin_task()
    s.run(
        "CREATE OR REPLACE FUNCTION num_ntt RETURN NUMBER IS BEGIN RETURN 1; END;\n/",
        isolated=False,
        phase="install",
    )
    db.create("TYPE", "NUM_NTT", "TYPE num_ntt AS TABLE OF VARCHAR2(10)", False)  # an answer replaced it
    s.end_task()
    assert backend.rebuilt == 1


# --------------------------------------------------------------------------- the backend's admin side
@dataclass
class FakeServer:
    """Users, the fixture registry and the admin's statements, shared by two 'workers'."""

    users: set[str] = field(default_factory=lambda: {"SYSTEM"})
    registry: dict[str, dict[str, Any]] = field(default_factory=dict)
    tables: dict[str, set[str]] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)


class AdminCursor(Cursor):
    def execute(self, text: str, params: Any = ()) -> None:  # noqa: C901
        server: FakeServer = self.conn.server
        server.log.append(text)
        self.description, self.rows, self.warning = None, [], None
        up = " ".join(text.upper().split())
        values = list(params.values()) if isinstance(params, dict) else list(params)
        if "FROM DATABASE_PROPERTIES" in up:
            return self._result([("USERS",)], [DB.DB_TYPE_VARCHAR])
        if up.startswith("CREATE TABLE PLSQLBENCH_FIXTURES"):
            return None
        m = re.match(r'CREATE USER "([^"]+)"', text)
        if m:
            server.users.add(m.group(1))
            return None
        m = re.match(r'DROP USER "([^"]+)"', text)
        if m:
            server.users.discard(m.group(1))
            return None
        if up.startswith("INSERT INTO PLSQLBENCH_FIXTURES"):
            key = values[0]
            if key in server.registry:
                raise IntegrityError(
                    SimpleNamespace(full_code="ORA-00001", message="ORA-00001: unique constraint")
                )
            server.registry[key] = {
                "status": "owned" if key.startswith("owner:") else "new",
                "owners": values[1] if len(values) > 1 else None,
            }
            return None
        if up.startswith("SELECT STATUS FROM PLSQLBENCH_FIXTURES"):
            row = server.registry.get(values[0])
            return self._result([(row["status"],)] if row else [], [DB.DB_TYPE_VARCHAR])
        if up.startswith("UPDATE PLSQLBENCH_FIXTURES SET STATUS = 'LOADED' WHERE"):  # shared_once's mark_done
            server.registry[values[0]]["status"] = "loaded"
            return None
        if up.startswith("UPDATE PLSQLBENCH_FIXTURES SET STATUS = 'LOADED'"):
            server.registry[values[1]].update(status="loaded", owners=values[0])
            return None
        if up.startswith("UPDATE PLSQLBENCH_FIXTURES"):
            return None
        if "FROM PLSQLBENCH_FIXTURES WHERE FIXTURE_KEY LIKE 'OWNER:%'" in up:
            return self._result(
                [(r["owners"],) for k, r in server.registry.items() if k.startswith("owner:")],
                [DB.DB_TYPE_VARCHAR],
            )
        if "FROM ALL_USERS" in up:
            return self._result([(u,) for u in values if u in server.users], [DB.DB_TYPE_VARCHAR])
        m = re.match(r'ALTER SESSION SET CURRENT_SCHEMA = "([^"]+)"', text)
        if m:
            self.conn.schema = m.group(1)
            return None
        m = re.match(r"CREATE TABLE (\w+)\.(\w+)", text, re.I)
        if m:
            assert m.group(1).upper() in server.users, "the owner must exist before its tables"
            server.tables.setdefault(m.group(1).upper(), set()).add(m.group(2).upper())
            return None
        if "FROM ALL_OBJECTS WHERE OWNER = :O AND OBJECT_TYPE IN" in up:
            return self._result(
                [(t, "TABLE") for t in sorted(server.tables.get(values[0], ()))], [DB.DB_TYPE_VARCHAR] * 2
            )
        if "FROM V$SESSION" in up or "FROM ALL_OBJECTS" in up:
            return self._result([], [DB.DB_TYPE_VARCHAR])
        return None


class AdminConnection(Connection):
    version = "23.5.0.24.7"

    def __init__(self, server: FakeServer) -> None:
        super().__init__(FakeDb())
        self.server = server
        self.schema = "SYSTEM"

    def cursor(self) -> AdminCursor:
        return AdminCursor(self)

    def commit(self) -> None:
        pass


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    state = FakeServer()
    driver = SimpleNamespace(
        Error=Error,
        DatabaseError=DatabaseError,
        IntegrityError=IntegrityError,
        connect=lambda **kw: AdminConnection(state),
        **vars(DB),
    )
    monkeypatch.setitem(sys.modules, "oracledb", driver)  # what every module's _driver() imports
    return state


def test_owner_schemas_load_once_per_database_and_are_read_only(server: FakeServer) -> None:
    from pathlib import Path

    from pytest_plsqlbench.tasks import Fixture

    shop = Fixture(
        "yaml:shop:oracle", (Path(__file__).parent.parent / "fixtures/shop/oracle.sql").read_text(), "shop"
    )
    settings = Settings.of(subsets=(), dialect="oracle", db="dsn", dsn="admin/pw@db:1521/svc")
    first = oracle.OracleBackend(settings, "gw0")
    first.start()
    first.ensure_fixtures([shop])
    assert "SHOP" in server.users and server.tables["SHOP"] == {
        "CUSTOMERS",
        "PRODUCTS",
        "ORDERS",
        "ORDER_ITEMS",
    }
    assert server.registry["yaml:shop:oracle"] == {"status": "loaded", "owners": "SHOP"}
    assert (
        'CREATE USER "SHOP" NO AUTHENTICATION DEFAULT TABLESPACE "USERS" QUOTA UNLIMITED ON "USERS"'
        in server.log
    )
    grants = [s for s in server.log if s.startswith("GRANT SELECT")]
    assert grants and all(s.endswith(f'TO "{first.candidate}"') for s in grants)
    assert not any(
        s.startswith(("GRANT INSERT", "GRANT UPDATE", "GRANT DELETE", "GRANT ALL")) for s in server.log
    )

    server.log.clear()
    second = oracle.OracleBackend(settings, "gw1")  # another worker on the same database
    second.start()
    second.ensure_fixtures([shop])
    assert not any(s.startswith('CREATE USER "SHOP"') for s in server.log)
    assert not any(s.upper().startswith("CREATE TABLE SHOP.") for s in server.log)
    assert any(s.endswith(f'TO "{second.candidate}"') for s in server.log if s.startswith("GRANT SELECT"))

    second.stop()
    first.stop()
    assert first.candidate not in server.users and second.candidate not in server.users
    assert "SHOP" in server.users  # kept for the next run, listed in PLSQLBENCH_FIXTURES


def test_a_schema_the_harness_did_not_create_is_never_dropped(server: FakeServer) -> None:
    from pytest_plsqlbench.errors import UsageError
    from pytest_plsqlbench.tasks import Fixture

    server.users.add("SHOP")  # somebody's real schema
    backend = oracle.OracleBackend(
        Settings.of(subsets=(), dialect="oracle", db="dsn", dsn="admin/pw@db/svc"), "gw0"
    )
    backend.start()
    with pytest.raises(
        UsageError, match="SHOP already exist in the database and were not created by pytest-plsqlbench"
    ):
        backend.ensure_fixtures([Fixture("k", "CREATE TABLE shop.t (a NUMBER);\n", "shop")])
    assert not any(s.startswith('DROP USER "SHOP"') for s in server.log)
    backend.stop()


def test_baseline_is_kept_across_tasks_and_retaken_after_a_new_fixture(server: FakeServer) -> None:
    """The baseline the janitor compares each task with is the schema as fixtures left it: taking it
    again at every task would accept whatever the previous task left behind."""
    from pathlib import Path

    from pytest_plsqlbench.tasks import Fixture

    shop = Fixture(
        "yaml:shop:oracle", (Path(__file__).parent.parent / "fixtures/shop/oracle.sql").read_text(), "shop"
    )
    backend = oracle.OracleBackend(Settings.of(subsets=(), dialect="oracle", db="dsn", dsn="admin/pw@db/svc"), "gw0")
    backend.start()
    backend.ensure_fixtures([shop])
    taken = object()
    backend._baseline = taken  # as baseline_snapshot() leaves it after the first task
    backend.ensure_fixtures([shop])  # the next task, same fixture: nothing loads
    assert backend._baseline is taken
    backend.ensure_fixtures([shop, Fixture("yaml:more:oracle", "CREATE TABLE more.t (a NUMBER);\n", "more")])
    assert backend._baseline is None
    backend.stop()


def test_harness_members_of_the_backend(server: FakeServer) -> None:
    """The public members ProcArena uses (docs/redesign.md section 3.2) on the real backend: a
    step marked done by one worker is done for the next; admin SQL ignores the codes it is told to."""
    from pytest_plsqlbench.errors import InfrastructureError

    settings = Settings.of(subsets=(), dialect="oracle", db="dsn", dsn="admin/pw@db/svc")
    first, second = oracle.OracleBackend(settings, "gw0"), oracle.OracleBackend(settings, "gw1")
    first.start()
    second.start()
    with first.shared_once("procarena-shadow:X:1") as step:
        assert not step.done
        step.mark_done()
    with second.shared_once("procarena-shadow:X:1") as step:
        assert step.done
    assert server.registry["procarena-shadow:X:1"]["status"] == "loaded"
    assert first.candidate_schema == first.candidate_role == first.candidate != second.candidate
    assert first.loaded_fixtures == []
    insert = "INSERT INTO PLSQLBENCH_FIXTURES (fixture_key) VALUES (:k)"
    assert first.admin_sql(insert, ["procarena-shadow:X:1"], ignore=["ORA-00001"]) == []
    with pytest.raises(InfrastructureError, match="ORA-00001"):
        first.admin_sql(insert, ["procarena-shadow:X:1"])
    first.admin_commit()
    second.stop()
    first.stop()


def test_harness_members_of_the_session(db: FakeDb) -> None:
    """The session's public members (docs/redesign.md section 3.3): harness SQL, the server's
    session id, a fresh connection, the DB-API connection."""
    s = make_session(db)
    assert s.server_session_id == 57 and s.connection is s.conn
    assert s.harness_sql("SELECT 5 FROM dual") == [(5,)]
    s.pin_setting("ALTER SESSION SET NLS_DATE_FORMAT = 'YYYY-MM-DD'")
    before, conn = db.connects, s.connection
    s.reconnect()
    assert db.connects == before + 1 and s.connection is not conn

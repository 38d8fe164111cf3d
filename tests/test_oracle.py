"""The Oracle backend.

Pure parts (error classification, DSN parsing, fixture partitioning, janitor SQL, value
formatting) always run. The database part runs when an Oracle is reachable -- through
``PLSQL_ORACLE_DSN`` (e.g. an Autonomous Database or a local Oracle Free), or a working Docker
for testcontainers' Oracle Free -- and is skipped with exactly that reason otherwise.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_plsqlbench import outcomes
from pytest_plsqlbench.dialects.oracle import (
    ObjectState,
    OracleBackend,
    candidate_name,
    classify,
    created_unit,
    diff_snapshots,
    drop_statement,
    error_codes,
    format_cell,
    janitor_statements,
    new_password,
    parse_dsn,
    partition_fixture,
    primary_code,
    restore_statements,
)
from pytest_plsqlbench.errors import UsageError
from pytest_plsqlbench.settings import Settings

REPO = Path(__file__).resolve().parent.parent
SKIP_REASON = "no Oracle reachable: set PLSQL_ORACLE_DSN or run Docker"


# --------------------------------------------------------------------------- classification
@pytest.mark.parametrize(
    ("message", "phase", "want", "code"),
    [
        (
            "ORA-06550: line 1, column 7:\nPLS-00201: identifier 'SF_TOTAL' must be declared\nORA-06550: line 1, column 7:\n"
            "PL/SQL: Statement ignored",
            "test",
            outcomes.INTERFACE,
            "PLS-00201",
        ),
        (
            "ORA-06550: line 1, column 7:\nPLS-00306: wrong number or types of arguments in call to 'F'",
            "test",
            outcomes.INTERFACE,
            "PLS-00306",
        ),
        (
            "ORA-06550: line 1, column 7:\nPLS-00905: object CAND.F is invalid",
            "test",
            outcomes.INVALID_ARTIFACT,
            "PLS-00905",
        ),
        ("ORA-00942: table or view does not exist", "test", outcomes.INTERFACE, "ORA-00942"),
        ('ORA-00904: "TOTALS": invalid identifier', "install", outcomes.INTERFACE, "ORA-00904"),
        ("ORA-20001: case-2 failed\nORA-06512: at line 3", "test", outcomes.WRONG_OUTPUT, "ORA-20001"),
        (
            'ORA-01403: no data found\nORA-06512: at "CAND.F", line 5',
            "test",
            outcomes.WRONG_OUTPUT,
            "ORA-01403",
        ),
        ("ORA-01476: divisor is equal to zero", "test", outcomes.WRONG_OUTPUT, "ORA-01476"),
        ("ORA-00933: SQL command not properly ended", "test", outcomes.INVALID_ARTIFACT, "ORA-00933"),
        ("ORA-00900: invalid SQL statement", "install", outcomes.INVALID_ARTIFACT, "ORA-00900"),
        ("ORA-01031: insufficient privileges", "test", outcomes.UNSAFE, "ORA-01031"),
        ("DPY-4024: call timeout of 10000 ms exceeded", "test", outcomes.TIMEOUT, "DPY-4024"),
        ("ORA-01013: user requested cancel of current operation", "test", outcomes.TIMEOUT, "ORA-01013"),
        (
            "DPY-4011: the database or network closed the connection",
            "test",
            outcomes.INFRASTRUCTURE,
            "DPY-4011",
        ),
        ("ORA-03113: end-of-file on communication channel", "install", outcomes.INFRASTRUCTURE, "ORA-03113"),
        ('ORA-04063: package body "CAND.PKG" has errors', "test", outcomes.INVALID_ARTIFACT, "ORA-04063"),
        ("ORA-06502: PL/SQL: numeric or value error", "install", outcomes.INVALID_ARTIFACT, "ORA-06502"),
        ('PLS-00103: Encountered the symbol "END"', "install", outcomes.INVALID_ARTIFACT, "PLS-00103"),
        ("something without a code", "test", outcomes.WRONG_OUTPUT, None),
        ("something without a code", "install", outcomes.INVALID_ARTIFACT, None),
    ],
)
def test_classify_follows_the_paper(message: str, phase: str, want: str, code: str | None) -> None:
    codes = error_codes(message)
    assert classify(codes, phase) == want  # type: ignore[arg-type]
    assert primary_code(codes) == code


def test_error_codes_keep_order_and_pad() -> None:
    assert error_codes("ORA-6550: x PLS-201: y ORA-06550: z") == ["ORA-06550", "PLS-00201"]


# --------------------------------------------------------------------------- connection strings
def test_parse_dsn_forms() -> None:
    ez = parse_dsn("admin/s3cr@t@myhost:1521/FREEPDB1")
    assert (ez.user, ez.password, ez.dsn, dict(ez.params)) == ("admin", "s3cr@t", "myhost:1521/FREEPDB1", {})
    url = parse_dsn(
        "oracle://admin:p%40ss@db.example:1522/svc?config_dir=/w&wallet_location=/w&wallet_password=x"
    )
    assert (url.user, url.password, url.dsn) == ("admin", "p@ss", "db.example:1522/svc")
    assert url.params == {"config_dir": "/w", "wallet_location": "/w", "wallet_password": "x"}
    sa = parse_dsn("oracle+oracledb://system:pw@localhost:1521/?service_name=FREEPDB1")
    assert sa.dsn == "localhost:1521/FREEPDB1"
    alias = parse_dsn("ADMIN/pw@mydb_high")
    assert alias.dsn == "mydb_high" and "pw" not in alias.redacted()


@pytest.mark.parametrize("bad", ["", "justahost", "user@host", "oracle://host:1521/x"])
def test_parse_dsn_rejects_incomplete(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_dsn(bad)


def test_names_and_passwords() -> None:
    name = candidate_name("gw3")
    assert name.startswith("PLSQLB_GW3_") and name.isupper() and len(name) <= 128
    assert candidate_name("gw3") != name
    pw = new_password()
    assert 12 <= len(pw) <= 30 and '"' not in pw
    assert any(c.isupper() for c in pw) and any(c.islower() for c in pw) and any(c.isdigit() for c in pw)


# --------------------------------------------------------------------------- fixtures
def test_smoke_shop_fixture_is_all_owner_statements() -> None:
    script = (REPO / "fixtures" / "shop" / "oracle.sql").read_text()
    owners, owned, candidate = partition_fixture(script)
    assert owners == ["SHOP"]
    assert candidate == []
    assert {o for o, _ in owned} == {"SHOP"}
    assert not any(s.first_word == "COMMIT" for _, s in owned)
    assert sum(1 for _, s in owned if s.first_word == "CREATE") == 4


def test_unqualified_fixture_objects_go_to_the_candidate_schema() -> None:
    script = (
        "CREATE OR REPLACE TYPE num_ntt AS TABLE OF NUMBER;\n/\n"
        'CREATE TABLE "Mixed".t (a NUMBER);\nINSERT INTO "Mixed".t VALUES (1);\nCOMMIT;\n'
        "CREATE TABLE helper (a NUMBER);\n"
    )
    owners, owned, candidate = partition_fixture(script)
    assert owners == ["Mixed"]
    assert [s.text.split("(")[0].strip() for _, s in owned] == [
        'CREATE TABLE "Mixed".t',
        'INSERT INTO "Mixed".t VALUES',
    ]
    assert [s.first_word for s in candidate] == ["CREATE", "CREATE"]


def test_spider_fixture_partitions_by_owner(plsqlbench_sample: Path) -> None:
    from pytest_plsqlbench.spider.schema import Catalog

    catalog = Catalog.spider(plsqlbench_sample)
    fixture = catalog.oracle_fixture("CRE_THEME_PARK")
    owners, owned, candidate = partition_fixture(fixture.script)
    assert owners == ["CRE_THEME_PARK"] and not candidate
    creates = [s for _, s in owned if s.first_word == "CREATE"]
    assert len(creates) == len(catalog.owner_tables("CRE_THEME_PARK"))
    assert all(not s.text.endswith(";") for _, s in owned)


# --------------------------------------------------------------------------- janitor
def test_janitor_drops_dependents_first_and_skips_owned_parts() -> None:
    stmts = janitor_statements(
        [
            ("T_OBJ", "TYPE"),
            ("T_OBJ", "TYPE BODY"),
            ("PKG", "PACKAGE BODY"),
            ("PKG", "PACKAGE"),
            ("SYS_LOB0001C00002$$", "LOB"),
            ("ITEMS", "TABLE"),
            ("V_ITEMS", "VIEW"),
            ("TRG", "TRIGGER"),
            ('odd"name', "FUNCTION"),
            ("SEQ", "SEQUENCE"),
        ]
    )
    assert stmts == [
        'DROP TRIGGER "TRG"',
        'DROP VIEW "V_ITEMS" CASCADE CONSTRAINTS',
        'DROP FUNCTION "odd""name"',
        'DROP PACKAGE "PKG"',
        'DROP TABLE "ITEMS" CASCADE CONSTRAINTS PURGE',
        'DROP SEQUENCE "SEQ"',
        'DROP TYPE "T_OBJ" FORCE',
    ]


def test_janitor_drops_a_lone_body_when_its_spec_stays() -> None:
    assert janitor_statements([("PKG", "PACKAGE BODY")]) == ['DROP PACKAGE BODY "PKG"']
    assert drop_statement("X", "LOB PARTITION") is None


def test_snapshot_diff_and_restore() -> None:
    t0 = dt.datetime(2024, 1, 1)
    before = {
        ("F", "FUNCTION"): ObjectState(1, t0, "VALID", "FUNCTION f RETURN NUMBER IS BEGIN RETURN 1; END;"),
        ("PKG", "PACKAGE"): ObjectState(2, t0, "VALID", "PACKAGE pkg IS x NUMBER; END;"),
        ("T", "TABLE"): ObjectState(3, t0, "VALID"),
    }
    after = {
        ("F", "FUNCTION"): ObjectState(
            1, t0 + dt.timedelta(seconds=1), "INVALID", "FUNCTION f RETURN NUMBER IS BEGIN x; END;"
        ),
        ("PKG", "PACKAGE"): before[("PKG", "PACKAGE")],
        ("NEW_P", "PROCEDURE"): ObjectState(9, t0, "VALID", "PROCEDURE new_p IS BEGIN NULL; END;"),
    }
    new, changed = diff_snapshots(before, after)
    assert new == [("NEW_P", "PROCEDURE")]
    assert sorted(changed) == [("F", "FUNCTION"), ("T", "TABLE")]
    restore, lost = restore_statements(before, changed)
    assert restore == ["CREATE OR REPLACE FUNCTION f RETURN NUMBER IS BEGIN RETURN 1; END;"]
    assert lost == [("T", "TABLE")]


def test_created_unit_names_what_user_errors_lists() -> None:
    assert created_unit("create or replace package body pkg_x is ...") == ("PACKAGE BODY", "PKG_X", None)
    assert created_unit('CREATE OR REPLACE EDITIONABLE FUNCTION "MixedF" RETURN NUMBER') == (
        "FUNCTION",
        "MixedF",
        None,
    )
    assert created_unit("CREATE TYPE cand.t_obj AS OBJECT (a NUMBER);") == ("TYPE", "T_OBJ", "CAND")
    assert created_unit("CREATE OR REPLACE FORCE VIEW v AS SELECT 1 a FROM dual") == ("VIEW", "V", None)
    assert created_unit("CREATE TABLE t (a NUMBER)") is None


# --------------------------------------------------------------------------- values
def test_format_cell_follows_the_output_rules() -> None:
    moment = dt.datetime(2024, 3, 5, 7, 8, 9)
    assert format_cell(moment, "DB_TYPE_DATE") == "2024-03-05"
    assert format_cell(moment, "DB_TYPE_TIMESTAMP") == "2024-03-05 07:08:09"
    assert format_cell(moment, "DB_TYPE_TIMESTAMP_TZ") == "2024-03-05 07:08:09"
    assert format_cell(None, "DB_TYPE_VARCHAR") == ""
    assert format_cell(decimal.Decimal("0.50"), "DB_TYPE_NUMBER") == "0.5"
    assert format_cell(decimal.Decimal("120"), "DB_TYPE_NUMBER") == "120"
    assert format_cell(True, "DB_TYPE_BOOLEAN") == "TRUE"
    assert format_cell(b"\x01\xab", "DB_TYPE_RAW") == "01AB"


def test_container_without_docker_is_an_infrastructure_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Docker: one clear error, not a traceback from deep inside testcontainers."""
    pytest.importorskip("testcontainers")
    import docker

    def no_docker(*a: object, **k: object) -> None:
        raise docker.errors.DockerException("Error while fetching server API version: no socket")

    monkeypatch.setattr(docker, "from_env", no_docker)
    backend = OracleBackend(Settings.of(subsets=(), dialect="oracle", db="container"), "gw0")
    from pytest_plsqlbench.errors import InfrastructureError

    with pytest.raises(InfrastructureError, match="needs a running Docker"):
        backend.start()


# --------------------------------------------------------------------------- a real Oracle
def _docker_works() -> bool:
    try:
        import docker
        import testcontainers  # noqa: F401

        docker.from_env().ping()
        return True
    except Exception:  # noqa: BLE001
        return False


def oracle_settings(**kw: object) -> Settings:
    dsn = os.environ.get("PLSQL_ORACLE_DSN")
    base: dict[str, object] = {"subsets": (), "dialect": "oracle", "timeout": 5.0}
    base.update({"db": "dsn", "dsn": dsn} if dsn else {"db": "container"})
    base.update(kw)
    return Settings.of(**base)  # type: ignore[arg-type]


def oracle_reachable() -> bool:
    return bool(os.environ.get("PLSQL_ORACLE_DSN")) or _docker_works()


needs_oracle = pytest.mark.skipif(not oracle_reachable(), reason=SKIP_REASON)


@pytest.fixture(scope="module")
def backend() -> Iterator[OracleBackend]:
    if not oracle_reachable():
        pytest.skip(SKIP_REASON)
    b = OracleBackend(oracle_settings(max_output=2000), "gw0")
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def session(backend: OracleBackend) -> Iterator[object]:
    s = backend.session()
    s.begin_task()
    try:
        yield s
    finally:
        s.end_task()
        assert backend.candidate_objects() == [], "the janitor left objects behind"


SHOP = REPO / "fixtures" / "shop" / "oracle.sql"


@needs_oracle
@pytest.mark.oracle
def test_schema_load_is_read_only_and_once(backend: OracleBackend) -> None:
    from pytest_plsqlbench.tasks import Fixture

    fixture = Fixture("test:shop:oracle", SHOP.read_text(), "shop")
    backend.ensure_fixtures([fixture])
    backend.ensure_fixtures([fixture])  # no second load
    s = backend.session()
    s.begin_task()
    try:
        rows = s.run("SELECT COUNT(*), MIN(signup_date) FROM shop.customers;", isolated=True, phase="test")
        assert rows.ok and rows.lines == ["5,2024-01-15"]
        write = s.run(
            "INSERT INTO shop.customers VALUES (9, 'x', 'y', SYSDATE);", isolated=True, phase="test"
        )
        assert not write.ok and write.error.failure_class in (outcomes.UNSAFE, outcomes.INTERFACE)
    finally:
        s.end_task()
    registry = backend._admin_sql(
        "SELECT status FROM plsqlbench_fixtures WHERE fixture_key = :k", ["test:shop:oracle"]
    )
    assert registry == [("loaded",)]


@needs_oracle
@pytest.mark.oracle
def test_dbms_output_and_rows_in_order(session) -> None:  # noqa: ANN001
    script = (
        "SET SERVEROUTPUT ON\nBEGIN\n  DBMS_OUTPUT.PUT_LINE('one');\n  DBMS_OUTPUT.PUT_LINE(NULL);\n"
        "  DBMS_OUTPUT.PUT('a'); DBMS_OUTPUT.PUT_LINE('b');\nEND;\n/\n"
        "SELECT 'x' c, DATE '2024-02-03' d, TIMESTAMP '2024-02-03 04:05:06' t, NULL n, 0.5 h FROM dual;\n"
        "SET SERVEROUTPUT OFF\nEXEC DBMS_OUTPUT.PUT_LINE('hidden');\n"
    )
    result = session.run(script, isolated=True, phase="test")
    assert result.ok, result.error
    assert result.lines == ["one", "", "ab", "x,2024-02-03,2024-02-03 04:05:06,,0.5"]


@needs_oracle
@pytest.mark.oracle
def test_output_is_capped(session) -> None:  # noqa: ANN001
    result = session.run(
        "BEGIN FOR i IN 1..500 LOOP DBMS_OUTPUT.PUT_LINE(RPAD('x', 50, 'x')); END LOOP; END;\n/",
        isolated=True,
        phase="test",
    )
    assert result.truncated and result.lines[-1] == "<output truncated at 2000 characters>"


@needs_oracle
@pytest.mark.oracle
def test_compile_errors_are_invalid_artifacts_or_interface(session) -> None:  # noqa: ANN001
    syntax = session.run(
        "CREATE OR REPLACE FUNCTION f RETURN NUMBER IS BEGIN RETURN 1 END;\n/",
        isolated=False,
        phase="install",
    )
    assert syntax.error is not None and syntax.error.failure_class == outcomes.INVALID_ARTIFACT
    assert syntax.error.code and syntax.error.code.startswith("PLS-")
    grounding = session.run(
        "CREATE OR REPLACE FUNCTION g RETURN NUMBER IS n NUMBER; BEGIN SELECT COUNT(*) INTO n "
        "FROM no_such_table; RETURN n; END;\n/",
        isolated=False,
        phase="install",
    )
    assert grounding.error is not None and grounding.error.failure_class == outcomes.INTERFACE
    assert grounding.error.code == "ORA-00942"


@needs_oracle
@pytest.mark.oracle
def test_error_classes_at_test_time(session) -> None:  # noqa: ANN001
    install = session.run(
        "CREATE OR REPLACE FUNCTION add1(x IN NUMBER) RETURN NUMBER IS BEGIN RETURN x + 1; END;\n/\n"
        "CREATE OR REPLACE PACKAGE pkg IS FUNCTION f RETURN NUMBER; END;\n/",
        isolated=False,
        phase="install",
    )
    assert install.ok, install.error
    cases = {
        "BEGIN DBMS_OUTPUT.PUT_LINE(missing_fn(1)); END;\n/": (outcomes.INTERFACE, "PLS-00201"),
        "BEGIN DBMS_OUTPUT.PUT_LINE(add1(1, 2)); END;\n/": (outcomes.INTERFACE, "PLS-00306"),
        "BEGIN DBMS_OUTPUT.PUT_LINE(pkg.f); END;\n/": (
            outcomes.INVALID_ARTIFACT,
            None,
        ),  # no body: ORA-04067/06508
        "BEGIN RAISE_APPLICATION_ERROR(-20001, 'case failed'); END;\n/": (outcomes.WRONG_OUTPUT, "ORA-20001"),
        "SELECT 1/0 FROM dual;": (outcomes.WRONG_OUTPUT, "ORA-01476"),
        "SELECT nope FROM dual;": (outcomes.INTERFACE, "ORA-00904"),
    }
    for script, (cls, code) in cases.items():
        err = session.run(script, isolated=True, phase="test").error
        assert err is not None, script
        if code is not None:
            assert (err.failure_class, err.code) == (cls, code), script
        else:
            assert err.failure_class in (outcomes.INVALID_ARTIFACT, outcomes.WRONG_OUTPUT), (script, err)


@needs_oracle
@pytest.mark.oracle
def test_janitor_drops_what_answers_create(backend: OracleBackend) -> None:
    s = backend.session()
    s.begin_task()
    s.run(
        "CREATE TABLE scratch_t (a NUMBER);\nCREATE OR REPLACE TYPE t_obj AS OBJECT (a NUMBER);\n/\n"
        "CREATE OR REPLACE PACKAGE p IS PROCEDURE x; END;\n/\nCREATE OR REPLACE PACKAGE BODY p IS PROCEDURE x IS "
        "BEGIN NULL; END; END;\n/\nCREATE SEQUENCE s1;\nCREATE VIEW v1 AS SELECT a FROM scratch_t;",
        isolated=False,
        phase="install",
    )
    assert len(backend.candidate_objects()) >= 6
    test = s.run(
        "BEGIN EXECUTE IMMEDIATE 'CREATE TABLE made_by_test (a NUMBER)'; END;\n/", isolated=True, phase="test"
    )
    assert test.ok and ("MADE_BY_TEST", "TABLE") not in backend.candidate_objects()
    s.end_task()
    assert backend.candidate_objects() == []


@needs_oracle
@pytest.mark.oracle
def test_failed_install_restores_the_earlier_turn(session, backend: OracleBackend) -> None:  # noqa: ANN001
    first = session.run(
        "CREATE OR REPLACE FUNCTION turn_f RETURN NUMBER IS BEGIN RETURN 1; END;\n/",
        isolated=False,
        phase="install",
    )
    assert first.ok
    broken = session.run(
        "CREATE OR REPLACE FUNCTION turn_f RETURN NUMBER IS BEGIN RETURN; END;\n/\n",
        isolated=False,
        phase="install",
    )
    assert broken.error is not None
    check = session.run("SELECT turn_f FROM dual;", isolated=True, phase="test")
    assert check.ok and check.lines == ["1"]


@needs_oracle
@pytest.mark.oracle
def test_timeout_then_the_session_still_works(backend: OracleBackend) -> None:
    old = backend.settings
    backend.settings = oracle_settings(timeout=2.0, max_output=2000)
    s = backend.session()
    s.connect()  # the call timeout is set per connection
    s.begin_task()
    try:
        spin = s.run("BEGIN LOOP NULL; END LOOP; END;\n/", isolated=True, phase="test")
        assert spin.error is not None and spin.error.failure_class == outcomes.TIMEOUT
        again = s.run("SELECT 42 FROM dual;", isolated=True, phase="test")
        assert again.ok and again.lines == ["42"]
    finally:
        s.end_task()
        backend.settings = old
        s.connect()


@needs_oracle
@pytest.mark.oracle
@pytest.mark.slow
def test_smoke_subset_passes_with_reference_answers(pytester: pytest.Pytester) -> None:
    """End to end: the smoke subset's Oracle reference answers pass on this Oracle."""
    args = [
        "--subset",
        "smoke",
        "--plsql-dialect=oracle",
        "--plsql-model=reference",
        "-p",
        "no:cacheprovider",
    ]
    if os.environ.get("PLSQL_ORACLE_DSN"):
        args.append(f"--plsql-dsn={os.environ['PLSQL_ORACLE_DSN']}")
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == 0, result.stdout.str()[-3000:]

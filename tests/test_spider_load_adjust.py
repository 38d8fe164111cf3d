"""How the release's data is loaded where its DDL and DML disagree (spider/adjust.py), for both
dialects, and what happens to a fixture that fails anyway -- without a database."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_plsqlbench.dialects.base import Backend
from pytest_plsqlbench.dialects.oracle import partition_fixture
from pytest_plsqlbench.errors import FixtureError
from pytest_plsqlbench.manifests import load_manifest
from pytest_plsqlbench.settings import Settings
from pytest_plsqlbench.spider.adjust import null_counts, table_columns, value_rows
from pytest_plsqlbench.spider.build import load
from pytest_plsqlbench.spider.schema import Catalog
from pytest_plsqlbench.tasks import Fixture

OWNER = "CRE_DOC_TEMPLATE_MGT"
MANIFEST = Path(__file__).parent.parent / "tasks" / "spider.yaml"


@pytest.fixture(scope="session")
def spider_sample(shared_data: Path) -> Path:
    return shared_data / "plsqlbench-spider-sample"


@pytest.fixture
def oracle_server(monkeypatch: pytest.MonkeyPatch):
    """The fake Oracle driver of test_oracle_session (statements logged, none really run)."""
    import test_oracle_session as fake

    state = fake.FakeServer()
    driver = fake.SimpleNamespace(
        Error=fake.Error,
        DatabaseError=fake.DatabaseError,
        IntegrityError=fake.IntegrityError,
        connect=lambda **kw: fake.AdminConnection(state),
        **vars(fake.DB),
    )
    monkeypatch.setitem(sys.modules, "oracledb", driver)  # what every module's _driver() imports
    return state


def test_value_rows_split_tuples_and_fields_outside_strings_and_calls() -> None:
    values = "(1, 'a, (b)', TO_DATE('2020-01-01', 'YYYY-MM-DD'), ''), (2, 'it''s', NULL, 'x')"
    assert list(value_rows(values)) == [
        ["1", "'a, (b)'", "TO_DATE('2020-01-01', 'YYYY-MM-DD')", "''"],
        ["2", "'it''s'", "NULL", "'x'"],
    ]
    assert null_counts(["A", "B", "C", "D"], [values]) == {"C": (1, 0), "D": (1, 1)}


def test_table_columns() -> None:
    cols = table_columns(
        'CREATE TABLE S.T ("A" NUMBER NOT NULL, "B" VARCHAR2(5) NOT NULL, "C" NUMBER NULL, '
        '"D" NUMBER, CONSTRAINT P PRIMARY KEY ("A"))'
    )
    assert cols.not_null == {"A", "B"} and cols.primary_key == {"A"}


def test_the_excerpt_relaxes_exactly_the_column_the_release_puts_empty_strings_into(
    spider_sample: Path,
) -> None:
    cat = Catalog.spider(spider_sample)
    adjust = cat.adjustments(OWNER)
    assert [(r.table, r.column, r.rows, r.empty_strings) for r in adjust.relaxed] == [
        (f"{OWNER}.TEMPLATES", "TEMPLATE_DETAILS", 20, 20)
    ]
    assert adjust.unloadable == []
    assert cat.table_rows(f"{OWNER}.DOCUMENTS") == 0 and cat.data_rows(OWNER) == 40
    assert cat.foreign_rows == []


def test_oracle_fixture_keeps_the_published_statements_and_relaxes_after_the_create(
    spider_sample: Path,
) -> None:
    """The Oracle path gets the same adjustment: the published DDL verbatim, then MODIFY ... NULL
    before the first INSERT, run as the owner (partition_fixture routes it there)."""
    cat = Catalog.spider(spider_sample)
    script = cat.oracle_fixture(OWNER).script
    alter = f'ALTER TABLE "{OWNER}"."TEMPLATES" MODIFY ("TEMPLATE_DETAILS" NULL);'
    assert script.count(alter) == 1
    assert script.index(f"CREATE TABLE {OWNER}.TEMPLATES") < script.index(alter) < script.index("\nINSERT ")
    for table in cat.owner_tables(OWNER):  # published DDL and DML unchanged
        assert table.ddl + ";" in script
        assert all(stmt + ";" in script for stmt in cat.inserts.get(table.key, ()))
    owners, owned, candidate = partition_fixture(script)
    assert owners == [OWNER] and candidate == []
    assert any(o == OWNER and s.text.startswith("ALTER TABLE") for o, s in owned)


def test_postgres_fixture_drops_not_null_and_loads_empty_strings_as_null(spider_sample: Path) -> None:
    pg = Catalog.spider(spider_sample).postgres_fixture(OWNER)
    script = pg.fixture.script
    alter = 'ALTER TABLE "cre_doc_template_mgt"."templates" ALTER COLUMN "template_details" DROP NOT NULL;'
    assert script.count(alter) == 1
    assert (
        script.index("CREATE TABLE cre_doc_template_mgt.templates")
        < script.index(alter)
        < script.index("\nINSERT")
    )
    assert "''" not in script.split(alter, 1)[1]  # '' is Oracle's NULL
    assert pg.rows_loaded == 40 and pg.problems == []


def _copy_with(tmp: Path, sample: Path, tables: dict) -> Path:
    root = tmp / "release"
    for rel in ("datasets/spider/spider1.jsonl", "schema/spider/spider_ddl.jsonl"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes((sample / rel).read_bytes())
    doc = json.loads((sample / "schema/spider/spider_dml.json").read_text())
    doc["tables"].update(tables)
    (root / "schema/spider/spider_dml.json").write_text(json.dumps(doc))
    return root


def test_another_databases_rows_are_never_loaded(tmp_path: Path, spider_sample: Path) -> None:
    """The release keys DML entries by bare table name; an entry of another database that
    targets this database's table is left out and reported, and the empty table says why."""
    stmt = f'INSERT INTO {OWNER}.DOCUMENTS ("DOCUMENT_ID", "TEMPLATE_ID") VALUES (57, 1), (121, 4)'
    root = _copy_with(
        tmp_path,
        spider_sample,
        {
            "Documents": {
                "insert_statements": [stmt],
                "source_database": "cre_Docs_and_Epenses",
                "total_rows": 2,
            }
        },
    )
    cat = Catalog.spider(root)
    assert f"{OWNER}.DOCUMENTS" not in cat.inserts and cat.table_rows(f"{OWNER}.DOCUMENTS") == 0
    assert len(cat.foreign_rows) == 1 and "cre_Docs_and_Epenses" in cat.foreign_rows[0]
    assert "holds cre_Docs_and_Epenses's rows" in cat.why_no_rows(f"{OWNER}.DOCUMENTS")
    settings = Settings.of(subsets=("spider",), dialect="oracle", data=root, data_cache=tmp_path / "cache")
    tasks, notes = load(load_manifest(MANIFEST), settings, root)
    assert notes.foreign_rows == cat.foreign_rows
    assert "cre_Docs_and_Epenses" in notes.tables_without_rows[f"{OWNER}.DOCUMENTS"]
    assert all("(57, 1)" not in f.script for t in tasks for f in t.fixtures)


def test_null_into_a_primary_key_makes_the_database_not_runnable_at_build_time(
    tmp_path: Path, spider_sample: Path
) -> None:
    stmt = f'INSERT INTO {OWNER}.DOCUMENTS ("DOCUMENT_ID", "TEMPLATE_ID") VALUES (1, 1), (\'\', 4)'
    root = _copy_with(
        tmp_path,
        spider_sample,
        {
            "Documents": {
                "insert_statements": [stmt],
                "source_database": "cre_Doc_Template_Mgt",
                "total_rows": 2,
            }
        },
    )
    for dialect in ("oracle", "postgres"):
        settings = Settings.of(subsets=("spider",), dialect=dialect, data=root, data_cache=tmp_path / "cache")
        tasks, notes = load(load_manifest(MANIFEST), settings, root)
        assert len(tasks) == 22 and all(t.fixtures == () for t in tasks)
        reasons = {t.not_runnable for t in tasks}
        assert reasons == {
            (
                f"data error: schema {OWNER} cannot be loaded: 1 row(s) of {OWNER}.DOCUMENTS insert NULL (or '') "
                "into primary-key column DOCUMENT_ID"
            )
        }
        assert all("not_runnable" in t.markers for t in tasks)
        assert list(notes.unloadable) == [OWNER]


class _Backend(Backend):
    dialect = "test"

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []

    def _load(self, fixture: Fixture) -> None:
        self.loads.append(fixture.key)
        if fixture.key == "bad":
            raise FixtureError("fixture 'bad' failed to load: boom")

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def session(self):
        raise NotImplementedError

    def recover(self) -> None: ...

    @property
    def version(self) -> str:
        return "test"


def test_a_failed_fixture_is_remembered_not_loaded_again() -> None:
    backend = _Backend()
    good, bad = Fixture("good", ""), Fixture("bad", "")
    with pytest.raises(FixtureError, match="boom"):
        backend.ensure_fixtures([good, bad])
    with pytest.raises(FixtureError, match="boom"):
        backend.ensure_fixtures([good, bad])
    assert backend.loads == ["good", "bad"]  # one attempt, then the remembered cause


def test_an_entry_mixing_databases_keeps_only_its_own_rows(tmp_path: Path, spider_sample: Path) -> None:
    own = f'INSERT INTO {OWNER}.DOCUMENTS ("DOCUMENT_ID") VALUES (1), (2), (3)'
    other = 'INSERT INTO CRE_DOCS_AND_EPENSES.DOCUMENTS ("DOCUMENT_ID") VALUES (57)'
    root = _copy_with(
        tmp_path,
        spider_sample,
        {"Documents": {"insert_statements": [own, other], "source_database": OWNER.lower(), "total_rows": 4}},
    )
    cat = Catalog.spider(root)
    assert cat.inserts[f"{OWNER}.DOCUMENTS"] == [own] and "CRE_DOCS_AND_EPENSES.DOCUMENTS" not in cat.inserts
    assert cat.table_rows(f"{OWNER}.DOCUMENTS") == 3  # counted, not the entry's total_rows
    assert (
        cat.foreign_rows
        and "1 statement(s) insert into CRE_DOCS_AND_EPENSES.DOCUMENTS" in cat.foreign_rows[0]
    )


# --------------------------------------------------------------------------- Oracle backend (fake driver)
def test_oracle_backend_runs_the_adjusted_spider_fixture_as_its_owner(
    spider_sample: Path, oracle_server
) -> None:
    """The Spider fixture through the Oracle backend (a fake driver: no Oracle here): the NOT NULL
    column is relaxed right after its CREATE TABLE, before the release's multi-row INSERTs."""
    from pytest_plsqlbench.dialects import oracle

    fixture = Catalog.spider(spider_sample).oracle_fixture(OWNER)
    settings = Settings.of(subsets=(), dialect="oracle", db="dsn", dsn="admin/pw@db:1521/svc")
    backend = oracle.OracleBackend(settings, "gw0")
    backend.start()
    backend.ensure_fixtures([fixture])
    log = oracle_server.log
    create = next(i for i, s in enumerate(log) if s.startswith(f"CREATE TABLE {OWNER}.TEMPLATES"))
    alter = log.index(f'ALTER TABLE "{OWNER}"."TEMPLATES" MODIFY ("TEMPLATE_DETAILS" NULL)')
    first_insert = next(i for i, s in enumerate(log) if s.startswith("INSERT /*+ APPEND */"))
    assert create < alter < first_insert
    schema = [s for s in log[:alter] if s.startswith("ALTER SESSION SET CURRENT_SCHEMA")][-1]
    assert schema == f'ALTER SESSION SET CURRENT_SCHEMA = "{OWNER}"'
    assert sum(s.startswith("INSERT /*+ APPEND */") for s in log) == 3
    backend.stop()


def test_oracle_fixture_failure_is_a_data_error_not_retried(
    spider_sample: Path, oracle_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_plsqlbench.dialects import oracle

    import test_oracle_session as fake

    real = fake.AdminCursor.execute

    def execute(self, text: str, params=()) -> None:
        if text.startswith(f"INSERT /*+ APPEND */ INTO {OWNER}.TEMPLATES"):
            oracle_server.log.append(text)
            raise fake.ora("ORA-01400", f'cannot insert NULL into ("{OWNER}"."TEMPLATES"."TEMPLATE_DETAILS")')
        return real(self, text, params)

    monkeypatch.setattr(fake.AdminCursor, "execute", execute)
    fixture = Catalog.spider(spider_sample).oracle_fixture(OWNER)
    backend = oracle.OracleBackend(
        Settings.of(subsets=(), dialect="oracle", db="dsn", dsn="admin/pw@db/svc"), "gw0"
    )
    backend.start()
    with pytest.raises(FixtureError, match="failed to load at script line .*ORA-01400: cannot insert NULL"):
        backend.ensure_fixtures([fixture])
    attempts = sum(s.startswith(f"INSERT /*+ APPEND */ INTO {OWNER}.TEMPLATES") for s in oracle_server.log)
    with pytest.raises(FixtureError, match="ORA-01400"):
        backend.ensure_fixtures([fixture])  # the next task of this database: the same cause, no reload
    assert (
        sum(s.startswith(f"INSERT /*+ APPEND */ INTO {OWNER}.TEMPLATES") for s in oracle_server.log)
        == attempts
    )
    backend.stop()


def test_the_adjustment_says_what_the_release_reports() -> None:
    from pytest_plsqlbench.spider.adjust import Relaxed

    assert Relaxed("S.T", "C", 2, 1, 0).describe() == (
        "S.T.C: NOT NULL not enforced, as in the release's load (2 row(s) insert '' or NULL, which Oracle "
        "stores as NULL; the release reports the INSERT successful)"
    )
    assert (
        Relaxed("S.T", "C", 2, 0, None)
        .describe()
        .endswith("insert NULL, which Oracle stores as NULL; the release reports no failure)")
    )
    assert (
        Relaxed("S.T", "C", 2, 2, 1)
        .describe()
        .endswith("the release reports 1 failed statement(s) for the table)")
    )

"""Pure parts of the schema-grounded subsets: release readers, schema catalog, sqlglot
transpilation, the PL/SQL -> PL/pgSQL reference translation, prompts and comparators."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_plsqlbench.comparators import column_orders, compare_rows, compare_rows_lenient
from pytest_plsqlbench.errors import DataError
from pytest_plsqlbench.manifests import load_manifest
from pytest_plsqlbench.settings import Settings
from pytest_plsqlbench.spider import release
from pytest_plsqlbench.spider.build import gold_shape, load
from pytest_plsqlbench.spider.plpgsql import TranslateError, translate_block, translate_reference
from pytest_plsqlbench.spider.prompts import natural_question, postgres_prompt
from pytest_plsqlbench.spider.schema import Catalog, insert_to_postgres, pg_ident
from pytest_plsqlbench.spider.transpile import (
    TranspileError,
    ddl_to_postgres,
    expression_to_postgres,
    to_postgres,
)


# --------------------------------------------------------------------------- release readers
def test_jsonl_errors_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n{"a": \n')
    with pytest.raises(DataError, match=r"x\.jsonl:3: not valid JSON"):
        release.read_jsonl(path)


def test_git_lfs_pointer_is_recognised(tmp_path: Path) -> None:
    path = tmp_path / "spider_dml.json"
    path.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 9686180\n")
    with pytest.raises(DataError, match="Git LFS pointer"):
        release.read_json_pairs(path)


def test_duplicate_table_names_are_kept(tmp_path: Path) -> None:
    """spider_dml.json keys tables by source name; two databases may share one."""
    path = tmp_path / "spider_dml.json"
    ins = 'INSERT INTO {o}.DOCUMENTS ("ID") VALUES (1), (2)'
    path.write_text(
        '{"metadata": {}, "tables": {"Documents": {"insert_statements": ["'
        + ins.format(o="A").replace('"', '\\"')
        + '"], "total_rows": 2}, "Documents": {"insert_statements": ["'
        + ins.format(o="B").replace('"', '\\"')
        + '"], "total_rows": 2}}}'
    )
    cat = Catalog("spider")
    cat.add_spider_dml(path)
    assert sorted(cat.inserts) == ["A.DOCUMENTS", "B.DOCUMENTS"] and cat.rows == {
        "A.DOCUMENTS": 2,
        "B.DOCUMENTS": 2,
    }


def test_spider2_dml_reader_accepts_the_usual_shapes(tmp_path: Path) -> None:
    path = tmp_path / "OUTPUT_DML_dev.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"db_id": "X", "table": "T", "sql": "INSERT INTO X.T (A) VALUES (1), (2), (3)"},
                {
                    "db_id": "X",
                    "table": "U",
                    "insert_statements": ["INSERT INTO X.U (A) VALUES ('a')"],
                    "total_rows": 1,
                },
            ]
        )
        + "\n"
    )
    cat = Catalog("spider2")
    cat.add_jsonl_dml(path)
    assert cat.rows == {"X.T": 3, "X.U": 1}
    path.write_text(json.dumps({"db_id": "X", "rows": []}) + "\n")
    with pytest.raises(DataError, match=r"OUTPUT_DML_dev\.jsonl:1: no INSERT statements"):
        Catalog("spider2").add_jsonl_dml(path)


def test_sample_catalog(plsqlbench_sample: Path) -> None:
    spider = Catalog.spider(plsqlbench_sample)
    assert len(spider.tables) == 145 and len(spider.owners()) == 35
    assert "CRE_DOC_TEMPLATE_MGT" not in spider.owners()  # the sample's Spider tasks' database
    assert sum(len(v) for v in spider.inserts.values()) == 14
    assert len(spider.orphan_data()) == 11  # data whose DDL is not in the excerpt
    assert spider.data_rows("CRE_THEME_PARK") == 4
    spider2 = Catalog.spider2(plsqlbench_sample)
    assert len(spider2.tables) == 40 and spider2.dml_files == []
    assert spider2.owners_of_db("chinook") == ["CHINOOK"]


def test_data_revision(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    (clone / ".git" / "refs" / "heads").mkdir(parents=True)
    (clone / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (clone / ".git" / "refs" / "heads" / "main").write_text("8b0d31dc61539bae28f6bf3306ab23b8132567cf\n")
    assert release.data_revision(clone) == "8b0d31dc6153"
    archive = tmp_path / "plsqlbench-8b0d31dc61539bae28f6bf3306ab23b8132567cf"
    archive.mkdir()
    assert release.data_revision(archive) == "8b0d31dc6153"


def test_a_local_copy_is_identified_by_a_digest_of_the_files_read(tmp_path: Path) -> None:
    one, two = tmp_path / "data", tmp_path / "other-name"
    for root in (one, two):
        (root / "datasets").mkdir(parents=True)
        (root / "datasets" / "a.jsonl").write_text('{"instance_id": "x"}\n')
    rev = release.data_revision(one, [one / "datasets" / "a.jsonl"])
    assert rev.startswith("sha256:") and len(rev) == len("sha256:") + 16 and "local:" not in rev
    # The same content in another folder is the same data; other content is not.
    assert release.data_revision(two, [two / "datasets" / "a.jsonl"]) == rev
    (two / "datasets" / "a.jsonl").write_text('{"instance_id": "y"}\n')
    assert release.data_revision(two, [two / "datasets" / "a.jsonl"]) != rev


def test_loaded_tasks_report_the_digest_of_the_data_they_read(tmp_path: Path, plsqlbench_sample: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(plsqlbench_sample, copy)
    manifest = load_manifest(Path(__file__).parent.parent / "tasks" / "spider2-st.yaml")
    settings = Settings.of(subsets=("spider2-st",), dialect="oracle", data_cache=tmp_path / "cache")

    def revisions(root: Path) -> set[str]:
        tasks, _ = load(manifest, settings, root)
        return {str(t.metadata["data_revision"]) for t in tasks}

    first = revisions(copy)
    assert len(first) == 1 and next(iter(first)).startswith("sha256:")
    dataset = copy / release.SPIDER2_ST
    dataset.write_text(dataset.read_text() + "\n")  # the same tasks, but not the same bytes
    assert revisions(copy) != first


# --------------------------------------------------------------------------- transpilation
@pytest.mark.parametrize(
    ("oracle", "postgres"),
    [
        ('SELECT "DATE", T."ORDER", "Mixed" FROM S.T T', 'SELECT "date", t."order", "Mixed" FROM s.t AS t'),
        ("SELECT a || b || NULL FROM t", "SELECT CONCAT(a, b, NULL) FROM t"),
        ("SELECT NVL(x, '') FROM t WHERE y = ''", "SELECT COALESCE(x, NULL) FROM t WHERE y = NULL"),
        (
            "SELECT * FROM (SELECT a FROM t ORDER BY a) WHERE ROWNUM <= 3",
            "SELECT * FROM (SELECT a FROM t ORDER BY a) LIMIT 3",
        ),
        ("SELECT a FROM t WHERE x = 1 AND ROWNUM < 2", "SELECT a FROM t WHERE x = 1 LIMIT 1"),
        ("SELECT a FROM t MINUS SELECT a FROM u", "SELECT a FROM t EXCEPT SELECT a FROM u"),
        ("SELECT SYSDATE FROM DUAL", "SELECT CURRENT_TIMESTAMP"),
        ("SELECT TO_NUMBER(x) FROM t", "SELECT CAST(x AS DECIMAL) FROM t"),
        ("SELECT * FROM t FETCH FIRST 1 ROWS ONLY", "SELECT * FROM t FETCH FIRST 1 ROWS ONLY"),
    ],
)
def test_to_postgres(oracle: str, postgres: str) -> None:
    assert to_postgres(oracle) == postgres


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("SELECT a FROM t WHERE ROWNUM <= 3 ORDER BY a", "before ORDER BY"),
        ("SELECT ROWNUM, a FROM t", "ROWNUM used other than"),
        ("SELECT 1 FROM dual; SELECT 2 FROM dual", "expected one statement"),
        ("SELEC nothing", "not a query"),
    ],
)
def test_to_postgres_refuses_what_it_cannot_port(sql: str, why: str) -> None:
    with pytest.raises(TranspileError, match=why):
        to_postgres(sql)


def test_ddl_moves_foreign_keys_after_the_data() -> None:
    create, keys = ddl_to_postgres(
        'CREATE TABLE X.T ("A" DATE, "B" RAW(16), "C" FLOAT, "D" CLOB, CONSTRAINT PK PRIMARY KEY ("A"), '
        'CONSTRAINT FK1 FOREIGN KEY ("A") REFERENCES X.U ("A"), CONSTRAINT FK2 FOREIGN KEY ("B") REFERENCES Y.V ("B"))',
        frozenset({"X.T", "X.U"}),
    )
    assert create == (
        'CREATE TABLE x.t ("a" TIMESTAMP(0), "b" BYTEA, "c" DOUBLE PRECISION, "d" TEXT, '
        'CONSTRAINT pk PRIMARY KEY ("a"))'
    )
    assert keys == ['ALTER TABLE x.t ADD CONSTRAINT fk1 FOREIGN KEY ("a") REFERENCES x.u ("a") NOT VALID']


def test_inserts_pass_literals_through_and_empty_strings_become_null() -> None:
    fast = insert_to_postgres(
        "INSERT /*+ APPEND */ INTO A.B (\"X\", \"DATE\") VALUES ('', 'it''s'), (1.5, -2E3), (NULL, '')"
    )
    assert fast == "INSERT INTO a.b (\"x\", \"date\") VALUES (NULL, 'it''s'), (1.5, -2E3), (NULL, NULL)"
    slow = insert_to_postgres("INSERT INTO A.B (\"X\") VALUES (TO_DATE('2020-01-01', 'YYYY-MM-DD')), ('')")
    assert slow == "INSERT INTO a.b (\"x\") VALUES (TO_DATE('2020-01-01', 'YYYY-MM-DD')), (NULL)"


def test_pg_ident() -> None:
    assert [pg_ident(n) for n in ('"ORDER"', "Chinook", '"Mixed"', '"A B"')] == [
        '"order"',
        "chinook",
        '"Mixed"',
        '"A B"',
    ]


def test_gold_shape() -> None:
    assert gold_shape("SELECT a, b FROM t ORDER BY a") == (True, 2)
    assert gold_shape("SELECT * FROM (SELECT a FROM t ORDER BY a) WHERE ROWNUM = 1") == (False, None)
    assert gold_shape("SELECT a FROM t UNION SELECT b FROM u") == (False, 1)
    assert gold_shape("SELECT COUNT(*) FROM t") == (False, 1)


def test_sample_gold_queries_all_transpile(plsqlbench_sample: Path) -> None:
    rows = release.read_jsonl(plsqlbench_sample / release.SPIDER1)
    failures = []
    for rec in rows:
        try:
            to_postgres(rec.data["gold_sql_query"])
        except TranspileError as exc:
            failures.append(f"{rec.data['instance_id']}: {exc}")
    assert not failures


def test_sample_ddl_all_transpiles(plsqlbench_sample: Path) -> None:
    spider = Catalog.spider(plsqlbench_sample)
    for owner in sorted(spider.owners()):
        pg = spider.postgres_fixture(owner)
        assert pg.problems == [] and pg.tables == len(spider.owner_tables(owner)), owner


# --------------------------------------------------------------------------- PL/SQL -> PL/pgSQL
def test_translation_of_the_common_shapes() -> None:
    code = translate_block(
        "DECLARE\n  CURSOR c(p IN NUMBER) IS SELECT A FROM S.T WHERE B = p;\n  v S.T.A%TYPE;\n  n PLS_INTEGER := 0;\n"
        "  s VARCHAR2(10 CHAR) DEFAULT 'x';\nBEGIN\n"
        "  FOR r IN (SELECT A, B FROM S.T ORDER BY A) LOOP\n    DBMS_OUTPUT.PUT_LINE(r.A || ',' || r.B);\n  END LOOP;\n"
        "  FOR i IN REVERSE 1..3 LOOP n := n + i; END LOOP;\n"
        "  FOR r2 IN c(1) LOOP EXIT WHEN r2.A IS NULL; END LOOP;\n"
        "  SELECT MAX(A) INTO v FROM S.T;\n"
        "  IF v > 1 THEN DBMS_OUTPUT.PUT('a'); ELSIF v IS NULL THEN NULL; ELSE DBMS_OUTPUT.PUT('b'); END IF;\n"
        "  DBMS_OUTPUT.NEW_LINE;\n"
        "EXCEPTION\n  WHEN NO_DATA_FOUND OR TOO_MANY_ROWS THEN NULL;\n"
        "  WHEN OTHERS THEN RAISE_APPLICATION_ERROR(-20001, 'bad: ' || SQLERRM);\nEND;"
    )
    assert code.startswith(
        "DO $plsql$\n#variable_conflict use_column\nDECLARE\n  plsql_put_buffer text := '';\n  r record;"
    )
    for fragment in (
        "c CURSOR (p numeric) FOR SELECT a FROM s.t WHERE b = p;",
        "v s.t.a%TYPE;",
        "n integer := 0;",
        "s varchar(10) := 'x';",
        "FOR r IN SELECT a, b FROM s.t ORDER BY a LOOP",
        "RAISE NOTICE '%', COALESCE(CAST((CONCAT(r.a, ',', r.b)) AS TEXT), '');",
        "FOR i IN REVERSE 3..1 LOOP",
        "FOR r2 IN c(1) LOOP",
        "EXIT WHEN r2.a IS NULL;",
        "SELECT MAX(a) FROM s.t INTO STRICT v;",
        "ELSIF v IS NULL THEN",
        "RAISE NOTICE '%', plsql_put_buffer; plsql_put_buffer := '';",
        "WHEN no_data_found OR too_many_rows THEN",
        "RAISE EXCEPTION USING MESSAGE = CONCAT('bad: ', sqlerrm), ERRCODE = 'P0001';",
    ):
        assert fragment in code, fragment
    assert code.endswith("END;\n$plsql$;")


@pytest.mark.parametrize(
    ("block", "why"),
    [
        ("BEGIN INSERT INTO t VALUES (1); END;", "DML"),
        ("BEGIN EXECUTE IMMEDIATE 'x'; END;", "dynamic SQL"),
        ("DECLARE e EXCEPTION; BEGIN RAISE e; END;", "user-defined exception"),
        ("DECLARE TYPE t IS TABLE OF NUMBER; BEGIN NULL; END;", "local TYPE"),
        ("BEGIN my_proc(1); END;", "a call to my_proc"),
        ("BEGIN DBMS_OUTPUT.PUT_LINE(SQL%ROWCOUNT); END;", "attribute"),
        ("BEGIN SELECT a BULK COLLECT INTO v FROM t; END;", "BULK COLLECT"),
    ],
)
def test_translation_refuses_with_the_construct_named(block: str, why: str) -> None:
    with pytest.raises(TranslateError, match=why):
        translate_block(block)


def test_every_sample_reference_translates(plsqlbench_sample: Path) -> None:
    rows = release.read_jsonl(plsqlbench_sample / release.SPIDER1)
    translated = {rec.data["instance_id"]: translate_reference(rec.data["reference_answer"]) for rec in rows}
    assert len(translated) == 22
    assert all(
        code.count("DO $plsql$") == 1 and "DBMS_OUTPUT" not in code.upper() for code in translated.values()
    )


def test_reference_scripts_drop_sqlplus_commands() -> None:
    code = translate_reference(
        "SET SERVEROUTPUT ON\nBEGIN DBMS_OUTPUT.PUT_LINE('x'); END;\n/\nSELECT 1 FROM dual;\n"
    )
    assert code == (
        "DO $plsql$\n#variable_conflict use_column\nBEGIN\n  RAISE NOTICE '%', COALESCE(CAST(('x') AS TEXT), '');\n"
        "END;\n$plsql$;\nSELECT 1;\n"
    )
    with pytest.raises(TranslateError, match="CREATE statement"):
        translate_reference("CREATE OR REPLACE PROCEDURE p IS BEGIN NULL; END;\n/")


def test_expression_to_postgres() -> None:
    assert (
        expression_to_postgres("NVL(TO_CHAR(r.ID), 'n/a') || r.\"NAME\"")
        == "CONCAT(COALESCE(CAST(r.id AS TEXT), 'n/a'), r.\"name\")"
    )


# --------------------------------------------------------------------------- prompts
def test_postgres_prompt_restates_the_rules(plsqlbench_sample: Path) -> None:
    question = release.read_jsonl(plsqlbench_sample / release.SPIDER1)[0].data["question"]
    assert natural_question(question) == "How many documents do we have?"
    prompt = postgres_prompt(question)
    assert prompt.startswith("How many documents do we have?\nWrite PL/pgSQL code for PostgreSQL")
    assert "DBMS_OUTPUT" not in prompt and "RAISE NOTICE" in prompt
    for rule in (
        "one output line per result row",
        "YYYY-MM-DD HH24:MI:SS",
        "without surrounding single quotes",
        "separate fields only with commas",
        "NULL field as an empty field",
    ):
        assert rule in prompt


# --------------------------------------------------------------------------- comparators
def test_strict_comparator_rules() -> None:
    assert compare_rows(["1,a", "2,b"], ["b,2", "a,1"], {})[0]  # unordered gold, columns swapped
    assert not compare_rows(["1,a", "2,b"], ["b,2", "a,1"], {"ordered": True})[0]
    assert not compare_rows(["1,a"], ["1, a"], {})[0]  # a space is not a separator
    assert not compare_rows(["x"], ["'x'"], {})[0]  # strings unquoted
    assert compare_rows(["0.5", "3"], [".5", "3.00"], {})[0]  # numbers by value
    assert not compare_rows(["2024-01-02"], ["2024-01-02 00:00:00"], {})[0]  # DATE is YYYY-MM-DD
    assert compare_rows([], [], {})[0] and not compare_rows([], ["x"], {})[0]
    assert compare_rows(["a,b,c"], ["a,b,c"], {"columns": 2})[0]  # a value with a comma: identity only
    assert not compare_rows(["a,b,c"], ["c,a,b"], {"columns": 2})[0]


def test_numbers_compare_exactly_at_any_length_and_exponent() -> None:
    """Past 28 digits the default decimal context rounded (two different numbers compared equal);
    past an exponent of 999999 it overflowed, and the comparison crashed -- an error the run
    counted as the harness's, leaving a wrong answer's task out of the metrics."""
    long_a, long_b = "1" + "0" * 30 + "1", "1" + "0" * 30 + "2"
    assert not compare_rows([long_a], [long_b], {})[0]
    assert compare_rows([long_a], [long_a + ".000"], {})[0]
    for huge in ("1e9999999", "1E+99999999999", "-7e-9999999"):
        ok, why = compare_rows(["20"], [huge], {})
        assert not ok and why
    assert compare_rows(["1e9999999"], ["1e9999999"], {})[0]  # as text, still equal to itself
    assert compare_rows(["20"], ["2e1"], {})[0]  # a canonical spelling of the same value


def test_rows_keep_trailing_null_rows() -> None:
    # A one-column result whose last row is NULL: the empty last line is a row and is required.
    assert not compare_rows(["Alice", ""], ["Alice"], {})[0]
    assert compare_rows(["Alice", ""], ["Alice", ""], {})[0]
    assert compare_rows(["Alice", ""], ["", "Alice"], {})[0]  # unordered: the NULL row anywhere
    # A single NULL row is one row, not none.
    ok, why = compare_rows([""], [], {})
    assert not ok and "expected 1 row(s), got 0" in why
    assert compare_rows([""], [""], {})[0] and not compare_rows([], [""], {})[0]
    # Two columns, both NULL in the last row.
    assert not compare_rows(["1,x", ","], ["1,x"], {"columns": 2})[0]
    assert compare_rows(["1,x", ","], ["1,x", ","], {"columns": 2})[0]


def test_rows_compare_numbers_only_when_both_are_canonical() -> None:
    assert not compare_rows(["007"], ["7"], {})[0]  # a zero-padded code is text
    assert not compare_rows(["7"], ["007"], {})[0]
    assert not compare_rows(["00"], ["0"], {})[0]
    assert not compare_rows(["+5"], ["5"], {})[0]
    assert not compare_rows(["A1,007"], ["7,A1"], {})[0]  # no column order makes them equal
    assert compare_rows(["A1,007"], ["007,A1"], {})[0]
    # Canonical spellings compare by value, as Oracle prints them (TO_CHAR(0.5) is .5).
    assert compare_rows(["0.5", "-0.25", "3"], [".5", "-.25", "3.00"], {})[0]
    assert compare_rows(["0"], ["0.0"], {})[0] and compare_rows(["1e3"], ["1000"], {})[0]


def test_column_orders_are_bounded() -> None:
    assert len(list(column_orders(3))) == 6
    wide = list(column_orders(12))
    assert wide[0] == tuple(range(12)) and len(wide) == len(set(wide)) <= 120


@pytest.mark.parametrize(
    ("expected", "actual", "rules"),
    [
        (["1,a"], ["1, a"], ("whitespace",)),
        (["a"], ["'a'"], ("quotes",)),
        (["a,"], ["a,NULL"], ("null-text",)),
        (["2024-01-02"], ["02-JAN-24"], ("datetime",)),
        (["5"], ["COUNT,5"], ("label",)),
        (["1", "2"], ["ID", "1", "2"], ("header",)),
        (["1", "2"], ["1,2"], ("one-line",)),
        (["1", "2"], ["2, 1"], ("whitespace", "one-line")),
    ],
)
def test_lenient_comparator_names_the_rules(
    expected: list[str], actual: list[str], rules: tuple[str, ...]
) -> None:
    assert compare_rows_lenient(expected, actual, {"columns": len(expected[0].split(","))}) == (True, rules)


def test_lenient_comparator_does_not_forgive_wrong_values() -> None:
    assert compare_rows_lenient(["5"], ["6"], {}) == (False, ())
    assert compare_rows_lenient(["1", "2"], ["1"], {}) == (False, ())
    assert compare_rows_lenient(["5"], ["5"], {}) == (True, ())

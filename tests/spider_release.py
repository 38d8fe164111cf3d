"""A small release directory in the official PLSQLBench layout, written by the tests.

The release's own data for the sample's database is the shared excerpt
``plsqlbench-spider-sample`` (tests/test_spider_release_data.py runs it). This invented copy
covers what that excerpt lacks: foreign keys (children listed first, so load order matters),
rows in ``Documents`` (the release lost them), an empty copy, and the Spider2 files beside it.
It is built in a temporary directory: the sample's task files (copied there at test time,
never into the repository) plus a hand-written Oracle DDL and a handful of invented rows.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

OWNER = "CRE_DOC_TEMPLATE_MGT"

DDL = {
    "REF_TEMPLATE_TYPES": f"""CREATE TABLE {OWNER}.REF_TEMPLATE_TYPES (
    "TEMPLATE_TYPE_CODE" CHAR(15) NOT NULL,
    "TEMPLATE_TYPE_DESCRIPTION" VARCHAR2(255) NOT NULL,
    CONSTRAINT TEST_PK_RTT PRIMARY KEY ("TEMPLATE_TYPE_CODE")
)""",
    "TEMPLATES": f"""CREATE TABLE {OWNER}.TEMPLATES (
    "TEMPLATE_ID" NUMBER NOT NULL,
    "VERSION_NUMBER" NUMBER NOT NULL,
    "TEMPLATE_TYPE_CODE" CHAR(15) NOT NULL,
    "DATE_EFFECTIVE_FROM" DATE,
    "DATE_EFFECTIVE_TO" DATE,
    "TEMPLATE_DETAILS" VARCHAR2(255) NOT NULL,
    CONSTRAINT TEST_PK_T PRIMARY KEY ("TEMPLATE_ID"),
    CONSTRAINT TEST_FK_T FOREIGN KEY ("TEMPLATE_TYPE_CODE") REFERENCES {OWNER}.REF_TEMPLATE_TYPES ("TEMPLATE_TYPE_CODE")
)""",
    "DOCUMENTS": f"""CREATE TABLE {OWNER}.DOCUMENTS (
    "DOCUMENT_ID" NUMBER NOT NULL,
    "TEMPLATE_ID" NUMBER,
    "DOCUMENT_NAME" VARCHAR2(255),
    "DOCUMENT_DESCRIPTION" VARCHAR2(255),
    "OTHER_DETAILS" VARCHAR2(255),
    CONSTRAINT TEST_PK_D PRIMARY KEY ("DOCUMENT_ID"),
    CONSTRAINT TEST_FK_D FOREIGN KEY ("TEMPLATE_ID") REFERENCES {OWNER}.TEMPLATES ("TEMPLATE_ID")
)""",
}

# Invented rows (children listed first on purpose: the loader must order by foreign keys).
ROWS = {
    "DOCUMENTS": [
        "(1, 10, 'Robbin CV', 'y', NULL)",
        "(2, 10, 'Welcome to NY', 'h', NULL)",
        "(3, 11, 'Data base', 'w', NULL)",
        "(4, 12, 'How to read a book', 'w', NULL)",
        "(5, 13, 'Introduction of OS', 'n', '')",
        "(6, 11, 'Customer reviews', 'y', NULL)",
    ],
    "TEMPLATES": [
        "(10, 5, 'PP', DATE '2005-11-12', NULL, 'v')",
        "(11, 9, 'PPT', DATE '2010-09-24', NULL, 'w')",
        "(12, 1, 'BK', NULL, NULL, 'x')",
        "(13, 4, 'PPT', NULL, NULL, 'y')",
        "(14, 2, 'CV', NULL, NULL, 'z')",
        "(15, 7, 'CV', NULL, NULL, 'q')",
    ],
    "REF_TEMPLATE_TYPES": ["('PPT', 'Presentation')", "('CV', 'CV')", "('PP', 'Paper')", "('BK', 'Book')"],
}


def _insert(table: str, rows: list[str]) -> str:
    cols = {
        "DOCUMENTS": '"DOCUMENT_ID", "TEMPLATE_ID", "DOCUMENT_NAME", "DOCUMENT_DESCRIPTION", "OTHER_DETAILS"',
        "TEMPLATES": '"TEMPLATE_ID", "VERSION_NUMBER", "TEMPLATE_TYPE_CODE", "DATE_EFFECTIVE_FROM", '
        '"DATE_EFFECTIVE_TO", "TEMPLATE_DETAILS"',
        "REF_TEMPLATE_TYPES": '"TEMPLATE_TYPE_CODE", "TEMPLATE_TYPE_DESCRIPTION"',
    }[table]
    return f"INSERT /*+ APPEND */ INTO {OWNER}.{table} ({cols}) VALUES {', '.join(rows)}"


def write_release(sample: Path, dest: Path, with_rows: bool = True) -> Path:
    """A release folder at ``dest``: the sample's task files and our own schema for its DB."""
    for rel in (
        "datasets/spider/spider1.jsonl",
        "datasets/spider2_st/spider2_st.jsonl",
        "datasets/spider2_mt/spider2_mt.jsonl",
        "metadata/spider2_st_metadata.jsonl",
        "metadata/spider2_mt_metadata.jsonl",
        "schema/spider2_plsql/snowflake_sqlite/OUTPUT_DDL_dev.jsonl",
    ):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(sample / rel, dest / rel)
    schema = dest / "schema" / "spider"
    schema.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"db_id": OWNER, "table": name, "sql": sql}) for name, sql in DDL.items()]
    (schema / "spider_ddl.jsonl").write_text("\n".join(lines) + "\n")
    tables = {}
    if with_rows:
        for name, rows in ROWS.items():
            tables[name.title()] = {
                "insert_statements": [_insert(name, rows)],
                "source_table": name.title(),
                "source_database": "cre_Doc_Template_Mgt",
                "total_rows": len(rows),
            }
    (schema / "spider_dml.json").write_text(
        json.dumps({"metadata": {"note": "written by tests"}, "tables": tables})
    )
    return dest

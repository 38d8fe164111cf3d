"""The families' per-dialect adapters (docs/redesign.md step 12): ProcArena's
(``procarena/dialects/``), Spider's (``spider/dialects.py``) and the MBPP converter's emitters.

Each family finds its adapter by one lookup that refuses a dialect it has none for in one line;
the Oracle adapters' texts are checked here without an Oracle (the stand-in tests of
test_procarena_oracle.py run the Oracle access through the judge's lookup).
"""

from __future__ import annotations

import pytest

from pytest_plsqlbench.convert.oracle import OracleEmitter
from pytest_plsqlbench.convert.pipeline import emitter_for
from pytest_plsqlbench.convert.postgres import PostgresEmitter
from pytest_plsqlbench.errors import UsageError
from pytest_plsqlbench.procarena import mutate
from pytest_plsqlbench.procarena.dialects import ADAPTERS, adapter_for
from pytest_plsqlbench.procarena.prompt import render
from pytest_plsqlbench.spider.dialects import DIALECTS, dialect_for
from pytest_plsqlbench.spider.schema import Table

ORACLE_GOLD = """CREATE OR REPLACE PROCEDURE bump(p_id NUMBER) IS
BEGIN
  UPDATE t SET n = n + 1 WHERE id = p_id;
END;
/"""
PG_GOLD = """CREATE OR REPLACE PROCEDURE bump(p_id integer)
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE t SET n = n + 1 WHERE id = p_id;
END;
$$;"""


@pytest.mark.parametrize(
    ("lookup", "family"),
    [(adapter_for, "ProcArena has no adapter"), (dialect_for, "the Spider databases have no adapter"),
     (emitter_for, "the MBPP converter has no emitter")],
)
def test_a_dialect_without_an_adapter_is_one_clear_line(lookup, family) -> None:  # noqa: ANN001
    with pytest.raises(UsageError) as info:
        lookup("sqlite")
    message = str(info.value)
    assert message.startswith(family) and "'sqlite'" in message and "postgres" in message and "oracle" in message
    assert "\n" not in message


def test_every_adapter_is_found_under_its_own_name() -> None:
    assert sorted(ADAPTERS) == sorted(DIALECTS) == ["oracle", "postgres"]
    assert all(adapter_for(n).name == n and dialect_for(n).name == n and emitter_for(n).dialect == n for n in ADAPTERS)


def test_procarena_prompt_words_per_dialect() -> None:
    def prompt(dialect: str) -> str:
        return render(dialect=dialect, requirement="r", database="db", procedure="p", signature="p()", description="d")

    assert "for the PostgreSQL (PL/pgSQL) database `db`" in prompt("postgres")
    assert "must fail (RAISE EXCEPTION)." in prompt("postgres")
    assert "for the Oracle (PL/SQL) database `db`" in prompt("oracle")
    assert "must fail (RAISE_APPLICATION_ERROR)." in prompt("oracle")
    assert adapter_for("oracle").row_limit(5) == "FETCH FIRST 5 ROWS ONLY"
    assert adapter_for("postgres").row_limit(5) == "LIMIT 5"
    assert adapter_for("oracle").do_nothing("p(x NUMBER)").endswith("IS\nBEGIN\n  NULL;\nEND;\n/")


def test_procarena_plforge_call_forms_per_dialect() -> None:
    pg, ora = adapter_for("postgres"), adapter_for("oracle")
    blocks, calls = ["BEGIN p(1); END;", "declare x number; begin p(x); end;"], ["call p(1);"]
    assert pg.plforge_call_problem(calls) is None and ora.plforge_call_problem(calls) is None
    assert ora.plforge_call_problem(blocks) is None
    assert "run it with --plsql-dialect=oracle" in str(pg.plforge_call_problem(blocks))
    assert "expected 'BEGIN sp(...); END;' blocks" in str(ora.plforge_call_problem(blocks + calls))


@pytest.mark.parametrize(("dialect", "gold"), [("oracle", ORACLE_GOLD), ("postgres", PG_GOLD)])
def test_mutants_change_the_body_only_in_either_dialect(dialect: str, gold: str) -> None:
    mutants = mutate.generate(gold, dialect)
    assert mutants, "the body's comparison, constant and statement give mutants"
    header = gold.split("BEGIN", 1)[0]
    assert all(m.code.startswith(header) for m in mutants)


def test_spider_oracle_runs_the_release_as_published() -> None:
    ora, pg = dialect_for("oracle"), dialect_for("postgres")
    table = Table("OWNER", "T", 'CREATE TABLE OWNER.T ("ID" NUMBER(10) NOT NULL)', "db", "x")
    assert ora.table_ddl(table, frozenset({"OWNER.T"})) == [table.ddl + ";"]
    assert pg.table_ddl(table, frozenset({"OWNER.T"}))[0].startswith("CREATE TABLE owner.t")
    meta: dict = {}
    assert ora.spider_task("q?", "SELECT 1 FROM dual;", "ref", meta) == ("q?", "SELECT 1 FROM dual", "ref") and meta == {}
    assert ora.schema_name("MIXED_Case") == "MIXED_Case" and pg.schema_name("MIXED_CASE") == "mixed_case"
    assert (ora.translated_to, pg.translated_to) == (None, "PostgreSQL")


def test_convert_emitters_say_how_their_database_stores_values() -> None:
    assert OracleEmitter.storage.bounded_numbers and OracleEmitter.storage.empty_text_is_null
    assert not PostgresEmitter.storage.bounded_numbers and not PostgresEmitter.storage.empty_text_is_null
    assert OracleEmitter.published and not PostgresEmitter.published

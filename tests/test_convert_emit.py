"""Literal, type and script emission of the MBPP converter, both dialects (no database)."""

from __future__ import annotations

import re

import pytest

from pytest_plsqlbench.convert.emitter import EmitCase, Signature
from pytest_plsqlbench.convert.model import Tolerance
from pytest_plsqlbench.convert.names import sql_function_name
from pytest_plsqlbench.convert.oracle import OracleEmitter
from pytest_plsqlbench.convert.postgres import HELPER_KEY, PostgresEmitter, dollar_tag
from pytest_plsqlbench.convert.sqltypes import BOOL, NUMBER, TEXT, ListT, RecordT, with_top_order
from pytest_plsqlbench.scripts import split

ORA = OracleEmitter()
PG = PostgresEmitter()
KV = ListT(RecordT((TEXT, NUMBER), kv=True), "map")


@pytest.mark.parametrize(
    ("value", "t", "oracle", "postgres"),
    [
        ("it's", TEXT, "TO_CLOB('it''s')", "'it''s'"),
        ("", TEXT, "TO_CLOB('')", "''"),
        ("a\nb\\c", TEXT, "TO_CLOB('a\nb\\c')", "'a\nb\\c'"),
        (-3, NUMBER, "-3", "-3"),
        (2.5, NUMBER, "2.5", "2.5"),
        (1e-05, NUMBER, "1e-05", "1e-05"),
        (10**30, NUMBER, str(10**30), str(10**30)),
        (True, NUMBER, "1", "1"),
        (False, BOOL, "0", "false"),
        (True, BOOL, "1", "true"),
        (None, NUMBER, "NULL", "NULL::numeric"),
        (None, ListT(TEXT), "NULL", "NULL::text[]"),
        ([], ListT(NUMBER), "NUMBER_NTT()", "ARRAY[]::numeric[]"),
        ([1, None, -2], ListT(NUMBER), "NUMBER_NTT(1,NULL,-2)", "ARRAY[1, NULL, -2]::numeric[]"),
        (["a", "b"], ListT(TEXT), "CLOB_NTT(TO_CLOB('a'),TO_CLOB('b'))", "ARRAY['a', 'b']::text[]"),
        (
            [[1, 2, 3], [4], []],
            ListT(ListT(NUMBER)),
            "NUMBER_NTT_NTT(NUMBER_NTT(1,2,3),NUMBER_NTT(4),NUMBER_NTT())",
            (
                "ARRAY[ROW(ARRAY[1, 2, 3]::numeric[])::numeric_list, ROW(ARRAY[4]::numeric[])::numeric_list, "
                "ROW(ARRAY[]::numeric[])::numeric_list]::numeric_list[]"
            ),
        ),
        (
            ("Maths", 97),
            RecordT((TEXT, NUMBER)),
            "CLOB_NUMBER_OBJ2(TO_CLOB('Maths'),97)",
            "ROW('Maths', 97)::text_numeric_rec2",
        ),
        (
            {"a": 1, "b": None},
            KV,
            "CLOB_NUMBER_KV_NTT(CLOB_NUMBER_KV(TO_CLOB('a'),1),CLOB_NUMBER_KV(TO_CLOB('b'),NULL))",
            "ARRAY[ROW('a', 1)::text_numeric_kv, ROW('b', NULL::numeric)::text_numeric_kv]::text_numeric_kv[]",
        ),
        ({3, 1, 2}, ListT(NUMBER, "set"), "NUMBER_NTT(1,2,3)", "ARRAY[1, 2, 3]::numeric[]"),
    ],
)
def test_literals(value, t, oracle, postgres):
    assert ORA.literal(value, t) == oracle
    assert PG.literal(value, t) == postgres


def test_long_strings_are_split_into_clob_pieces_in_oracle():
    text = "x" * 9000
    lit = ORA.literal(text, TEXT)
    assert lit.count("TO_CLOB(") == 3
    assert lit.replace("TO_CLOB('", "").replace("')", "").replace(" || ", "") == text


def test_type_ddl_lists_dependencies_first_with_shared_fixture_keys():
    t = ListT(ListT(ListT(NUMBER)))
    ora = ORA.type_defs(t)
    assert [d.prompt_ddl for d in ora] == [
        "CREATE TYPE NUMBER_NTT AS TABLE OF NUMBER;",
        "CREATE TYPE NUMBER_NTT_NTT AS TABLE OF NUMBER_NTT;",
        "CREATE TYPE NUMBER_NTT_NTT_NTT AS TABLE OF NUMBER_NTT_NTT;",
    ]
    assert [d.fixture.key for d in ora] == [
        "mbpp-type:oracle:number_ntt",
        "mbpp-type:oracle:number_ntt_ntt",
        "mbpp-type:oracle:number_ntt_ntt_ntt",
    ]
    assert all(d.fixture.script.rstrip().endswith("\n/") for d in ora)  # SQL*Plus terminator
    pg = PG.type_defs(t)
    assert [d.prompt_ddl for d in pg] == [
        "CREATE TYPE numeric_list AS (items numeric[]);",
        "CREATE TYPE numeric_list_list AS (items numeric_list[]);",
    ]
    assert PG.type_sql(t) == "numeric_list_list[]"
    assert [d.fixture.key for d in pg] == [
        "mbpp-type:postgres:numeric_list",
        "mbpp-type:postgres:numeric_list_list",
    ]
    # The same structure elsewhere gives the same DDL under the same key.
    again = PG.type_defs(ListT(ListT(NUMBER)))
    assert again[0].fixture == pg[0].fixture


def test_records_and_dicts_have_named_types_in_both_dialects():
    assert [d.prompt_ddl for d in ORA.type_defs(KV)] == [
        "CREATE TYPE CLOB_NUMBER_KV AS OBJECT (K CLOB, V NUMBER);",
        "CREATE TYPE CLOB_NUMBER_KV_NTT AS TABLE OF CLOB_NUMBER_KV;",
    ]
    assert [d.prompt_ddl for d in PG.type_defs(KV)] == ["CREATE TYPE text_numeric_kv AS (k text, v numeric);"]
    rec = RecordT((NUMBER, ListT(NUMBER), TEXT))
    assert ORA.type_sql(rec) == "NUMBER_NUMBER_NTT_CLOB_OBJ3"
    assert (
        PG.type_defs(rec)[-1].prompt_ddl
        == "CREATE TYPE numeric_numeric_list_text_rec3 AS (f1 numeric, f2 numeric[], f3 text);"
    )


def test_overlong_type_names_are_hashed_stably():
    deep = RecordT((RecordT((TEXT, TEXT, TEXT)), RecordT((TEXT, NUMBER, TEXT)), ListT(TEXT)))
    name = ORA.type_sql(deep)
    assert re.fullmatch(r"MBPP_T_[0-9A-F]{10}", name)
    assert name == OracleEmitter().type_sql(deep)
    assert len(name) <= 30


def test_reserved_and_builtin_entry_points_are_renamed():
    assert sql_function_name("check") == "check_fn"
    assert sql_function_name("convert") == "convert_fn"
    assert sql_function_name("similar_elements") == "similar_elements"
    with pytest.raises(ValueError):
        sql_function_name("not valid")


# --------------------------------------------------------------------------- test scripts
SIG = Signature("f", (ListT(NUMBER),), NUMBER)


def test_oracle_null_safe_block_treats_null_as_a_value():
    script = ORA.test_script(SIG, EmitCase("case-1", ([1, 2],), 3), "null-safe")
    assert script.rstrip().endswith("END;\n/")
    assert "IF a IS NULL OR b IS NULL THEN" in script
    assert "RETURN a IS NULL AND b IS NULL;" in script
    assert "IF NOT eq_number(a, b) THEN" in script
    assert "a != b" not in script
    assert "  v_actual := f(NUMBER_NTT(1,2));" in script
    assert "  assert_eq(v_actual, 3, 'case_1 failed');" in script
    stmts = split(script, "oracle")
    assert [s.kind for s in stmts] == ["plsql"]


def test_oracle_published_block_is_the_published_style():
    script = ORA.test_script(SIG, EmitCase("case-1", ([1, 2],), 3), "published")
    assert "    IF a != b THEN" in script
    assert "eq_number" not in script


def test_oracle_compares_lists_in_order_unless_told_sets():
    sig = Signature("f", (NUMBER,), ListT(NUMBER))
    ordered = ORA.test_script(sig, EmitCase("case-1", (1,), [1, 2]), "null-safe")
    assert "eq_number_ntt(a, b)" in ordered and "in_number_ntt" not in ordered
    as_set = ORA.test_script(
        sig, EmitCase("case-1", (1,), [1, 2], compare=with_top_order(sig.returns, "set")), "null-safe"
    )
    assert "eq_number_ntt_s(a, b)" in as_set and "in_number_ntt_s(b, a(i))" in as_set


def test_tolerances_appear_in_both_dialects():
    sig = Signature("f", (NUMBER,), NUMBER)
    case = EmitCase("base-001", (2,), 4.0, tolerance=Tolerance(1e-6, 1e-7))
    assert "ABS(a - b) <= 0.000001 + 0.0000001 * ABS(b)" in ORA.test_script(sig, case, "null-safe")
    pg = PG.test_script(sig, case, "null-safe")
    assert "public.mbpp_same(to_jsonb(v_actual), to_jsonb(4.0)" in pg
    assert '"atol": "0.000001"' in pg
    assert HELPER_KEY in [f.key for f in PG.fixtures(sig, [case], "null-safe")]
    exact = EmitCase("base-001", (2,), 4)
    assert HELPER_KEY not in [f.key for f in PG.fixtures(sig, [exact], "null-safe")]


def test_postgres_scripts_are_null_safe_by_default_and_split_cleanly():
    script = PG.test_script(SIG, EmitCase("case-1", ([1, 2],), 3), "null-safe")
    assert "IF v_actual IS DISTINCT FROM 3 THEN" in script
    published = PG.test_script(SIG, EmitCase("case-1", ([1, 2],), 3), "published")
    assert "IF v_actual <> 3 THEN" in published
    assert len(split(script, "postgres")) == 1
    replay = PG.replay(SIG, [EmitCase("case-1", ([1, 2],), 3), EmitCase("case-2", (None,), None)])
    assert "IF p1 IS NOT DISTINCT FROM ARRAY[1, 2]::numeric[] THEN" in replay
    assert "IF p1 IS NOT DISTINCT FROM NULL::numeric[] THEN" in replay
    assert len(split(replay, "postgres")) == 1


def test_alternative_outputs_are_accepted():
    sig = Signature("sum_div", (NUMBER,), NUMBER)
    case = EmitCase("plus-001", (8,), 7, alternatives=(0,))
    assert "NOT ((v_actual IS NOT DISTINCT FROM 7) OR (v_actual IS NOT DISTINCT FROM 0))" in PG.test_script(
        sig, case, "null-safe"
    )
    assert "IF NOT (eq_number(v_actual, 7) OR eq_number(v_actual, 0)) THEN" in ORA.test_script(
        sig, case, "null-safe"
    )


def test_dollar_quotes_avoid_the_body():
    assert dollar_tag("no tags here") == "$mbpp$"
    assert dollar_tag("has $mbpp$ inside") == "$mbpp1$"
    script = PG.test_script(Signature("f", (TEXT,), TEXT), EmitCase("case-1", ("$mbpp$",), "x"), "null-safe")
    assert script.startswith("DO $mbpp1$")
    assert len(split(script, "postgres")) == 1


def test_oracle_replay_terminates_with_a_slash_and_returns_null_otherwise():
    replay = ORA.replay(SIG, [EmitCase("case-1", ([1, 2],), 3)])
    assert replay.startswith("CREATE OR REPLACE FUNCTION f(\n  p1 IN NUMBER_NTT\n) RETURN NUMBER\nAS\n")
    assert "  IF eq_number_ntt(p1, NUMBER_NTT(1,2)) THEN\n    RETURN 3;\n  END IF;" in replay
    assert replay.rstrip().endswith("RETURN NULL;\nEND;\n/")
    assert [s.kind for s in split(replay, "oracle")] == ["plsql"]


def test_prompts_share_the_published_layout():
    prompt_py = '\n\ndef f(xs):\n    """\n    Sum.\n    """\n'
    ora = ORA.prompt(SIG, prompt_py)
    pg = PG.prompt(SIG, prompt_py)
    for prompt in (ora, pg):
        assert "Requirements:\n- Use only the given argument names and types\n" in prompt
        assert "  -- LLM-generated body\n" in prompt
        assert "  /*\n" + prompt_py + "\n  */\n" in prompt
    assert ora.startswith("Complete the following Oracle PL/SQL function.")
    assert "CREATE OR REPLACE FUNCTION f(\n  p1 IN NUMBER_NTT\n) RETURN NUMBER\nAS\n" in ora
    assert pg.startswith("Complete the following PostgreSQL PL/pgSQL function.")
    assert "CREATE OR REPLACE FUNCTION f(\n  p1 numeric[]\n) RETURNS numeric\nLANGUAGE plpgsql\nAS $$\n" in pg
    assert pg.rstrip().endswith("END;\n$$;")
    assert "/*\n*/" not in ORA.prompt(Signature("g", (ListT(NUMBER),), NUMBER), "x")  # DDL shown
    assert "*/" not in ORA.prompt(SIG, "a */ b").split("  /*\n", 1)[1].split("\n  */", 1)[0]

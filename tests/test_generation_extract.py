"""Code extraction from realistic replies: which fenced blocks are code, and when bare code wins."""

from __future__ import annotations

import pytest

from pytest_plsqlbench.generation.extract import extract_code

ORACLE = """CREATE OR REPLACE FUNCTION count_vowels(p_text VARCHAR2) RETURN NUMBER IS
  v_count NUMBER := 0;
BEGIN
  FOR i IN 1 .. NVL(LENGTH(p_text), 0) LOOP
    IF INSTR('aeiouAEIOU', SUBSTR(p_text, i, 1)) > 0 THEN
      v_count := v_count + 1;
    END IF;
  END LOOP;
  RETURN v_count;
END;
/"""

POSTGRES = """CREATE OR REPLACE FUNCTION count_vowels(p_text text) RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
  RETURN length(p_text) - length(regexp_replace(p_text, '[aeiouAEIOU]', '', 'g'));
END;
$$;"""


HELPER = "CREATE OR REPLACE FUNCTION is_vowel(p_c VARCHAR2) RETURN NUMBER IS\nBEGIN\n  RETURN CASE WHEN INSTR('aeiouAEIOU', p_c) > 0 THEN 1 ELSE 0 END;\nEND;\n/"
PG_HELPER = "CREATE OR REPLACE FUNCTION is_vowel(p_c text) RETURNS integer\nLANGUAGE sql AS $$ SELECT CASE WHEN p_c ~ '[aeiouAEIOU]' THEN 1 ELSE 0 END $$;"
#: A long non-SQL block, so that taking the longest block would take it.
TRANSCRIPT = "```text\n" + "\n".join(f"count_vowels('{w}') = {n}" for w, n in [("banana", 3)] * 40) + "\n```\n"


@pytest.mark.parametrize("tag", ["pl/sql", "PL/SQL", "plsql", "oracle-plsql"])
def test_pl_sql_fences_are_sql(tag: str) -> None:
    reply = (
        "First a helper:\n\n"
        f"```{tag}\n{HELPER}\n```\n\nThen the function:\n\n```{tag}\n{ORACLE}\n```\n\n"
        f"A sample run:\n\n{TRANSCRIPT}"
    )
    assert extract_code(reply, "oracle") == f"{HELPER}\n\n{ORACLE}"


@pytest.mark.parametrize("tag", ["pl/pgsql", "PL/pgSQL", "plpgsql", "pl-pgsql"])
def test_pl_pgsql_fences_are_sql(tag: str) -> None:
    reply = (
        "A helper first:\n\n"
        f"```{tag}\n{PG_HELPER}\n```\n\nThen the function:\n\n```{tag}\n{POSTGRES}\n```\n\n"
        f"A sample run:\n\n{TRANSCRIPT}"
    )
    assert extract_code(reply, "postgres") == f"{PG_HELPER}\n\n{POSTGRES}"


def test_an_untagged_example_output_block_is_not_joined_to_the_code() -> None:
    reply = (
        f"```sql\n{ORACLE}\n```\n\n"
        "Example output:\n\n```\nSQL> SELECT count_vowels('banana') FROM dual;\n\nCOUNT_VOWELS('BANANA')\n"
        "----------------------\n                     3\n```"
    )
    assert extract_code(reply, "oracle") == ORACLE


def test_untagged_code_blocks_are_still_joined() -> None:
    spec = "CREATE OR REPLACE PACKAGE shop_api IS\n  FUNCTION total(p_id NUMBER) RETURN NUMBER;\nEND shop_api;\n/"
    body = (
        "CREATE OR REPLACE PACKAGE BODY shop_api IS\n  FUNCTION total(p_id NUMBER) RETURN NUMBER IS\n"
        "  BEGIN\n    RETURN 0;\n  END;\nEND shop_api;\n/"
    )
    reply = f"The spec:\n\n```\n{spec}\n```\n\nThe body:\n\n```\n{body}\n```\n\nOutput:\n\n```\n0\n```"
    assert extract_code(reply, "oracle") == f"{spec}\n\n{body}"


def test_bare_code_wins_over_a_fenced_usage_example() -> None:
    reply = (
        f"{ORACLE}\n\n"
        "You can test it like this:\n\n"
        "```sql\nSET SERVEROUTPUT ON\nBEGIN\n  DBMS_OUTPUT.PUT_LINE(count_vowels('banana'));\nEND;\n/\n```\n"
    )
    assert extract_code(reply, "oracle") == ORACLE


def test_bare_code_after_prose_wins_over_a_fenced_usage_example_postgres() -> None:
    reply = (
        f"Here is the function:\n\n{POSTGRES}\n\n"
        "Usage:\n\n```sql\nSELECT count_vowels('banana');  -- 3\n```"
    )
    assert extract_code(reply, "postgres") == POSTGRES


def test_a_reply_without_a_sql_block_never_yields_a_non_sql_block() -> None:
    reply = (
        "In Python this would be:\n\n"
        "```python\ndef count_vowels(text):\n    return sum(c in 'aeiouAEIOU' for c in text)\n```\n\n"
        "I cannot write the PL/SQL version without more details."
    )
    code = extract_code(reply, "oracle")
    assert "def count_vowels" not in code and "return sum" not in code
    # Only an untagged non-code block: it is ignored too.
    assert extract_code("The result is:\n\n```\n3\n```", "oracle") == "The result is:"


def test_no_sql_block_but_bare_code_after_a_python_block_keeps_the_code() -> None:
    reply = (
        "A Python sketch first:\n\n```python\nprint(sum(c in 'aeiou' for c in 'banana'))\n```\n\n"
        f"And the PL/SQL:\n\n{ORACLE}\n"
    )
    assert extract_code(reply, "oracle") == ORACLE

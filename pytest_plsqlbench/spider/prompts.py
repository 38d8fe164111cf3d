"""Spider-PLSQL task prompts for PostgreSQL: the paper's output rules restated for PL/pgSQL.

The published Spider questions end with "Write PL/SQL code that answers this query." and the
output rules of the paper's Figure 2 (DBMS_OUTPUT.PUT_LINE, one line per row, commas ...).
For the postgres dialect the question is kept and the rules are restated with RAISE NOTICE
as the output channel. One rule is added: Oracle's ``||`` turns NULL into nothing, so a
PL/SQL answer prints NULL as an empty field without trying; in PL/pgSQL ``RAISE NOTICE``
prints ``<NULL>`` unless told otherwise, and the gold rows print NULL as an empty field.
"""

from __future__ import annotations

import re

ORACLE_MARKER = re.compile(r"\n\s*Write PL/SQL code that answers this query\.?", re.I)

POSTGRES_INSTRUCTION = (
    "Write PL/pgSQL code for PostgreSQL that answers this query: one anonymous block (DO $$ ... $$;)."
)

POSTGRES_RULES = """\
Output requirements:
- Produce result rows only with RAISE NOTICE '%', <line>; do not use RETURN, OUT parameters, refcursors, \
RETURN QUERY, RETURN NEXT, SELECT output, table writes, or any other output channel as the final answer.
- Print no headers, labels, trailers, summaries, or explanatory text.
- Print exactly one output line per result row.
- For multi-column rows, separate fields only with commas; do not use spaces, tabs, pipes, semicolons, \
or JSON/list formatting as delimiters.
- For single-column rows, print only the value.
- Format DATE values as YYYY-MM-DD.
- Format TIMESTAMP values as YYYY-MM-DD HH24:MI:SS.
- Print string field values exactly as text without surrounding single quotes or double quotes.
- Print a NULL field as an empty field (RAISE NOTICE would otherwise print <NULL>)."""


def natural_question(question: str) -> str:
    """The Spider question without the Oracle instruction and rules appended to it."""
    m = ORACLE_MARKER.search(question)
    if m is not None:
        return question[: m.start()].strip()
    cut = question.find("Output requirements:")
    return (question[:cut] if cut >= 0 else question).strip()


def postgres_prompt(question: str) -> str:
    """The PL/pgSQL version of a published Spider-PLSQL prompt."""
    return f"{natural_question(question)}\n{POSTGRES_INSTRUCTION}\n\n{POSTGRES_RULES}\n"

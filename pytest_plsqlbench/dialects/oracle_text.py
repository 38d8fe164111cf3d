"""How SQL*Plus reads an Oracle script, and what the safety check knows of Oracle's namespaces.

A module of its own, not ``dialects/oracle/``: importing anything in that package runs its
``__init__``, which imports the session and so the splitter that asks for these rules.
"""

from __future__ import annotations

from ..lexicon import Lexicon, SafetyRules, StatementKind

SQLPLUS_COMMANDS = frozenset(
    """SET SHOW SHO PROMPT PRO SPOOL SPO WHENEVER DEFINE DEF UNDEFINE COLUMN COL TTITLE BTITLE
    REM REMARK CLEAR BREAK COMPUTE PAUSE ACCEPT VARIABLE VAR PRINT CONNECT CONN DISCONNECT EXIT
    QUIT HOST START DESCRIBE DESC TIMING SQLBLANKLINES""".split()
)
#: ``SET`` words that begin SQL, not SQL*Plus settings.
SQL_SET_WORDS = frozenset({"TRANSACTION", "ROLE", "CONSTRAINT", "CONSTRAINTS"})
PLSQL_CREATE_OBJECTS = frozenset({"FUNCTION", "PROCEDURE", "PACKAGE", "TYPE", "TRIGGER", "LIBRARY", "JAVA"})
CREATE_MODIFIERS = frozenset(
    {"OR", "REPLACE", "EDITIONABLE", "NONEDITIONABLE", "EDITIONING", "FORCE", "NOFORCE", "AND", "COMPILE",
     "RESOLVE"}
)


def classify_sqlplus(words: list[str]) -> tuple[StatementKind, str | None]:
    """SQL*Plus's reading of a statement from its first words: a PL/SQL unit (``DECLARE``/``BEGIN``,
    ``CREATE [OR REPLACE] FUNCTION|PROCEDURE|PACKAGE ...``, ``WITH FUNCTION``) ends only at a ``/``
    line; ``EXEC call`` is a unit of its own; ``SET``/``PROMPT``/``@file`` ... are client commands."""
    if not words:
        return "sql", None
    head = words[0]
    if head.startswith("@"):
        return "client", "@"
    if head in ("EXEC", "EXECUTE"):
        return "plsql", "EXEC"
    if head in ("DECLARE", "BEGIN"):
        return "plsql", None
    if head == "WITH" and len(words) > 1 and words[1] in ("FUNCTION", "PROCEDURE"):
        return "plsql", None  # SQL with inline PL/SQL: ``;`` inside, ends at ``/``
    if head == "SET" and len(words) > 1 and words[1] in SQL_SET_WORDS:
        return "sql", None
    if head in SQLPLUS_COMMANDS:
        return "client", head
    if head == "CREATE":
        for word in words[1:]:
            if word in CREATE_MODIFIERS:
                continue
            return ("plsql" if word in PLSQL_CREATE_OBJECTS else "sql"), None
    return "sql", None


#: python-oracledb refuses a trailing ``;`` on SQL; no psql meta-commands; a schema is a user.
ORACLE_LEXICON = Lexicon(
    q_quotes=True,
    classify=classify_sqlplus,
    slash_terminator=True,
    strip_semicolon=True,
    fence_names=frozenset({"plsql", "pl-sql", "pl/sql", "pls", "oracle", "oraclesql", "sqlplus"}),
)
ORACLE_SAFETY = SafetyRules()

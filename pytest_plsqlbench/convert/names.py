"""SQL names for Python entry points.

A Python function name becomes the SQL function name unchanged, except where either
database would refuse it or resolve a call to something else: reserved words (``check``
is reserved in both) and names of built-in functions that win name resolution over a user
function with the same arguments (PostgreSQL searches ``pg_catalog`` first). Those get an
``_fn`` suffix, the same in both dialects, recorded in the task metadata.
"""

from __future__ import annotations

import re

# PostgreSQL keywords that cannot name a function (pg_get_keywords() catcode R/C), and
# Oracle SQL and PL/SQL reserved words (V$RESERVED_WORDS reserved = 'Y' plus PL/SQL's list).
_RESERVED = frozenset(
    """
    all analyse analyze and any array as asc asymmetric both case cast check collate column
    constraint create current_catalog current_date current_role current_time current_timestamp
    current_user default deferrable desc distinct do else end except false fetch for foreign
    from grant group having in initially intersect into lateral leading limit localtime
    localtimestamp not null offset on only or order placing primary references returning select
    session_user some symmetric table then to trailing true union unique user using variadic
    when where window with between bigint bit boolean char character coalesce dec decimal exists
    extract float greatest grouping inout int integer interval json least national nchar none
    normalize nullif numeric out overlay position precision real row setof smallint substring
    time timestamp treat trim values varchar xmlattributes xmlconcat xmlelement xmlexists
    xmlforest xmlnamespaces xmlparse xmlpi xmlroot xmlserialize xmltable access add alter audit
    by cluster comment compress connect current date delete drop exclusive file identified
    immediate increment index initial insert is level like lock long maxextents minus mlslabel
    mode modify noaudit nocompress nowait number of offline online option pctfree prior public
    raw rename resource revoke rowid rownum rows session set share size start successful synonym
    sysdate trigger uid update validate varchar2 view whenever at begin clusters colauth columns
    crash cursor declare exception function goto if indexes overlaps procedure sql subtype
    tabauth type views
    """.split()  # noqa: SIM905 - a word list reads better as text
)

# Common built-in function names: PostgreSQL searches pg_catalog before the answer's schema
# and Oracle's SQL functions shadow schema functions of the same name (``convert`` collides
# in MBPP); replay validation reveals any new collision, which then belongs here.
_BUILTINS = frozenset(
    """
    abs ascii ceil chr concat convert cos count decode exp floor initcap instr length ln log
    lower lpad ltrim max min mod nvl power replace reverse round rpad rtrim sign sin sqrt substr
    sum tan translate trunc upper
    """.split()  # noqa: SIM905 - a word list reads better as text
)

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def sql_function_name(python_name: str) -> str:
    """The SQL name of a Python entry point (``check`` -> ``check_fn``)."""
    if not _IDENT.match(python_name):
        raise ValueError(f"{python_name!r} is not a plain identifier")
    if python_name.lower() in _RESERVED or python_name.lower() in _BUILTINS:
        return f"{python_name}_fn"
    return python_name

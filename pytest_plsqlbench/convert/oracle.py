"""Oracle PL/SQL emitter, following the published MBPP-PLSQL conventions.

Types (as in the published records): numbers and booleans are ``NUMBER`` (``1``/``0``),
strings are ``CLOB`` written ``TO_CLOB('...')``, homogeneous lists/tuples/sets are nested
tables ``<ELEM>_NTT`` (``NUMBER_NTT``, ``CLOB_NTT``, ``NUMBER_NTT_NTT``; ragged nesting is
natural for nested tables). Our extensions for shapes the published converter rejected:
mixed-type tuples are object types ``<F1>_<F2>_OBJ<n>`` with attributes ``F1..Fn``; dicts are
``<K>_<V>_KV_NTT`` nested tables of ``<K>_<V>_KV`` objects (``K``, ``V``). Names longer than
30 characters become ``MBPP_T_<hash>``.

Test blocks keep the published layout (``v_actual``, a local ``assert_eq`` procedure,
``'case_N failed'``). In ``published`` mode ``assert_eq`` is the published ``IF a != b``,
under which a function returning NULL passes, and nested tables compare as multisets
(Oracle's ``!=`` ignores order). In ``null-safe`` mode ``assert_eq`` calls generated local
functions that treat NULL as a value (NULL equals only NULL; ``''`` is NULL in Oracle),
compare collections in order (Python semantics), as sets where the task says so, and
numbers within the case's tolerance.

A failing case's message also carries the value the function returned, written as an Oracle
literal like the expected one (``NUMBER_NTT(85,75)``, ``TO_CLOB('heo')``), after
:data:`~pytest_plsqlbench.outputs.RETURNED_MARK`: local procedures (:class:`_Show`) write it
only once the comparison has failed, and any error they meet leaves the message as it was, so
what passes and what fails is the comparison's alone. :func:`show_published` adds the same to
a published block (its ``assert_eq`` message; the calls and comparisons stay as published).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..outputs import RETURNED_MARK
from ..tasks import Fixture
from .emitter import (
    EmitCase,
    Emitter,
    Signature,
    TypeDef,
    format_number,
    format_plain,
    order_code,
    shorten,
)
from .model import Tolerance
from .sqltypes import ListT, RecordT, Scalar, SqlType, Storage, items_of

NAME_LIMIT = 30
#: Characters per TO_CLOB('...') piece (PL/SQL string literals are limited to 32K bytes).
CHUNK = 4000
#: Characters of a returned value a failing case's message shows, and the bytes they may take
#: (RAISE_APPLICATION_ERROR keeps 2,048 bytes of a message).
SHOWN_CHARS = 1000
SHOWN_BYTES = 1800
#: The local function that writes a returned value for a failing case's message.
SHOWN = "plsqlbench_shown"
_PUT = "plsqlbench_put"


def _name(t: SqlType) -> str:
    if isinstance(t, Scalar):
        return "CLOB" if t.kind == "text" else "NUMBER"
    if isinstance(t, ListT):
        return shorten(f"{_name(t.elem)}_NTT", NAME_LIMIT, "MBPP_T_").upper()
    if isinstance(t, RecordT):
        names = "_".join(_name(f) for f in t.fields)
        raw = f"{names}_KV" if t.kv else f"{names}_OBJ{len(t.fields)}"
        return shorten(raw, NAME_LIMIT, "MBPP_T_").upper()
    raise TypeError(f"unresolved type {t}")


def _field_names(t: RecordT) -> list[str]:
    return ["K", "V"] if t.kv else [f"F{i}" for i in range(1, len(t.fields) + 1)]


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _native(t: SqlType) -> bool:
    """Types the published blocks compare with plain ``!=`` (scalars and nested tables of them)."""
    if isinstance(t, Scalar):
        return True
    return isinstance(t, ListT) and not isinstance(t.elem, RecordT) and _native(t.elem)


class _Helpers:
    """Local comparison functions for one block, dependencies first."""

    def __init__(self, tol: Tolerance) -> None:
        self.tol = tol
        self.defs: dict[str, list[str]] = {}

    def eq(self, t: SqlType) -> str:
        name = f"eq_{_name(t).lower()}{order_code(t)}"
        if len(name) > NAME_LIMIT:
            name = shorten(name, NAME_LIMIT, "eq_")
        if name in self.defs:
            return name
        tn = _name(t)
        head = [f"  FUNCTION {name}(a {tn}, b {tn}) RETURN BOOLEAN IS"]
        null = ["    IF a IS NULL OR b IS NULL THEN", "      RETURN a IS NULL AND b IS NULL;", "    END IF;"]
        if isinstance(t, Scalar) and t.kind == "text":
            body = [
                *head,
                "  BEGIN",
                "    IF NVL(DBMS_LOB.GETLENGTH(a), 0) = 0 OR NVL(DBMS_LOB.GETLENGTH(b), 0) = 0 THEN",
                "      RETURN NVL(DBMS_LOB.GETLENGTH(a), 0) = 0 AND NVL(DBMS_LOB.GETLENGTH(b), 0) = 0;",
                "    END IF;",
                "    RETURN DBMS_LOB.COMPARE(a, b) = 0;",
                "  END;",
            ]
        elif isinstance(t, Scalar):
            body = [*head, "  BEGIN", *null, f"    RETURN {self._number_test()};", "  END;"]
        elif isinstance(t, RecordT):
            parts = [f"{self.eq(f)}(a.{n}, b.{n})" for f, n in zip(t.fields, _field_names(t))]
            body = [*head, "  BEGIN", *null, "    RETURN " + "\n      AND ".join(parts) + ";", "  END;"]
        else:
            assert isinstance(t, ListT)
            inner = self.eq(t.elem)
            if t.order == "list":
                body = [
                    *head,
                    "    i PLS_INTEGER;",
                    "    j PLS_INTEGER;",
                    "  BEGIN",
                    *null,
                    "    IF a.COUNT != b.COUNT THEN",
                    "      RETURN FALSE;",
                    "    END IF;",
                    "    i := a.FIRST;",
                    "    j := b.FIRST;",
                    "    WHILE i IS NOT NULL LOOP",
                    f"      IF NOT {inner}(a(i), b(j)) THEN",
                    "        RETURN FALSE;",
                    "      END IF;",
                    "      i := a.NEXT(i);",
                    "      j := b.NEXT(j);",
                    "    END LOOP;",
                    "    RETURN TRUE;",
                    "  END;",
                ]
            else:
                member = "in" + name[2:]
                self.defs[member] = [
                    f"  FUNCTION {member}(c {tn}, x {_name(t.elem)}) RETURN BOOLEAN IS",
                    "    i PLS_INTEGER := c.FIRST;",
                    "  BEGIN",
                    "    WHILE i IS NOT NULL LOOP",
                    f"      IF {inner}(c(i), x) THEN",
                    "        RETURN TRUE;",
                    "      END IF;",
                    "      i := c.NEXT(i);",
                    "    END LOOP;",
                    "    RETURN FALSE;",
                    "  END;",
                ]
                count = (
                    ["    IF a.COUNT != b.COUNT THEN", "      RETURN FALSE;", "    END IF;"]
                    if t.order == "map"
                    else []
                )
                loops = []
                for this, other in (("a", "b"), ("b", "a")):
                    loops += [
                        f"    i := {this}.FIRST;",
                        "    WHILE i IS NOT NULL LOOP",
                        f"      IF NOT {member}({other}, {this}(i)) THEN",
                        "        RETURN FALSE;",
                        "      END IF;",
                        f"      i := {this}.NEXT(i);",
                        "    END LOOP;",
                    ]
                body = [
                    *head,
                    "    i PLS_INTEGER;",
                    "  BEGIN",
                    *null,
                    *count,
                    *loops,
                    "    RETURN TRUE;",
                    "  END;",
                ]
        self.defs[name] = body
        return name

    def _number_test(self) -> str:
        tol = self.tol
        if tol.exact:
            return "a = b"
        atol, rtol = format_plain(tol.atol), format_plain(tol.rtol)
        if tol.kind == "isclose":
            return f"a = b OR ABS(a - b) <= GREATEST({rtol} * GREATEST(ABS(a), ABS(b)), {atol})"
        return f"a = b OR ABS(a - b) <= {atol} + {rtol} * ABS(b)"

    def lines(self) -> list[str]:
        return [line for body in self.defs.values() for line in body]


class _Show:
    """Local procedures writing a value as an Oracle literal, dependencies first.

    Each appends to a bounded text ``s`` (:data:`SHOWN_CHARS`) and counts in ``n`` every
    character the whole value takes, so the message can say how much was left out. The names
    start with ``plsqlbench_`` so that no entry point an answer defines is shadowed by them.
    """

    def __init__(self) -> None:
        self.defs: dict[str, list[str]] = {
            _PUT: [
                f"  PROCEDURE {_PUT}(s IN OUT NOCOPY VARCHAR2, n IN OUT NUMBER, piece VARCHAR2) IS",
                "  BEGIN",
                "    n := n + NVL(LENGTH(piece), 0);",
                f"    IF NVL(LENGTH(s), 0) < {SHOWN_CHARS} THEN",
                f"      s := s || SUBSTR(piece, 1, {SHOWN_CHARS} - NVL(LENGTH(s), 0));",
                "    END IF;",
                "  END;",
            ]
        }

    def proc(self, t: SqlType) -> str:
        tn = _name(t)
        name = shorten(f"plsqlbench_show_{tn.lower()}", NAME_LIMIT, "plsqlbench_show_")
        if name in self.defs:
            return name
        head = [f"  PROCEDURE {name}(x {tn}, s IN OUT NOCOPY VARCHAR2, n IN OUT NUMBER) IS"]
        null = ["    IF x IS NULL THEN", f"      {_PUT}(s, n, 'NULL');", "      RETURN;", "    END IF;"]
        if isinstance(t, Scalar) and t.kind == "text":
            body = [
                *head,
                "    v_len NUMBER;",
                "    v_part VARCHAR2(32767);",
                "  BEGIN",
                *null,
                "    v_len := NVL(DBMS_LOB.GETLENGTH(x), 0);",
                f"    v_part := DBMS_LOB.SUBSTR(x, {SHOWN_CHARS}, 1);",
                f"    {_PUT}(s, n, 'TO_CLOB(' || CHR(39) || REPLACE(v_part, CHR(39), CHR(39) || CHR(39)) || CHR(39));",
                "    n := n + v_len - NVL(LENGTH(v_part), 0);",
                f"    {_PUT}(s, n, ')');",
                "  END;",
            ]
        elif isinstance(t, Scalar):
            body = [
                *head,
                "    v_text VARCHAR2(200);",
                "  BEGIN",
                *null,
                "    v_text := TO_CHAR(x, 'TM9', 'NLS_NUMERIC_CHARACTERS=' || CHR(39) || '.,' || CHR(39));",
                "    IF SUBSTR(v_text, 1, 1) = '.' THEN",
                "      v_text := '0' || v_text;",
                "    ELSIF SUBSTR(v_text, 1, 2) = '-.' THEN",
                "      v_text := '-0' || SUBSTR(v_text, 2);",
                "    END IF;",
                f"    {_PUT}(s, n, v_text);",
                "  END;",
            ]
        elif isinstance(t, RecordT):
            parts: list[str] = []
            for i, (f, fn) in enumerate(zip(t.fields, _field_names(t))):
                if i:
                    parts.append(f"    {_PUT}(s, n, ',');")
                parts.append(f"    {self.proc(f)}(x.{fn}, s, n);")
            body = [*head, "  BEGIN", *null, f"    {_PUT}(s, n, '{tn}(');", *parts, f"    {_PUT}(s, n, ')');",
                    "  END;"]
        else:
            assert isinstance(t, ListT)
            inner = self.proc(t.elem)
            body = [
                *head,
                "    v_i PLS_INTEGER;",
                "  BEGIN",
                *null,
                f"    {_PUT}(s, n, '{tn}(');",
                "    v_i := x.FIRST;",
                "    WHILE v_i IS NOT NULL LOOP",
                "      IF v_i > x.FIRST THEN",
                f"        {_PUT}(s, n, ',');",
                "      END IF;",
                f"      {inner}(x(v_i), s, n);",
                "      v_i := x.NEXT(v_i);",
                "    END LOOP;",
                f"    {_PUT}(s, n, ')');",
                "  END;",
            ]
        self.defs[name] = body
        return name

    def lines(self, t: SqlType) -> list[str]:
        """The procedures and :data:`SHOWN` for values of ``t``: the marker, the value's shown
        and full lengths, the value; NULL (the bare message) if writing it fails."""
        top = self.proc(t)
        shown = [
            f"  FUNCTION {SHOWN}(x {_name(t)}) RETURN VARCHAR2 IS",
            "    s VARCHAR2(32767);",
            "    n NUMBER := 0;",
            "  BEGIN",
            f"    {top}(x, s, n);",
            f"    WHILE LENGTHB(s) > {SHOWN_BYTES} LOOP",
            "      s := SUBSTR(s, 1, LENGTH(s) - 100);",
            "    END LOOP;",
            f"    RETURN CHR(10) || '{RETURNED_MARK}' || TO_CHAR(NVL(LENGTH(s), 0)) || ' ' || TO_CHAR(n) || ':' || s;",
            "  EXCEPTION",
            "    WHEN OTHERS THEN",
            "      RETURN NULL;",
            "  END;",
        ]
        return [line for body in self.defs.values() for line in body] + shown

class OracleEmitter(Emitter):
    dialect = "oracle"
    intro = "Complete the following Oracle PL/SQL function."
    storage = Storage(bounded_numbers=True, empty_text_is_null=True)
    published = True

    # ----------------------------------------------------------------- types
    def type_sql(self, t: SqlType) -> str:
        return _name(t)

    def own_type_defs(self, t: SqlType) -> list[TypeDef]:
        if isinstance(t, ListT):
            ddl = f"CREATE TYPE {_name(t)} AS TABLE OF {_name(t.elem)};"
        elif isinstance(t, RecordT):
            attrs = ", ".join(f"{n} {_name(f)}" for n, f in zip(_field_names(t), t.fields))
            ddl = f"CREATE TYPE {_name(t)} AS OBJECT ({attrs});"
        else:
            return []
        name = _name(t)
        fixture = Fixture(
            key=f"mbpp-type:oracle:{name.lower()}", script=ddl + "\n/\n", description=f"MBPP type {name}"
        )
        return [TypeDef(name, ddl, fixture)]

    # ----------------------------------------------------------------- values
    def literal(self, value: Any, t: SqlType) -> str:
        if value is None:
            return "NULL"
        if isinstance(t, Scalar):
            if t.kind == "text":
                pieces = [value[i : i + CHUNK] for i in range(0, len(value), CHUNK)] or [""]
                return " || ".join(f"TO_CLOB({quote(p)})" for p in pieces)
            return format_number(value)
        if isinstance(t, ListT):
            return f"{_name(t)}(" + ",".join(self.literal(e, t.elem) for e in items_of(value, t)) + ")"
        assert isinstance(t, RecordT)
        return f"{_name(t)}(" + ",".join(self.literal(v, f) for v, f in zip(value, t.fields)) + ")"

    # ----------------------------------------------------------------- prompt
    def scaffold(self, sig: Signature) -> list[str]:
        if sig.params:
            params = ",\n".join(f"  p{i} IN {self.type_sql(t)}" for i, t in enumerate(sig.params, 1))
            return [
                f"CREATE OR REPLACE FUNCTION {sig.name}(",
                params,
                f") RETURN {self.type_sql(sig.returns)}",
            ]
        return [f"CREATE OR REPLACE FUNCTION {sig.name} RETURN {self.type_sql(sig.returns)}"]

    def body_frame(self, python_comment: str) -> list[str]:
        return ["AS", "  /*", python_comment, "  */", "BEGIN", "  -- LLM-generated body", "END;"]

    # ----------------------------------------------------------------- tests
    def block(self, sig: Signature, cases: Sequence[EmitCase], mode: str, show: bool = True) -> str:
        """One anonymous block checking ``cases`` in order (the published layout); ``show``:
        a failing case's message carries the returned value (see the module doc)."""
        rt = self.type_sql(sig.returns)
        tol = cases[0].tolerance if cases else Tolerance()
        cmp = cases[0].compare_type(sig) if cases else sig.returns
        if any(c.tolerance != tol or c.compare_type(sig) != cmp for c in cases):
            raise ValueError("one block checks cases of one tolerance and comparison")
        helpers = _Helpers(tol)
        published = mode == "published"
        simple = _native(sig.returns) and tol.exact
        single = all(not c.alternatives for c in cases)
        eq = "" if (published and simple and single) else helpers.eq(cmp)
        if not eq:
            condition = "a != b"
        elif published:
            condition = f"a IS NOT NULL AND NOT {eq}(a, b)"
        else:
            condition = f"NOT {eq}(a, b)"
        lines = ["DECLARE", f"  v_actual {rt};", *helpers.lines()]
        if show:
            lines += _Show().lines(sig.returns)
        shown = f" || {SHOWN}(a)" if show else ""
        if single:
            lines += [
                f"  PROCEDURE assert_eq(a {rt}, b {rt}, msg VARCHAR2) IS",
                "  BEGIN",
                f"    IF {condition} THEN",
                f"      RAISE_APPLICATION_ERROR(-20001, msg{shown});",
                "    END IF;",
                "  END;",
            ]
        lines.append("BEGIN")
        for case in cases:
            lines.append(f"  v_actual := {self.call(sig, case.args)};")
            if single:
                lines.append(
                    f"  assert_eq(v_actual, {self.literal(case.expected, sig.returns)}, '{case.label} failed');"
                )
                continue
            ok = " OR ".join(f"{eq}(v_actual, {self.literal(o, sig.returns)})" for o in case.outputs)
            guard = "v_actual IS NOT NULL AND " if published else ""
            lines += [
                f"  IF {guard}NOT ({ok}) THEN",
                f"    RAISE_APPLICATION_ERROR(-20001, '{case.label} failed'{shown.replace('(a)', '(v_actual)')});",
                "  END IF;",
            ]
        lines.append("END;")
        return "\n".join(lines)

    def test_script(self, sig: Signature, case: EmitCase, mode: str) -> str:
        return self.block(sig, [case], mode) + "\n/\n"

    def replay(self, sig: Signature, cases: Sequence[EmitCase]) -> str:
        helpers = _Helpers(Tolerance())
        body: list[str] = []
        for case in cases:
            conds = [
                f"{helpers.eq(t)}(p{i}, {self.literal(a, t)})"
                for i, (a, t) in enumerate(zip(case.args, sig.params), 1)
            ]
            result = f"RETURN {self.literal(case.expected, sig.returns)};"
            if not conds:
                body.append(f"  {result}")
                break
            body += ["  IF " + "\n    AND ".join(conds) + " THEN", f"    {result}", "  END IF;"]
        return "\n".join(
            [*self.scaffold(sig), "AS", *helpers.lines(), "BEGIN", *body, "  RETURN NULL;", "END;", "/", ""]
        )


# --------------------------------------------------------------------------- published blocks
_ASSERT_EQ = re.compile(
    r"^[ \t]*PROCEDURE\s+assert_eq\s*\(\s*a\s+(\w+)\s*,\s*b\s+(\w+)\s*,\s*msg\s+VARCHAR2\s*\)\s*IS\b", re.M | re.I
)
#: The published ``assert_eq``'s raise: the only statement :func:`show_published` changes.
_PUBLISHED_RAISE = "RAISE_APPLICATION_ERROR(-20001, msg);"
_PUBLISHED_CASE = re.compile(
    r"v_actual\s*:=\s*(?P<call>.+?)\s*;\s*assert_eq\(\s*v_actual\s*,\s*(?P<expected>.+?)\s*,"
    r"\s*'(?P<label>[^'\s]+) failed'\s*\)\s*;",
    re.S,
)


def type_of_name(name: str) -> SqlType | None:
    """The type a published block's type name stands for (``NUMBER``, ``CLOB``, ``<T>_NTT``),
    or None for a name outside that convention."""
    upper = name.upper()
    if upper == "NUMBER":
        return Scalar("number")
    if upper == "CLOB":
        return Scalar("text")
    if upper.endswith("_NTT"):
        inner = type_of_name(upper[: -len("_NTT")])
        return ListT(inner) if inner is not None else None
    return None


def published_cases(block: str) -> dict[str, dict[str, Any]]:
    """Per case label of a published block (``case_2``): its call and expected value as
    written there, for the failure message (:class:`~pytest_plsqlbench.judges.AssertJudge`)."""
    return {
        m["label"]: {"call": m["call"].strip(), "expected": [m["expected"].strip()]}
        for m in _PUBLISHED_CASE.finditer(block)
    }


def show_published(block: str) -> str:
    """A published block whose ``assert_eq`` message also carries the returned value.

    Only the message of its one ``RAISE_APPLICATION_ERROR`` changes, and the local procedures
    that write the value are declared before ``assert_eq``: the calls, the ``!=`` and every
    verdict stay the published ones. A block in any other layout is returned unchanged."""
    m = _ASSERT_EQ.search(block)
    if m is None or block.count(_PUBLISHED_RAISE) != 1 or block.find(_PUBLISHED_RAISE) < m.end():
        return block
    if m.group(1).upper() != m.group(2).upper() or "plsqlbench_" in block.lower():
        return block
    t = type_of_name(m.group(1))
    if t is None or _name(t) != m.group(1).upper():
        return block
    helpers = "\n".join(_Show().lines(t)) + "\n"
    shown = block[: m.start()] + helpers + block[m.start() :]
    return shown.replace(_PUBLISHED_RAISE, f"RAISE_APPLICATION_ERROR(-20001, msg || {SHOWN}(a));")

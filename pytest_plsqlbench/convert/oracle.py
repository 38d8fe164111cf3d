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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
from .sqltypes import ListT, RecordT, Scalar, SqlType, items_of

NAME_LIMIT = 30
#: Characters per TO_CLOB('...') piece (PL/SQL string literals are limited to 32K bytes).
CHUNK = 4000


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


class OracleEmitter(Emitter):
    dialect = "oracle"
    intro = "Complete the following Oracle PL/SQL function."

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
    def block(self, sig: Signature, cases: Sequence[EmitCase], mode: str) -> str:
        """One anonymous block checking ``cases`` in order (the published layout)."""
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
        if single:
            lines += [
                f"  PROCEDURE assert_eq(a {rt}, b {rt}, msg VARCHAR2) IS",
                "  BEGIN",
                f"    IF {condition} THEN",
                "      RAISE_APPLICATION_ERROR(-20001, msg);",
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
                f"    RAISE_APPLICATION_ERROR(-20001, '{case.label} failed');",
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

"""PostgreSQL PL/pgSQL emitter (mapping documented in docs/mbpp-postgres-mapping.md).

* numbers -> ``numeric`` (exact, arbitrary precision: Python ints stay exact, floats are
  written as their shortest decimal ``repr``); booleans -> ``boolean`` where a position only
  holds booleans, ``numeric`` 1/0 where it mixes them with numbers; strings -> ``text``
  (``''`` is not NULL here); ``None`` -> ``NULL``.
* lists/tuples/sets of scalars -> ``numeric[]`` / ``text[]`` / ``boolean[]``.
* nested lists, ragged or not -> arrays of a one-field composite wrapper:
  ``CREATE TYPE numeric_list AS (items numeric[])`` and ``numeric_list[]`` (``p1[i].items``);
  PostgreSQL's multi-dimensional arrays must be rectangular, the wrapper need not be.
* mixed-type tuples -> composite ``<f1>_<f2>_rec<n>`` (fields ``f1..fn``); dicts -> arrays
  of ``<k>_<v>_kv`` composites (fields ``k``, ``v``), in any order.

Tests are ``DO`` blocks. Exact, ordered results compare with ``IS DISTINCT FROM`` (NULL-safe,
element-wise, ``2.0 = 2``); results needing a float tolerance or set/dict semantics go
through ``public.mbpp_same(actual jsonb, expected jsonb, spec, tolerance)``, a helper loaded
as a fixture and called schema-qualified so an answer cannot shadow it. ``published`` mode
uses ``<>``, under which a NULL result passes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..judges import CASE_DETAIL
from ..tasks import Fixture
from .emitter import EmitCase, Emitter, Signature, TypeDef, format_number, format_plain, shorten
from .model import Tolerance
from .sqltypes import ListT, RecordT, Scalar, SqlType, items_of, only_ordered

NAME_LIMIT = 63
SCALARS = {"number": "numeric", "text": "text", "bool": "boolean"}
#: Characters of a returned value the DETAIL carries (the record and the terminal show it whole up to this).
MAX_SHOWN = 2000
HELPER_KEY = "mbpp-helpers:postgres:v1"

HELPER_SQL = """\
CREATE OR REPLACE FUNCTION public.mbpp_within(a jsonb, b jsonb, spec jsonb, tol jsonb)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
AS $mbpp$
DECLARE
  x jsonb;
  y jsonb;
  hit boolean;
BEGIN
  FOR x IN SELECT value FROM jsonb_array_elements(a) LOOP
    hit := false;
    FOR y IN SELECT value FROM jsonb_array_elements(b) LOOP
      IF public.mbpp_same(x, y, spec, tol) THEN
        hit := true;
        EXIT;
      END IF;
    END LOOP;
    IF NOT hit THEN
      RETURN false;
    END IF;
  END LOOP;
  RETURN true;
END;
$mbpp$;

CREATE OR REPLACE FUNCTION public.mbpp_same(a jsonb, b jsonb, spec jsonb, tol jsonb)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
AS $mbpp$
DECLARE
  kind text := spec ->> 't';
  atol numeric := coalesce((tol ->> 'atol')::numeric, 0);
  rtol numeric := coalesce((tol ->> 'rtol')::numeric, 0);
  x numeric;
  y numeric;
  n integer;
  i integer;
BEGIN
  IF a IS NULL OR jsonb_typeof(a) = 'null' OR b IS NULL OR jsonb_typeof(b) = 'null' THEN
    RETURN (a IS NULL OR jsonb_typeof(a) = 'null') AND (b IS NULL OR jsonb_typeof(b) = 'null');
  END IF;
  IF kind = 'num' THEN
    IF jsonb_typeof(a) <> 'number' OR jsonb_typeof(b) <> 'number' THEN
      RETURN false;
    END IF;
    x := a::numeric;
    y := b::numeric;
    IF x = y THEN
      RETURN true;
    ELSIF tol ->> 'k' = 'isclose' THEN
      RETURN abs(x - y) <= greatest(rtol * greatest(abs(x), abs(y)), atol);
    END IF;
    RETURN abs(x - y) <= atol + rtol * abs(y);
  ELSIF kind IN ('text', 'bool') THEN
    RETURN a = b;
  ELSIF kind = 'wrap' THEN
    RETURN public.mbpp_same(a -> 'items', b -> 'items', spec -> 'e', tol);
  ELSIF kind = 'rec' THEN
    FOR i IN 0 .. jsonb_array_length(spec -> 'f') - 1 LOOP
      IF NOT public.mbpp_same(a -> (spec -> 'n' ->> i), b -> (spec -> 'n' ->> i), spec -> 'f' -> i, tol) THEN
        RETURN false;
      END IF;
    END LOOP;
    RETURN true;
  ELSIF kind = 'list' THEN
    IF jsonb_typeof(a) <> 'array' OR jsonb_typeof(b) <> 'array' THEN
      RETURN false;
    END IF;
    n := jsonb_array_length(a);
    IF spec ->> 'o' <> 'set' AND n <> jsonb_array_length(b) THEN
      RETURN false;
    END IF;
    IF spec ->> 'o' = 'list' THEN
      FOR i IN 0 .. n - 1 LOOP
        IF NOT public.mbpp_same(a -> i, b -> i, spec -> 'e', tol) THEN
          RETURN false;
        END IF;
      END LOOP;
      RETURN true;
    END IF;
    RETURN public.mbpp_within(a, b, spec -> 'e', tol) AND public.mbpp_within(b, a, spec -> 'e', tol);
  END IF;
  RAISE EXCEPTION 'mbpp_same: unknown comparison spec %', spec;
END;
$mbpp$;
"""

HELPER_FIXTURE = Fixture(
    key=HELPER_KEY,
    script=HELPER_SQL,
    description="MBPP comparison helper public.mbpp_same (tolerance, set and dict semantics)",
)


def _token(t: SqlType) -> str:
    if isinstance(t, Scalar):
        return SCALARS[t.kind]
    if isinstance(t, ListT):
        return f"{_token(t.elem)}_list"
    if isinstance(t, RecordT):
        names = "_".join(_token(f) for f in t.fields)
        return f"{names}_kv" if t.kv else f"{names}_rec{len(t.fields)}"
    raise TypeError(f"unresolved type {t}")


def _named(t: SqlType) -> str:
    """Name of the composite for a record, or of the wrapper holding a nested list."""
    return shorten(_token(t), NAME_LIMIT, "mbpp_t_")


def _field_names(t: RecordT) -> list[str]:
    return ["k", "v"] if t.kv else [f"f{i}" for i in range(1, len(t.fields) + 1)]


def sql_type(t: SqlType) -> str:
    if isinstance(t, Scalar):
        return SCALARS[t.kind]
    if isinstance(t, RecordT):
        return _named(t)
    assert isinstance(t, ListT)
    return _element_sql(t.elem) + "[]"


def _element_sql(e: SqlType) -> str:
    return _named(e) if isinstance(e, ListT) else sql_type(e)


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def spec(t: SqlType) -> dict[str, Any]:
    """The comparison spec ``public.mbpp_same`` walks (mirrors ``to_jsonb`` of the type)."""
    if isinstance(t, Scalar):
        return {"t": {"number": "num", "text": "text", "bool": "bool"}[t.kind]}
    if isinstance(t, RecordT):
        return {"t": "rec", "n": _field_names(t), "f": [spec(f) for f in t.fields]}
    assert isinstance(t, ListT)
    elem = spec(t.elem)
    if isinstance(t.elem, ListT):
        elem = {"t": "wrap", "e": elem}
    return {"t": "list", "o": t.order, "e": elem}


def _simple(t: SqlType, tol: Tolerance) -> bool:
    """Plain ``IS DISTINCT FROM`` is the right comparison (exact and ordered)."""
    return tol.exact and only_ordered(t)


def dollar_tag(*texts: str) -> str:
    tag, n = "$mbpp$", 0
    while any(tag in t for t in texts):
        n += 1
        tag = f"$mbpp{n}$"
    return tag


class PostgresEmitter(Emitter):
    dialect = "postgres"
    intro = "Complete the following PostgreSQL PL/pgSQL function."

    # ----------------------------------------------------------------- types
    def type_sql(self, t: SqlType) -> str:
        return sql_type(t)

    def own_type_defs(self, t: SqlType) -> list[TypeDef]:
        if isinstance(t, RecordT):
            fields = ", ".join(f"{n} {sql_type(f)}" for n, f in zip(_field_names(t), t.fields))
            return [self._def(_named(t), f"CREATE TYPE {_named(t)} AS ({fields});")]
        if isinstance(t, ListT) and isinstance(t.elem, ListT):
            return [self._def(_named(t.elem), f"CREATE TYPE {_named(t.elem)} AS (items {sql_type(t.elem)});")]
        return []

    @staticmethod
    def _def(name: str, ddl: str) -> TypeDef:
        fixture = Fixture(
            key=f"mbpp-type:postgres:{name}", script=ddl + "\n", description=f"MBPP type {name}"
        )
        return TypeDef(name, ddl, fixture)

    def fixtures(self, sig: Signature, cases: Sequence[EmitCase], mode: str) -> tuple[Fixture, ...]:
        fixtures = super().fixtures(sig, cases, mode)
        if any(not self._plain(sig, c) for c in cases):
            fixtures += (HELPER_FIXTURE,)
        return fixtures

    # ----------------------------------------------------------------- values
    def literal(self, value: Any, t: SqlType) -> str:
        if value is None:
            return f"NULL::{sql_type(t)}"
        if isinstance(t, Scalar):
            if t.kind == "text":
                return quote(value)
            if t.kind == "bool":
                return "true" if value else "false"
            return format_number(value)
        if isinstance(t, RecordT):
            return "ROW(" + ", ".join(self.literal(v, f) for v, f in zip(value, t.fields)) + f")::{_named(t)}"
        assert isinstance(t, ListT)
        return (
            "ARRAY[" + ", ".join(self._element(e, t.elem) for e in items_of(value, t)) + f"]::{sql_type(t)}"
        )

    def _element(self, value: Any, t: SqlType) -> str:
        if value is None:
            return "NULL"
        if isinstance(t, ListT):
            return f"ROW({self.literal(value, t)})::{_named(t)}"
        return self.literal(value, t)

    # ----------------------------------------------------------------- prompt
    def scaffold(self, sig: Signature) -> list[str]:
        rt = f"RETURNS {self.type_sql(sig.returns)}"
        if sig.params:
            params = ",\n".join(f"  p{i} {self.type_sql(t)}" for i, t in enumerate(sig.params, 1))
            return [f"CREATE OR REPLACE FUNCTION {sig.name}(", params, f") {rt}"]
        return [f"CREATE OR REPLACE FUNCTION {sig.name}() {rt}"]

    def body_frame(self, python_comment: str) -> list[str]:
        return [
            "LANGUAGE plpgsql",
            "AS $$",
            "  /*",
            python_comment.replace("$$", "$ $"),
            "  */",
            "BEGIN",
            "  -- LLM-generated body",
            "END;",
            "$$;",
        ]

    # ----------------------------------------------------------------- tests
    def _plain(self, sig: Signature, case: EmitCase) -> bool:
        return _simple(case.compare_type(sig), case.tolerance)

    def _same(self, sig: Signature, case: EmitCase, output: Any) -> str:
        lit = self.literal(output, sig.returns)
        if self._plain(sig, case):
            return f"v_actual IS NOT DISTINCT FROM {lit}"
        tol = case.tolerance
        tol_json = json.dumps({"atol": format_plain(tol.atol), "rtol": format_plain(tol.rtol), "k": tol.kind})
        spec_json = json.dumps(spec(case.compare_type(sig)), separators=(",", ":"))
        return (
            f"public.mbpp_same(to_jsonb(v_actual), to_jsonb({lit}), "
            f"{quote(spec_json)}::jsonb, {quote(tol_json)}::jsonb)"
        )

    def failure_condition(self, sig: Signature, case: EmitCase, mode: str) -> str:
        published = mode == "published"
        if self._plain(sig, case) and not case.alternatives:
            lit = self.literal(case.expected, sig.returns)
            return f"v_actual <> {lit}" if published else f"v_actual IS DISTINCT FROM {lit}"
        ok = " OR ".join(f"({self._same(sig, case, o)})" for o in case.outputs)
        return f"v_actual IS NOT NULL AND NOT ({ok})" if published else f"NOT ({ok})"

    def test_script(self, sig: Signature, case: EmitCase, mode: str) -> str:
        body = "\n".join(
            [
                "DECLARE",
                f"  v_actual {self.type_sql(sig.returns)};",
                "BEGIN",
                f"  v_actual := {self.call(sig, case.args)};",
                f"  IF {self.failure_condition(sig, case, mode)} THEN",
                f"    RAISE EXCEPTION '{case.label} failed: got %', left(v_actual::text, 300)",
                # What the judge shows (judges.CASE_DETAIL): the returned and accepted values as
                # PostgreSQL prints them, so the two read alike.
                f"      USING DETAIL = '{CASE_DETAIL}' || json_build_object('actual', left(v_actual::text, {MAX_SHOWN}), "
                f"'actual_chars', length(v_actual::text), 'expected', json_build_array("
                + ", ".join(f"({self.literal(o, sig.returns)})::text" for o in case.outputs) + "))::text;",
                "  END IF;",
                "END",
            ]
        )
        tag = dollar_tag(body)
        return f"DO {tag}\n{body}\n{tag};\n"

    def replay(self, sig: Signature, cases: Sequence[EmitCase]) -> str:
        body: list[str] = []
        for case in cases:
            conds = [
                f"p{i} IS NOT DISTINCT FROM {self.literal(a, t)}"
                for i, (a, t) in enumerate(zip(case.args, sig.params), 1)
            ]
            result = f"RETURN {self.literal(case.expected, sig.returns)};"
            if not conds:
                body.append(f"  {result}")
                break
            body += ["  IF " + "\n    AND ".join(conds) + " THEN", f"    {result}", "  END IF;"]
        text = "\n".join(["BEGIN", *body, "  RETURN NULL;", "END;"])
        tag = dollar_tag(text)
        return "\n".join([*self.scaffold(sig), "LANGUAGE plpgsql", f"AS {tag}", text, f"{tag};", ""])

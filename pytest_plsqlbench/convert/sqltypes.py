"""The dialect-neutral type algebra the converter infers from Python test values.

Python values map onto five shapes, which each dialect then spells in its own types:

* ``Scalar("number")`` -- ``int``/``float`` (and ``bool`` where a position mixes them);
* ``Scalar("bool")``   -- positions that only ever hold ``True``/``False``;
* ``Scalar("text")``   -- ``str``;
* ``ListT(elem, order)`` -- lists and tuples whose elements share a type (``order="list"``),
  sets (``"set"``: compared ignoring order and duplicates) and dicts (``"map"``: a collection
  of key/value records compared ignoring order);
* ``RecordT(fields)`` -- fixed-length tuples whose positions have different types
  (``('Maths', 97)``), which no homogeneous collection can hold. Only tuples: a Python list
  mixing types (``[1, [2, 3]]``) is not a record, it is rejected.

``None`` fits every type (SQL ``NULL``). :data:`UNKNOWN` stands for "no value seen yet"
(elements of empty lists) and is resolved to ``number`` when nothing refines it.

Inference is column-wise: all base-case values of one argument position are typed together,
which is what lets a tuple position become a record only when no collection type fits.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

ScalarKind = Literal["number", "bool", "text"]
Order = Literal["list", "set", "map"]

#: Largest integer magnitude Oracle NUMBER (38 digits) holds exactly (PostgreSQL numeric: any).
MAX_INT = 10**38
#: Oracle NUMBER's exponent range (PostgreSQL numeric is wider).
MAX_FLOAT = 1e125
MIN_FLOAT = 1e-129


@dataclass(frozen=True)
class Storage:
    """Where a database does not hold a value as written (an emitter's ``storage``)."""

    #: Numbers are Oracle NUMBERs: integers below MAX_INT, floats within MIN_FLOAT..MAX_FLOAT.
    bounded_numbers: bool = False
    #: An empty string is stored as NULL.
    empty_text_is_null: bool = False


#: Any value that passes the checks every database needs is held as written (PostgreSQL).
EXACT_STORAGE = Storage()


@dataclass(frozen=True)
class Unknown:
    def __str__(self) -> str:
        return "?"


@dataclass(frozen=True)
class Scalar:
    kind: ScalarKind

    def __str__(self) -> str:
        return self.kind


@dataclass(frozen=True)
class ListT:
    elem: SqlType
    order: Order = "list"

    def __str__(self) -> str:
        if self.order == "map" and isinstance(self.elem, RecordT):
            return f"dict[{self.elem.fields[0]}, {self.elem.fields[1]}]"
        return f"{self.order}[{self.elem}]"


@dataclass(frozen=True)
class RecordT:
    fields: tuple[SqlType, ...]
    #: A dict entry (fields named key/value) rather than a positional tuple.
    kv: bool = False

    def __str__(self) -> str:
        return "tuple[" + ", ".join(map(str, self.fields)) + "]"


SqlType = Unknown | Scalar | ListT | RecordT
UNKNOWN = Unknown()
NUMBER = Scalar("number")
BOOL = Scalar("bool")
TEXT = Scalar("text")


class TypeConflict(Exception):
    """Values that no single type of the algebra fits."""


class UnsupportedValue(Exception):
    """A value with no SQL counterpart (complex numbers, objects ...)."""


class ValueProblem(Exception):
    """A value of a fitting type that the databases cannot hold exactly: (reason, detail)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def kind_of(value: Any) -> str:
    """The shape of one Python value: bool, number, text, seq, set, dict (or raise)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, (list, tuple)):
        return "seq"
    if isinstance(value, (set, frozenset)):
        return "set"
    if isinstance(value, dict):
        return "dict"
    raise UnsupportedValue(f"{type(value).__name__} value {_short(value)}")


def _elements(value: Any) -> list[Any]:
    if isinstance(value, (set, frozenset)):
        return sorted_set(value)
    return list(value)


def sorted_set(value: Iterable[Any]) -> list[Any]:
    """Set elements in a stable order (string hashing is randomised per process)."""
    return sorted(value, key=lambda v: (type(v).__name__, repr(v)))


def infer(values: Iterable[Any]) -> SqlType:
    """The one type fitting every value (all of one argument position), or TypeConflict."""
    vals = [v for v in values if v is not None]
    if not vals:
        return UNKNOWN
    kinds = {kind_of(v) for v in vals}
    if kinds == {"bool"}:
        return BOOL
    if kinds <= {"bool", "number"}:
        return NUMBER
    if kinds == {"text"}:
        return TEXT
    if kinds == {"dict"}:
        keys = [k for d in vals for k in d]
        items = [d[k] for d in vals for k in d]
        return ListT(RecordT((infer(keys), infer(items)), kv=True), "map")
    if kinds <= {"seq", "set"}:
        order: Order = "set" if "set" in kinds else "list"
        try:
            return ListT(infer([e for v in vals for e in _elements(v)]), order)
        except TypeConflict as first:
            lengths = {len(v) for v in vals}
            tuples = all(isinstance(v, tuple) for v in vals)
            if tuples and len(lengths) == 1 and (n := lengths.pop()) >= 2:
                try:
                    return RecordT(tuple(infer([v[i] for v in vals]) for i in range(n)))
                except TypeConflict:
                    pass
            raise TypeConflict(f"{first}; nor as fixed-shape tuples" if tuples else str(first)) from None
    raise TypeConflict(
        "mixes " + " and ".join(sorted(kinds)) + " values: " + ", ".join(_short(v, 30) for v in vals[:3])
    )


def refine(t: SqlType, value: Any) -> SqlType:
    """``t`` with unknown parts filled in from ``value``; TypeConflict if ``value`` does not fit."""
    if value is None:
        return t
    if isinstance(t, Unknown):
        return infer([value])
    kind = kind_of(value)
    if isinstance(t, Scalar):
        fits = kind == t.kind or (t.kind == "number" and kind == "bool")
        if not fits:
            raise TypeConflict(f"{_short(value)} is not {t}")
        return t
    if isinstance(t, ListT):
        if kind == "dict" and t.order == "map" and isinstance(t.elem, RecordT):
            k, v = t.elem.fields
            for key, item in value.items():
                k, v = refine(k, key), refine(v, item)
            return ListT(RecordT((k, v), kv=True), "map")
        if kind not in ("seq", "set") or t.order == "map":
            raise TypeConflict(f"{_short(value)} is not {t}")
        elem = t.elem
        for e in _elements(value):
            elem = refine(elem, e)
        return ListT(elem, t.order)
    assert isinstance(t, RecordT)
    if not isinstance(value, tuple) or len(value) != len(t.fields):
        raise TypeConflict(f"{_short(value)} is not {t}")
    return RecordT(tuple(refine(f, v) for f, v in zip(t.fields, value)), t.kv)


def resolve(t: SqlType) -> SqlType:
    """Unknown parts (never-seen elements, always-None values) become ``number``."""
    if isinstance(t, Unknown):
        return NUMBER
    if isinstance(t, ListT):
        return ListT(resolve(t.elem), t.order)
    if isinstance(t, RecordT):
        return RecordT(tuple(resolve(f) for f in t.fields), t.kv)
    return t


def has_unknown(t: SqlType) -> bool:
    if isinstance(t, Unknown):
        return True
    if isinstance(t, ListT):
        return has_unknown(t.elem)
    if isinstance(t, RecordT):
        return any(has_unknown(f) for f in t.fields)
    return False


def children(t: SqlType) -> tuple[SqlType, ...]:
    if isinstance(t, ListT):
        return (t.elem,)
    if isinstance(t, RecordT):
        return t.fields
    return ()


def walk(t: SqlType) -> Iterable[SqlType]:
    """Every type in ``t``, children before parents (the order DDL must be created in)."""
    for c in children(t):
        yield from walk(c)
    yield t


def only_ordered(t: SqlType) -> bool:
    """True when every collection in ``t`` compares in order (plain equality suffices)."""
    return all(not isinstance(x, ListT) or x.order == "list" for x in walk(t))


def with_top_order(t: SqlType, order: Order) -> SqlType:
    """``t`` compared as a set at the top level (``set(f(x)) == set(y)``)."""
    if isinstance(t, ListT) and t.order != "map":
        return ListT(t.elem, order)
    return t


# --------------------------------------------------------------------------- values


def _number(value: Any, where: str, bounded: bool) -> Decimal:
    if isinstance(value, bool):
        return Decimal(int(value))
    if isinstance(value, int):
        if bounded and abs(value) >= MAX_INT:
            raise ValueProblem(
                "out-of-range", f"{where}: integer with {len(str(abs(value)))} digits (Oracle NUMBER: 38)"
            )
        return Decimal(value)
    assert isinstance(value, float)
    if not math.isfinite(value):
        raise ValueProblem("out-of-range", f"{where}: {value!r}")
    if bounded and value != 0 and not (MIN_FLOAT <= abs(value) <= MAX_FLOAT):
        raise ValueProblem("out-of-range", f"{where}: {value!r} is outside Oracle NUMBER's range")
    return Decimal(repr(value))


def _text(value: str, where: str) -> str:
    if "\x00" in value:
        raise ValueProblem("unrepresentable-text", f"{where}: string contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueProblem("unrepresentable-text", f"{where}: string is not valid Unicode") from None
    return value


def canon(value: Any, t: SqlType, *, storage: Storage = EXACT_STORAGE, where: str = "value") -> Any:
    """The value as the database holds it: hashable, numbers as Decimal, sets sorted.

    Raises ValueProblem for values a database cannot hold exactly: NaN/infinity and NUL
    characters anywhere; with ``storage.bounded_numbers`` (Oracle) also integers beyond NUMBER's
    38 digits and floats outside its exponent range; ``storage.empty_text_is_null`` makes ``''``
    NULL, as Oracle stores it.
    """
    if value is None:
        return None
    if isinstance(t, Scalar):
        if t.kind == "number":
            return _number(value, where, storage.bounded_numbers)
        if t.kind == "bool":
            return bool(value)
        text = _text(value, where)
        return None if (storage.empty_text_is_null and text == "") else text
    if isinstance(t, ListT):
        if isinstance(value, dict):
            assert isinstance(t.elem, RecordT)
            return tuple(canon((k, v), t.elem, storage=storage, where=where) for k, v in value.items())
        return tuple(canon(e, t.elem, storage=storage, where=where) for e in _elements(value))
    if isinstance(t, RecordT):
        return tuple(canon(v, f, storage=storage, where=where) for v, f in zip(value, t.fields))
    raise TypeError(f"unresolved type {t}")


def items_of(value: Any, t: ListT) -> list[Any]:
    """The elements a collection literal lists, in emission order (dict -> (k, v) pairs)."""
    if isinstance(value, dict):
        return [(k, v) for k, v in value.items()]
    return _elements(value)


def same(a: Any, b: Any, t: SqlType, tol: Any = None) -> bool:
    """Python mirror of the SQL comparison of canonical values ``a`` (actual) and ``b``.

    ``tol`` is a :class:`~pytest_plsqlbench.convert.model.Tolerance` or None (exact).
    """
    if a is None or b is None:
        return a is None and b is None
    if isinstance(t, Scalar):
        if t.kind != "number" or tol is None or tol.exact or a == b:
            return a == b
        diff = abs(a - b)
        atol, rtol = Decimal(repr(tol.atol)), Decimal(repr(tol.rtol))
        if tol.kind == "isclose":
            return diff <= max(rtol * max(abs(a), abs(b)), atol)
        return diff <= atol + rtol * abs(b)
    if isinstance(t, RecordT):
        return all(same(x, y, f, tol) for x, y, f in zip(a, b, t.fields))
    assert isinstance(t, ListT)
    if t.order == "list":
        return len(a) == len(b) and all(same(x, y, t.elem, tol) for x, y in zip(a, b))
    if t.order == "map" and len(a) != len(b):
        return False
    return all(any(same(x, y, t.elem, tol) for y in b) for x in a) and all(
        any(same(x, y, t.elem, tol) for x in a) for y in b
    )


def sql_visible(value: Any, t: SqlType) -> Any:
    """The Python value a SQL function effectively receives: bools in number positions become
    ints and integral floats become ints (NUMBER cannot tell ``2.0`` from ``2``)."""
    if value is None:
        return None
    if isinstance(t, Scalar):
        if t.kind == "number":
            if isinstance(value, bool):
                return int(value)
            if isinstance(value, float) and value.is_integer():
                return int(value)
        return value
    if isinstance(t, ListT):
        if isinstance(value, dict) and isinstance(t.elem, RecordT):
            kt, vt = t.elem.fields
            return {sql_visible(k, kt): sql_visible(v, vt) for k, v in value.items()}
        conv = [sql_visible(e, t.elem) for e in value]
        if isinstance(value, (set, frozenset)):
            return type(value)(conv)
        return tuple(conv) if isinstance(value, tuple) else conv
    if isinstance(t, RecordT):
        conv = [sql_visible(v, f) for v, f in zip(value, t.fields)]
        return tuple(conv) if isinstance(value, tuple) else conv
    return value


def lossy(value: Any, t: SqlType) -> bool:
    """Whether :func:`sql_visible` changes ``value`` in a way Python code could notice."""
    return _differs(value, sql_visible(value, t))


def _differs(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return True
    if isinstance(a, (list, tuple)):
        return len(a) != len(b) or any(_differs(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) != list(b) or any(_differs(a[k], b[k]) for k in a)
    if isinstance(a, (set, frozenset)):
        return any(type(x) is bool or type(x) is float for x in a)
    return False

"""Type inference and value handling of the MBPP converter (pure Python, no database)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from pytest_plsqlbench.convert.model import Tolerance
from pytest_plsqlbench.convert.oracle import OracleEmitter
from pytest_plsqlbench.convert.postgres import PostgresEmitter
from pytest_plsqlbench.convert.sqltypes import (
    BOOL,
    EXACT_STORAGE,
    NUMBER,
    TEXT,
    UNKNOWN,
    ListT,
    RecordT,
    TypeConflict,
    UnsupportedValue,
    ValueProblem,
    canon,
    infer,
    lossy,
    refine,
    resolve,
    same,
    sql_visible,
)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1, 2.5, -3], NUMBER),
        ([True, False], BOOL),
        ([True, 3], NUMBER),  # a position mixing bools and numbers: Python's True == 1
        (["a", ""], TEXT),
        ([None, None], UNKNOWN),
        ([None, 4], NUMBER),
        ([[1, 2], (3,), []], ListT(NUMBER)),
        ([[[1, 2], [3]], [[4, 5, 6]]], ListT(ListT(NUMBER))),  # ragged nesting
        ([[], []], ListT(UNKNOWN)),
        ([{1, 2}, {3}], ListT(NUMBER, "set")),
        ([{"a": 1}, {"b": 2.5}], ListT(RecordT((TEXT, NUMBER), kv=True), "map")),
        ([("Maths", 97), ("English", 88)], RecordT((TEXT, NUMBER))),
        ([[("Maths", 97)], []], ListT(RecordT((TEXT, NUMBER)))),
        ([(1, [2, 3]), (4, [])], RecordT((NUMBER, ListT(NUMBER)))),
    ],
)
def test_infer_finds_the_one_type_fitting_all_values(values, expected):
    assert infer(values) == expected


@pytest.mark.parametrize(
    "values",
    [
        [1, "a"],
        [[1, "a"]],  # a list mixing types is not a record (only tuples are)
        [[1, [2, 3]]],
        [(1, "a"), (1, "a", 2)],  # tuples of different lengths
        [{1: 2}, [1]],
    ],
)
def test_infer_rejects_values_no_type_fits(values):
    with pytest.raises(TypeConflict):
        infer(values)


def test_infer_rejects_values_without_sql_counterpart():
    with pytest.raises(UnsupportedValue):
        infer([1j])
    with pytest.raises(UnsupportedValue):
        infer([object()])


def test_refine_fills_unknown_parts_and_keeps_known_ones():
    assert refine(ListT(UNKNOWN), ["a", "b"]) == ListT(TEXT)
    assert refine(ListT(NUMBER), []) == ListT(NUMBER)
    assert refine(NUMBER, None) == NUMBER
    assert refine(NUMBER, True) == NUMBER  # a bool input where numbers are expected fits...
    with pytest.raises(TypeConflict):
        refine(BOOL, 1)  # ...but not a number where booleans are expected
    with pytest.raises(TypeConflict):
        refine(ListT(NUMBER), ["x"])
    with pytest.raises(TypeConflict):
        refine(RecordT((TEXT, NUMBER)), ["x", 1])  # a list is not a tuple


def test_resolve_defaults_never_seen_element_types_to_number():
    assert resolve(ListT(UNKNOWN)) == ListT(NUMBER)
    assert resolve(RecordT((UNKNOWN, TEXT))) == RecordT((NUMBER, TEXT))


def test_canon_is_what_the_database_holds():
    assert canon(True, NUMBER) == Decimal(1)
    assert canon(2.0, NUMBER) == canon(2, NUMBER)
    assert canon(0.1, NUMBER) == Decimal("0.1")  # the shortest repr, not the binary expansion
    assert canon("", TEXT) == ""
    assert canon("", TEXT, storage=OracleEmitter.storage) is None  # Oracle stores '' as NULL
    assert canon({3, 1, 2}, ListT(NUMBER, "set")) == (1, 2, 3)  # sets in a stable order
    assert canon({"a": 1}, ListT(RecordT((TEXT, NUMBER), kv=True), "map")) == (("a", 1),)


STORAGE = {None: EXACT_STORAGE, "postgres": PostgresEmitter.storage, "oracle": OracleEmitter.storage}


@pytest.mark.parametrize(
    ("value", "t", "dialect", "reason"),
    [
        (float("nan"), NUMBER, None, "out-of-range"),
        (float("inf"), NUMBER, "postgres", "out-of-range"),
        (10**40, NUMBER, "oracle", "out-of-range"),  # NUMBER holds 38 digits
        (1e200, NUMBER, "oracle", "out-of-range"),
        ("a\x00b", TEXT, None, "unrepresentable-text"),
        ("\ud800", TEXT, None, "unrepresentable-text"),
    ],
)
def test_canon_refuses_values_a_database_cannot_hold(value, t, dialect, reason):
    with pytest.raises(ValueProblem) as info:
        canon(value, t, storage=STORAGE[dialect])
    assert info.value.reason == reason


def test_big_integers_are_exact_in_postgres():
    assert canon(10**40, NUMBER, storage=PostgresEmitter.storage) == Decimal(10**40)


def test_same_is_null_safe_ordered_and_tolerant_as_asked():
    lst = ListT(NUMBER)
    assert same(None, None, NUMBER)
    assert not same(None, Decimal(0), NUMBER)
    assert not same((Decimal(1), Decimal(2)), (Decimal(2), Decimal(1)), lst)
    assert same((Decimal(1), Decimal(2)), (Decimal(2), Decimal(1)), ListT(NUMBER, "set"))
    assert same((Decimal(1), Decimal(1)), (Decimal(1),), ListT(NUMBER, "set"))  # sets ignore duplicates
    kv = ListT(RecordT((TEXT, NUMBER), kv=True), "map")
    assert not same((("a", 1), ("a", 1)), (("a", 1),), kv)  # dicts do not
    close = Tolerance(1e-6, 1e-7)
    assert same(Decimal("0.3"), Decimal("0.30000000000000004"), NUMBER, close)
    assert not same(Decimal("0.3"), Decimal("0.3001"), NUMBER, close)
    assert not same(Decimal("0.3"), Decimal("0.30000000000000004"), NUMBER)
    isclose = Tolerance(0, 0.001, "isclose")
    assert same(Decimal(1000), Decimal("1000.9"), NUMBER, isclose)
    assert not same(Decimal(1000), Decimal(1002), NUMBER, isclose)


def test_lossy_marks_inputs_sql_cannot_tell_apart():
    assert lossy((True, 2), RecordT((NUMBER, NUMBER)))
    assert lossy([2.0], ListT(NUMBER))
    assert not lossy([2.5], ListT(NUMBER))
    assert not lossy(True, BOOL)
    assert sql_visible((True, [1.0, 2.5]), RecordT((NUMBER, ListT(NUMBER)))) == (1, [1, 2.5])

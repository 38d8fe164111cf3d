"""A benchmark item's report crosses the xdist wire packed and arrives as it left (issue 12:
execnet's per-object serialisation was most of each side's cost per item under ``-n``)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from _pytest.reports import TestReport

from pytest_plsqlbench import wire

NODEID = "mbpp-plus/Mbpp-2/plus-004"


def serialised(**extra: Any) -> dict[str, Any]:
    report = TestReport(NODEID, (".", 0, NODEID), {"plus-004": 1, "plsql": 1, "Mbpp-2": 1}, "failed", None, "call",
                        user_properties=[("task_id", "Mbpp/2"), ("turn", 1), ("failure_class", "wrong_output")],
                        plsql={"task_id": "Mbpp/2", "passed": False, "score": 0.0, "expected": ["1"], "actual": None,
                               "message": "caf\u00e9 \ud800 \x00 'quoted'", "extra": {"retried": True}},
                        **extra)
    data = report._to_json()  # noqa: SLF001 - what pytest hands the serialisation hook
    data["$report_type"] = "TestReport"
    return data


def test_packed_parts_travel_as_one_string_and_come_back_equal() -> None:
    data = serialised()
    before = copy.deepcopy(data)
    wire.pack(data)
    assert isinstance(data[wire.PACKED], str)
    assert not set(wire.PARTS) & set(data)
    wire.unpack(data)
    assert data == before
    assert all(type(p) is tuple for p in data["user_properties"])
    rebuilt = TestReport._from_json(data)  # noqa: SLF001
    assert rebuilt.plsql == before["plsql"] and rebuilt.user_properties == before["user_properties"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("part", "value"),
    [
        ("user_properties", [("task_id", "Mbpp/2"), ("seen", ("a", "b"))]),  # a tuple value: JSON gives a list
        ("user_properties", [("weights", {1: 2})]),  # a non-string key
        ("plsql", {"task_id": "Mbpp/2", "facts": (1, 2)}),
        ("keywords", {"plsql": 1, "odd": float("nan")}),
    ],
)
def test_a_part_json_would_change_travels_as_before(part: str, value: Any) -> None:
    data = serialised()
    data[part] = value
    original = copy.deepcopy(data)
    wire.pack(data)
    assert part in data  # travels as it is
    assert part not in json.loads(data.get(wire.PACKED, "{}"))
    wire.unpack(data)
    assert json.dumps(data, sort_keys=True, default=repr) == json.dumps(original, sort_keys=True, default=repr)


def test_other_reports_and_unpacked_data_are_left_alone() -> None:
    data = serialised()
    data["nodeid"] = "tests/test_x.py::test_y"
    before = copy.deepcopy(data)
    wire.pack(data)
    assert data == before
    wire.unpack(data)
    assert data == before

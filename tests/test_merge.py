"""``plsqlbench merge``: shards of one run give the unsharded aggregates; parts of different runs are refused."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_plsqlbench.cli import main
from pytest_plsqlbench.reporting.merge import MergeError, merge_documents
from pytest_plsqlbench.results import build_document

from test_results_e2e import by_task, smoke_run

AGGREGATES = ("subsets", "overall", "failure_classes", "failure_units", "usage", "statistics")


def per_task(doc: dict[str, Any]) -> dict[str, tuple]:
    keys = (
        "test_pass",
        "suite_pass",
        "turn_suite_pass",
        "episode_pass",
        "excluded",
        "n_samples",
        "n_passing_samples",
    )
    return {
        tid: (
            tuple(t[k] for k in keys),
            sorted(
                (x["sample"], x["turn"], x["test_id"], x["passed"], x["failure_class"]) for x in t["tests"]
            ),
        )
        for tid, t in by_task(doc).items()
    }


@pytest.mark.slow
def test_two_shards_merged_equal_the_unsharded_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = smoke_run()
    one, two = smoke_run("--plsql-shard=1/2"), smoke_run("--plsql-shard=2/2")
    assert one["doc"]["header"]["shard"] == "1/2" and two["doc"]["header"]["shard"] == "2/2"
    names_one, names_two = set(by_task(one["doc"])), set(by_task(two["doc"]))
    assert names_one and names_two and not names_one & names_two
    assert names_one | names_two == set(by_task(whole["doc"]))
    # Not a trivial 100% run: the wrong answers show in the aggregates.
    assert whole["doc"]["subsets"]["smoke"]["suite_pass"] < 1.0
    assert whole["doc"]["subsets"]["smoke"]["mean_test_pass"] < 1.0

    out = tmp_path / "all.json"
    assert main(["merge", str(two["results"]), str(one["results"]), "-o", str(out)]) == 0
    merged = json.loads(out.read_text())
    for key in AGGREGATES:
        assert merged[key] == whole["doc"][key], key
    assert per_task(merged) == per_task(whole["doc"])
    assert merged["header"]["shard"] is None
    assert sorted(p["shard"] for p in merged["header"]["merged_from"]) == ["1/2", "2/2"]
    # The merged summary is printed, from the merged aggregates.
    assert "Mean Test Pass@1" in capsys.readouterr().out
    # ... and a shard alone is not the whole: its aggregates differ.
    assert one["doc"]["subsets"]["smoke"]["tasks"] < merged["subsets"]["smoke"]["tasks"]


# --------------------------------------------------------------------------- refusals (no database)
def _task(task_id: str, passed: list[bool], subset: str = "s") -> dict[str, Any]:
    return {
        "subset": subset,
        "task_id": task_id,
        "n_turns": 1,
        "metadata": {},
        "markers": [],
        "answers": [],
        "tests": [
            {
                "turn": 1,
                "test_id": f"t{i}",
                "sample": 0,
                "passed": ok,
                "failure_class": "passed" if ok else "wrong_output",
            }
            for i, ok in enumerate(passed)
        ],
    }


def _doc(tasks: list[dict[str, Any]], shard: str | None = None, **header: Any) -> dict[str, Any]:
    base = {
        "plugin_version": "0.1.0",
        "dialect": "postgres",
        "database": "embedded",
        "database_version": "PostgreSQL 18.6",
        "model": "m",
        "temperature": 0.0,
        "max_tokens": 8192,
        "samples": 1,
        "assertions": "null-safe",
        "timeout_s": 10.0,
        "safety": "block",
        "shard": shard,
        "subsets": ["s"],
        "data_revisions": {"s": "r1"},
        "started": "2026-01-01T00:00:00+00:00",
        "finished": "2026-01-01T00:01:00+00:00",
    }
    base.update(header)
    return build_document(base, tasks, {"s": {"paper": {}}})


def test_merge_of_in_memory_parts_equals_the_whole() -> None:
    tasks = [_task("a", [True, False, True]), _task("b", [False, True, True]), _task("c", [True, True])]
    whole = _doc(copy.deepcopy(tasks))
    merged = merge_documents([("x", _doc(tasks[:1], "1/2")), ("y", _doc(tasks[1:], "2/2"))])
    for key in AGGREGATES:
        assert merged[key] == whole[key], key


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model": "other"}, "model: x has 'm'; y has 'other'"),
        ({"temperature": 0.7}, "temperature"),
        ({"samples": 5}, "samples"),
        ({"data_revisions": {"s": "r2"}}, "data revision of s: x has r1; y has r2"),
        ({"plugin_version": "0.2.0"}, "plugin_version"),
        ({"database_version": "PostgreSQL 17.2"}, "database_version"),
        # The same alias resolved to another model, or another answers file of the same name.
        ({"model_resolved": "anthropic/claude-sonnet-4-6"}, "model_resolved: x has None"),
        ({"answers_digest": "sha256:0123456789abcdef"}, "answers_digest"),
    ],
)
def test_parts_of_different_runs_are_refused_with_one_message(change: dict[str, Any], message: str) -> None:
    a = _doc([_task("a", [True])], "1/2")
    b = _doc([_task("b", [False])], "2/2", **change)
    with pytest.raises(MergeError) as info:
        merge_documents([("x", a), ("y", b)])
    assert "not parts of one run" in str(info.value) and message in str(info.value)


def test_data_revisions_must_agree_even_for_a_subset_no_part_scored() -> None:
    a = _doc([_task("a", [True])], "1/2", subsets=["s", "t"], data_revisions={"s": "r1", "t": "m1"})
    b = _doc([_task("b", [True])], "2/2", subsets=["s", "t"], data_revisions={"s": "r1", "t": "m2"})
    with pytest.raises(MergeError, match="data revision of t: x has m1; y has m2"):
        merge_documents([("x", a), ("y", b)])


def test_the_merged_revision_is_the_one_of_the_parts_that_read_the_data() -> None:
    """A -k split by subset: the part without tasks of s has only a fallback revision for it."""
    revs = {"s": "read-s", "t": "fallback-t"}
    a = _doc([_task("a", [True])], subsets=["s", "t"], data_revisions=revs)
    b = _doc([_task("c", [True], subset="t")], subsets=["s", "t"], data_revisions={"s": "fallback-s", "t": "read-t"})
    for parts in ([("x", a), ("y", b)], [("y", b), ("x", a)]):
        merged = merge_documents(parts)
        assert merged["header"]["data_revisions"] == {"s": "read-s", "t": "read-t"}


def test_overlapping_tasks_are_refused() -> None:
    a = _doc([_task("a", [True]), _task("b", [True])])
    b = _doc([_task("b", [False]), _task("c", [True])])
    with pytest.raises(MergeError, match=r"overlap: 1 task\(s\) appear twice: s/b \(x and y\)"):
        merge_documents([("x", a), ("y", b)])


def test_missing_or_repeated_shards_are_refused() -> None:
    parts = [("x", _doc([_task("a", [True])], "1/3")), ("y", _doc([_task("b", [True])], "2/3"))]
    with pytest.raises(MergeError, match=r"shard\(s\) 3/3 missing"):
        merge_documents(parts)
    assert merge_documents(parts, allow_partial=True)["subsets"]["s"]["tasks"] == 2
    with pytest.raises(MergeError, match="shard 1/3 given twice"):
        merge_documents(
            [("x", _doc([_task("a", [True])], "1/3")), ("y", _doc([_task("b", [True])], "1/3"))], True
        )


def test_merge_cli_reports_refusal_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_doc([_task("a", [True])])))
    b.write_text(json.dumps(_doc([_task("b", [True])], model="other")))
    assert main(["merge", str(a), str(b), "-o", str(tmp_path / "all.json")]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("plsqlbench: error: these results are not parts of one run") and "Traceback" not in err
    )
    assert not (tmp_path / "all.json").exists()

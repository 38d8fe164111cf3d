"""``plsqlbench compare``: paired deltas, McNemar, flipped tasks, and refusal of runs that do not compare."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pytest_plsqlbench.cli import main
from pytest_plsqlbench.reporting.compare import NotComparable, compare, mcnemar_exact, noncomparable_reasons
from pytest_plsqlbench.results import build_document

HEADER = {
    "plugin_version": "0.1.0",
    "dialect": "postgres",
    "database": "embedded",
    "assertions": "nullsafe",
    "timeout_s": 10.0,
    "safety": "enforce",
    "samples": 1,
    "subsets": ["smoke"],
    "data_revisions": {"smoke": "sha256:abc"},
}


def run(model: str, passing: dict[str, list[bool]], **header: Any) -> dict[str, Any]:
    """A results document whose task ``tid`` has one test per entry of ``passing[tid]``."""
    tasks = [
        {
            "subset": "smoke",
            "task_id": tid,
            "node": tid,
            "n_turns": 1,
            "n_tests": len(results),
            "tests": [
                {"turn": 1, "test_id": f"t{i}", "sample": 0, "passed": ok,
                 "failure_class": "passed" if ok else "wrong_output"}
                for i, ok in enumerate(results)
            ],
        }
        for tid, results in passing.items()
    ]
    return build_document({**HEADER, "model": model, **header}, tasks)


A = {"t1": [True, True], "t2": [True, False], "t3": [False, False], "t10": [True, True], "t2b": [True, True]}
B = {"t1": [True, True], "t2": [True, True], "t3": [True, False], "t10": [False, True], "t2b": [True, True]}


def test_deltas_are_paired_means_over_tasks() -> None:
    comp = compare(run("a", A), run("b", B), ("a", "b"))
    (sub,) = comp.subsets
    by = {m.metric: m for m in sub.metrics}
    # test_pass per task: A = 1, .5, 0, 1, 1 ; B = 1, 1, .5, .5, 1 -> diffs 0, .5, .5, -.5, 0
    assert math.isclose(by["mean_test_pass"].delta, 0.1)
    assert by["mean_test_pass"].paired_tasks == 5
    lo, hi = by["mean_test_pass"].ci
    assert lo <= 0.1 <= hi and lo < hi
    # suite: A passes t1, t10, t2b; B passes t1, t2, t2b -> gained t2, lost t10
    assert math.isclose(by["suite_pass"].delta, 0.0)
    assert sub.gained == ["t2"] and sub.lost == ["t10"]
    assert sub.mcnemar_p == 1.0
    # Single-turn runs have no multi-turn metrics to compare.
    assert "episode_pass" not in by


def test_mcnemar_exact_values() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert math.isclose(mcnemar_exact(0, 5), 2 / 32)
    assert math.isclose(mcnemar_exact(1, 9), 2 * 11 / 1024)
    assert mcnemar_exact(3, 3) == 1.0


def test_excluded_tasks_are_left_out_of_the_pairs() -> None:
    b = dict(run("b", B))  # a plain copy: its edited task entries are what is read
    for task in b["tasks"]:
        if task["task_id"] == "t3":
            task["excluded"] = "1 infrastructure"
    (sub,) = compare(run("a", A), b).subsets
    assert sub.unpaired == ["t3"]
    assert {m.metric: m.paired_tasks for m in sub.metrics}["suite_pass"] == 4


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"dialect": "oracle"}, "different dialect"),
        ({"timeout_s": 2.0}, "different timeout_s"),
        ({"task_timeout_s": 30.0}, "different task_timeout_s"),
        ({"missing": "exclude"}, "different missing"),
        ({"max_output": 100}, "different max_output"),
        ({"keep_constant_tasks": True}, "different keep_constant_tasks"),
        ({"data_revisions": {"smoke": "sha256:other"}}, "different data revisions"),
        ({"interrupted": "KeyboardInterrupt"}, "was interrupted"),
    ],
)
def test_runs_that_differ_in_more_than_the_model_are_refused(change: dict[str, Any], why: str) -> None:
    a, b = run("a", A), run("b", B, **change)
    assert any(why in r for r in noncomparable_reasons(a, b))
    with pytest.raises(NotComparable, match=why):
        compare(a, b)
    assert compare(a, b, force=True).reasons


def test_different_subsets_are_refused() -> None:
    b = run("b", B)
    b["subsets"]["mbpp"] = b["subsets"]["smoke"]
    assert any("different subsets" in r and "only the second has mbpp" in r for r in noncomparable_reasons(run("a", A), b))


def test_cli_text_markdown_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pa, pb, pc = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    pa.write_text(json.dumps(run("model-a", A)))
    pb.write_text(json.dumps(run("model-b", B)))
    pc.write_text(json.dumps(run("model-c", A)))
    assert main(["compare", str(pa), str(pb), str(pc)]) == 0
    out = capsys.readouterr().out
    assert "A = model-a" in out and "B = model-b" in out and "B = model-c" in out
    assert "gained by B (1): t2" in out and "lost by B (1): t10" in out
    assert "+10.00" in out  # Mean Test Pass@1 delta of model-b, in points
    md = tmp_path / "c.md"
    assert main(["compare", str(pa), str(pb), "--format", "markdown", "-o", str(md)]) == 0
    assert "| smoke | Suite Pass@1 | 60.00 | 60.00 | +0.00 |" in md.read_text()
    page = tmp_path / "c.html"
    assert main(["compare", str(pa), str(pb), "--format", "html", "-o", str(page)]) == 0
    html = page.read_text()
    assert html.count('class="bar"') == 4  # two metrics x two models, in one chart
    assert 'data-group="smoke · model-a"' in html and 'data-group="smoke · model-b"' in html
    assert "<script" not in html and "http" not in html.split("</title>", 1)[1].replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_cli_refuses_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(run("a", A)))
    pb.write_text(json.dumps(run("b", B, dialect="oracle")))
    assert main(["compare", str(pa), str(pb)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not comparable" in err and "different dialect" in err
    assert main(["compare", str(pa)]) == 2
    assert "at least two results files" in capsys.readouterr().err

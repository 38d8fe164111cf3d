"""``plsqlbench leaderboard``: an entry that fits plsqlbench.github.io's ``data/leaderboard.json``.

ENTRY_SCHEMA restates, as a JSON schema, the facts of the site's own file (its versions of
2026-06-17 and 2026-08-16): the fields of an entry, the task ids under ``scores``, which metric
ids each kind of task reports, and that scores are percentages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_plsqlbench.cli import main
from pytest_plsqlbench.errors import UsageError
from pytest_plsqlbench.reporting.leaderboard import entry, noncomparable_reasons
from pytest_plsqlbench.results import build_document, write_document
from pytest_plsqlbench.summary import summary_lines

PERCENT = {"type": "number", "minimum": 0, "maximum": 100}
SINGLE_TURN = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": False,
    "properties": {"mean_test_pass": PERCENT, "suite_pass": PERCENT},
}
MULTI_TURN = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": False,
    "properties": {"mean_test_pass": PERCENT, "episode_pass": PERCENT, "turn_suite_pass": PERCENT},
}
OVERALL = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": False,
    "properties": {m: PERCENT for m in ("mean_test_pass", "suite_pass", "episode_pass", "turn_suite_pass")},
}
ENTRY_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["method", "organization", "category", "date", "setting", "link", "scores"],
    "additionalProperties": False,
    "properties": {
        "method": {"type": "string", "minLength": 1},
        "organization": {"type": "string"},
        "category": {"type": "string"},
        "date": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
        "setting": {"type": "string"},
        "link": {"type": "string"},
        # Ours, not the site's: why an entry does not compare with the paper (removed before submitting).
        "note": {"type": "string"},
        "scores": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "development_overall": OVERALL,
                "test_overall": OVERALL,
                "overall": OVERALL,
                "overall_test": {**OVERALL, "properties": {"mean_test_pass": PERCENT}},
                "mbpp": SINGLE_TURN,
                "spider": SINGLE_TURN,
                "stack": SINGLE_TURN,
                "spider2_st_dev": SINGLE_TURN,
                "mbpp_plus": SINGLE_TURN,
                "spider2_st_test": SINGLE_TURN,
                "spider2_mt_dev": MULTI_TURN,
                "spider2_mt_test": MULTI_TURN,
            },
        },
    },
}

SUBSETS = {  # our subset -> (leaderboard key, split, comparable metric, multi-turn)
    "mbpp": ("mbpp", "dev", "suite_pass", False),
    "spider": ("spider", "dev", "mean_test_pass", False),
    "spider2-st-dev": ("spider2_st_dev", "dev", "mean_test_pass", False),
    "spider2-mt-dev": ("spider2_mt_dev", "dev", "mean_test_pass", True),
    "mbpp-plus": ("mbpp_plus", "test", "suite_pass", False),
    "spider2-st-test": ("spider2_st_test", "test", "mean_test_pass", False),
    "spider2-mt-test": ("spider2_mt_test", "test", "mean_test_pass", True),
}


def _tests(turns: list[list[bool]]) -> list[dict[str, Any]]:
    return [
        {
            "turn": t,
            "test_id": f"c{i}",
            "sample": 0,
            "passed": ok,
            "failure_class": "passed" if ok else "wrong_output",
        }
        for t, outcomes in enumerate(turns, 1)
        for i, ok in enumerate(outcomes)
    ]


def full_run(subsets: dict[str, tuple[str, str, str, bool]] = SUBSETS, **header_changes: Any) -> dict[str, Any]:
    """Two tasks per subset: one at 1/2 of its tests, one fully passed (multi-turn: 2 turns)."""
    tasks = []
    for name, (_, _, _, multi) in subsets.items():
        if multi:
            tasks += [
                {
                    "subset": name,
                    "task_id": "a",
                    "n_turns": 2,
                    "tests": _tests([[True, True], [True, False]]),
                },
                {"subset": name, "task_id": "b", "n_turns": 2, "tests": _tests([[True], [True]])},
            ]
        else:
            tasks += [
                {"subset": name, "task_id": "a", "n_turns": 1, "tests": _tests([[True, False]])},
                {"subset": name, "task_id": "b", "n_turns": 1, "tests": _tests([[True, True]])},
            ]
    info = {
        name: {"paper": {"leaderboard": key, "split": split, "comparable_metric": cmp}}
        for name, (key, split, cmp, _) in subsets.items()
    }
    header = {
        "plugin_version": "0.1.0",
        "model": "m",
        "samples": 1,
        "dialect": "oracle",
        "assertions": "published",
        "subsets": list(subsets),
        **header_changes,
    }
    return build_document(header, tasks, info)


def test_schema_accepts_a_site_shaped_entry_and_rejects_wrong_keys() -> None:
    good = {
        "method": "X",
        "organization": "Direct generation",
        "category": "Proprietary",
        "date": "2026-08-16",
        "setting": "Direct generation",
        "link": "",
        "scores": {
            "overall_test": {"mean_test_pass": 50.5},
            "mbpp": {"mean_test_pass": 80.0, "suite_pass": 80.0},
            "spider2_mt_test": {"mean_test_pass": 60.0, "episode_pass": 20.0, "turn_suite_pass": 40.0},
        },
    }
    jsonschema.validate(good, ENTRY_SCHEMA)
    for bad in (
        {**good, "scores": {"spider2_st": {"mean_test_pass": 1.0}}},  # a key the site dropped
        {**good, "scores": {"mbpp": {"episode_pass": 1.0}}},  # a single-turn set has no Episode Pass
        {**good, "scores": {"mbpp": {"mean_test_pass": 0.8 * 1000}}},  # not a percentage
        {**{k: v for k, v in good.items() if k != "setting"}},
        {**good, "run": {}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, ENTRY_SCHEMA)


def test_entry_validates_against_the_sites_schema_with_hand_computed_scores() -> None:
    result, notes = entry(
        full_run(), method="My-Model", organization="Lab", category="Proprietary", date="2026-09-01"
    )
    jsonschema.validate(result, ENTRY_SCHEMA)
    scores = result["scores"]
    # Single-turn: mean test (0.5 + 1) / 2 = 75, suite 1/2 = 50. MBPP's figure is our Suite Pass.
    assert scores["spider"] == {"mean_test_pass": 75.0, "suite_pass": 50.0}
    assert scores["mbpp"] == {"mean_test_pass": 50.0, "suite_pass": 50.0}
    assert scores["mbpp_plus"] == {"mean_test_pass": 50.0, "suite_pass": 50.0}
    # Multi-turn: episode a = 3/4, b = 1 -> 87.5; turn suite (1/2 + 1)/2 = 75; episode pass 1/2.
    assert scores["spider2_mt_dev"] == {"mean_test_pass": 87.5, "episode_pass": 50.0, "turn_suite_pass": 75.0}
    # Split means over the sets reporting each metric.
    assert scores["development_overall"] == {
        "mean_test_pass": round((50 + 75 + 75 + 87.5) / 4, 2),
        "suite_pass": 50.0,
        "episode_pass": 50.0,
        "turn_suite_pass": 75.0,
    }
    assert scores["test_overall"]["mean_test_pass"] == round((50 + 75 + 87.5) / 3, 2)
    assert scores["overall_test"] == {"mean_test_pass": scores["test_overall"]["mean_test_pass"]}
    assert any("mean_test_pass for 'mbpp' is our suite_pass" in n for n in notes)


@pytest.mark.parametrize("split", ["dev", "test"])
def test_summary_overall_equals_the_entrys_overall(split: str) -> None:
    """One function computes both: MBPP/MBPP+'s Suite Pass stands in for Mean Test Pass in each."""
    run = full_run()
    result, _ = entry(run, method="M", date="2026-09-01")
    site = result["scores"]["development_overall" if split == "dev" else "test_overall"]
    ours = run["overall"][split]
    assert set(ours) == set(site)
    for metric, value in site.items():
        assert f"{100 * ours[metric]:.2f}" == f"{value:.2f}", metric
    label = "Development overall" if split == "dev" else "Test overall"
    line = next(x for x in summary_lines(run, 0) if x.startswith(label))
    assert f"Mean Test Pass@1 {site['mean_test_pass']:.2f}" in line
    # MBPP's Mean Test Pass (75) is not what the overall takes: its Suite Pass (50) is.
    assert run["subsets"]["mbpp"]["mean_test_pass"] == 0.75


def test_overall_needs_every_dataset_of_its_split_unless_asked() -> None:
    partial = {k: v for k, v in SUBSETS.items() if k != "spider"}
    result, notes = entry(full_run(partial), method="M", date="2026-09-01")
    jsonschema.validate(result, ENTRY_SCHEMA)
    assert "development_overall" not in result["scores"] and "test_overall" in result["scores"]
    assert any("development_overall left out: the run lacks spider" in n for n in notes)
    forced, _ = entry(full_run(partial), method="M", date="2026-09-01", partial_overall=True)
    assert forced["scores"]["development_overall"]["mean_test_pass"] == round((50 + 75 + 87.5) / 3, 2)


def test_cli_prints_the_entry_and_refuses_runs_without_leaderboard_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.json"
    write_document(full_run(), path)
    assert (
        main(
            [
                "leaderboard",
                str(path),
                "--method",
                "My-Model",
                "--category",
                "Open-weight",
                "--organization",
                "Direct generation",
                "--date",
                "2026-09-01",
                "--link",
                "https://example.org",
            ]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    jsonschema.validate(printed, ENTRY_SCHEMA)
    assert (printed["method"], printed["category"], printed["date"]) == (
        "My-Model",
        "Open-weight",
        "2026-09-01",
    )

    unmapped = full_run({"smoke": ("", "", "", False)})
    for m in unmapped["subsets"].values():
        m["paper"] = {}
    write_document(unmapped, path)
    assert main(["leaderboard", str(path), "--method", "M"]) == 2
    assert "no subset of this run has a leaderboard key" in capsys.readouterr().err
    with pytest.raises(UsageError, match="--date must be YYYY-MM-DD"):
        entry(full_run(), method="M", date="1.9.2026")


NO_MBPP_PLUS = {k: v for k, v in SUBSETS.items() if k != "mbpp-plus"}


def partial_run() -> dict[str, Any]:
    """A run in which spider's task ``a`` ran 2 of its 3 tests (``-k``)."""
    run = full_run(NO_MBPP_PLUS)
    for t in run["tasks"]:
        t["n_tests"] = 3 if (t["subset"], t["task_id"]) == ("spider", "a") else len(t["tests"])
    return build_document(run["header"], run["tasks"], {k: {"paper": m["paper"]} for k, m in run["subsets"].items()})


def infra_run() -> dict[str, Any]:
    """A run in which spider's task ``a`` lost one test to an infrastructure error (a provider
    error still pending regeneration, say): the rest of its figures look perfect."""
    run = full_run(NO_MBPP_PLUS)
    for t in run["tasks"]:
        if (t["subset"], t["task_id"]) == ("spider", "a"):
            t["tests"][1]["failure_class"] = "infrastructure"
    return build_document(run["header"], run["tasks"], {k: {"paper": m["paper"]} for k, m in run["subsets"].items()})


@pytest.mark.parametrize(
    ("run", "reason"),
    [
        (infra_run(), "spider: 1 task(s) left out, wholly or in part, for infrastructure errors"),
        (full_run(NO_MBPP_PLUS, dialect="postgres"), "dialect postgres (the paper's figures are Oracle PL/SQL)"),
        (full_run(NO_MBPP_PLUS, assertions="null-safe"), "mbpp ran with --plsql-assertions=null-safe"),
        (full_run(assertions="null-safe"), "mbpp-plus ran with --plsql-assertions=null-safe"),
        (partial_run(), "spider: 1 task(s) ran only part of their tests"),
    ],
)
def test_noncomparable_runs_are_refused_unless_allowed_then_noted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], run: dict[str, Any], reason: str
) -> None:
    path = tmp_path / "r.json"
    write_document(run, path)
    assert main(["leaderboard", str(path), "--method", "M", "--date", "2026-09-01"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert captured.out == "" and len(err) == 1 and err[0].startswith("plsqlbench: error: leaderboard:")
    assert reason in err[0] and "--allow-noncomparable" in err[0]
    args = ["leaderboard", str(path), "--method", "M", "--date", "2026-09-01", "--allow-noncomparable"]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    jsonschema.validate(printed, ENTRY_SCHEMA)
    assert printed["note"].startswith("not comparable with the paper: ") and reason in printed["note"]


def test_a_test_without_a_reference_output_is_the_benchmarks_gap_not_a_hole_in_the_run() -> None:
    run = full_run(NO_MBPP_PLUS)
    for t in run["tasks"]:
        if (t["subset"], t["task_id"]) == ("spider", "a"):
            t["tests"][1].update(failure_class="infrastructure", extra={"reference_failed": True})
    doc = build_document(run["header"], run["tasks"], {k: {"paper": m["paper"]} for k, m in run["subsets"].items()})
    assert not any("infrastructure" in r for r in noncomparable_reasons(doc))
    assert any("infrastructure" in r for r in noncomparable_reasons(infra_run()))


def test_a_comparable_run_has_no_note_but_mbpp_plus_is_always_called_a_rebuild() -> None:
    result, _ = entry(full_run(NO_MBPP_PLUS), method="M", date="2026-09-01")
    assert "note" not in result
    result, notes = entry(full_run(), method="M", date="2026-09-01")
    assert "not comparable" not in result["note"]
    assert "rebuild" in result["note"] and "not the authors' withheld set" in result["note"]
    assert any("'note'" in n for n in notes)

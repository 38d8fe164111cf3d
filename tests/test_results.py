"""The results document: built from task entries alone, versioned, read strictly; the summary it prints."""

from __future__ import annotations

import copy
import hashlib
import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_plsqlbench.cli import main
from pytest_plsqlbench.loaders import mbpp as mbpp_loader
from pytest_plsqlbench.manifests import discover, load_manifest
from pytest_plsqlbench.results import (
    RESULTS_FORMAT,
    RESULTS_VERSION,
    RUN_IDENTITY,
    ResultsCollector,
    ResultsFormatError,
    TaskResult,
    TestOutcome,
    build_document,
    data_revisions,
    manifest_digest,
    read_document,
    read_results,
    score,
    usage_totals,
    write_document,
)
from pytest_plsqlbench.results.record import task_results
from pytest_plsqlbench.settings import Settings
from pytest_plsqlbench.summary import summary_lines, usage_line

HEADER = {
    "plugin_version": "0.1.0",
    "dialect": "postgres",
    "database": "embedded",
    "database_version": "PostgreSQL 18.6",
    "model": "openai/some-model",
    "temperature": 0.0,
    "max_tokens": 8192,
    "samples": 1,
    "assertions": "null-safe",
    "timeout_s": 10.0,
    "safety": "block",
    "shard": None,
    "subsets": ["mbpp", "s2mt"],
    "data_revisions": {"mbpp": "rev-a", "s2mt": "rev-b"},
}
PAPER = {
    "mbpp": {"paper": {"leaderboard": "mbpp", "split": "dev", "comparable_metric": "suite_pass"}},
    "s2mt": {
        "paper": {"leaderboard": "spider2_mt_dev", "split": "dev", "comparable_metric": "mean_test_pass"}
    },
}


def task(
    subset: str, task_id: str, turns: list[list[bool]], cls: str = "wrong_output", **extra: Any
) -> dict[str, Any]:
    tests = [
        {
            "turn": t,
            "test_id": f"case-{i}",
            "sample": 0,
            "passed": ok,
            "failure_class": "passed" if ok else cls,
        }
        for t, outcomes in enumerate(turns, 1)
        for i, ok in enumerate(outcomes)
    ]
    usage = {"model": "openai/some-model", "prompt_tokens": 1000, "completion_tokens": 200, "cost_usd": 0.01}
    answers = [
        {
            "turn": t,
            "sample": 0,
            "status": "ok",
            "source": "model",
            "cache_key": f"k-{task_id}-{t}",
            "usage": usage,
        }
        for t in range(1, len(turns) + 1)
    ]
    return {
        "subset": subset,
        "task_id": task_id,
        "n_turns": len(turns),
        "metadata": {},
        "markers": [],
        "answers": answers,
        "tests": tests,
        **extra,
    }


def sample_tasks() -> list[dict[str, Any]]:
    return [
        task("mbpp", "m1", [[True, True, False]], metadata={"difficulty": "simple"}),
        task(
            "mbpp", "m2", [[True, False, False]], cls="invalid_artifact", metadata={"difficulty": "advanced"}
        ),
        task("mbpp", "m3", [[True, True]], metadata={"difficulty": "simple"}),
        task("s2mt", "c1", [[True, True], [True, True], [True, False]], markers=["reasoning_aggregation"]),
        task("s2mt", "c2", [[True], [True]]),
    ]


def doc() -> dict[str, Any]:
    return build_document(HEADER, sample_tasks(), PAPER)


# --------------------------------------------------------------------------- building
def test_document_carries_header_aggregates_and_every_test() -> None:
    d = doc()
    assert (d["format"], d["version"]) == (RESULTS_FORMAT, RESULTS_VERSION)
    mbpp, s2mt = d["subsets"]["mbpp"], d["subsets"]["s2mt"]
    assert mbpp["mean_test_pass"] == pytest.approx((2 / 3 + 1 / 3 + 1) / 3)
    assert mbpp["suite_pass"] == pytest.approx(1 / 3)
    assert s2mt["episode_pass"] == pytest.approx(0.5) and s2mt["turn_suite_pass"] == pytest.approx(
        (2 / 3 + 1) / 2
    )
    assert mbpp["failure_units"]["invalid_artifact"] == 1 and mbpp["failure_units"]["wrong_output"] == 1
    assert mbpp["failure_classes"]["invalid_artifact"] == 2
    assert mbpp["paper"]["comparable_metric"] == "suite_pass" and mbpp["data_revision"] == "rev-a"
    assert set(mbpp["ci"]) == {"mean_test_pass", "suite_pass"}
    assert set(s2mt["ci"]) == {"mean_test_pass", "suite_pass", "turn_suite_pass", "episode_pass"}
    assert d["usage"]["prompt_tokens"] == 1000 * 8 and d["usage"]["cost_usd"] == pytest.approx(0.08)
    assert sum(len(t["tests"]) for t in d["tasks"]) == 3 + 3 + 2 + 6 + 2
    assert [a["cache_key"] for a in d["tasks"][-1]["answers"]] == ["k-c2-1", "k-c2-2"]
    # Development overall, as the site defines it: per metric, over the dev sets that report it, with
    # MBPP's comparable metric (Suite Pass) in the place of its Mean Test Pass, from two-decimal percents.
    dev = d["overall"]["dev"]
    assert dev["mean_test_pass"] == pytest.approx(
        round((round(100 * mbpp["suite_pass"], 2) + round(100 * s2mt["mean_test_pass"], 2)) / 2, 2) / 100
    )
    assert dev["suite_pass"] == pytest.approx(mbpp["suite_pass"], abs=5e-5)  # Spider2-MT: no Suite Pass
    assert dev["episode_pass"] == pytest.approx(s2mt["episode_pass"])


def test_document_does_not_depend_on_the_order_tasks_arrive_in() -> None:
    shuffled = sample_tasks()
    random.Random(3).shuffle(shuffled)
    for t in shuffled:
        random.Random(4).shuffle(t["tests"])
    assert build_document(HEADER, shuffled, PAPER) == doc()


def test_rebuilding_a_document_from_its_own_tasks_gives_it_back() -> None:
    d = doc()
    assert (
        build_document(
            d["header"],
            copy.deepcopy(d["tasks"]),
            {k: {"paper": v["paper"]} for k, v in d["subsets"].items()},
        )
        == d
    )


def test_tasks_that_ran_only_part_of_their_tests_are_marked_and_said() -> None:
    tasks = [
        task("mbpp", "m1", [[True, True]], n_tests=3),  # -k left one test out
        task("mbpp", "m2", [[True, False, True]], n_tests=3),
        task("mbpp", "m3", [[True, True]]),  # no n_tests: cannot tell
        task("s2mt", "c1", [[True], [True]], n_tests=3),  # a turn's test deselected
    ]
    d = build_document(HEADER, tasks, PAPER)
    by_id = {t["task_id"]: t for t in d["tasks"]}
    assert (by_id["m1"]["incomplete"], by_id["m1"]["tests_run"]) == (True, 2)
    assert (by_id["m2"]["incomplete"], by_id["m2"]["tests_run"]) == (False, 3)
    assert by_id["m3"]["incomplete"] is False and by_id["c1"]["incomplete"] is True
    assert d["subsets"]["mbpp"]["incomplete_tasks"] == ["m1"]
    assert d["subsets"]["s2mt"]["incomplete_tasks"] == ["c1"]
    # They stay in the metrics, scored on the tests that ran.
    assert d["subsets"]["mbpp"]["tasks"] == 3 and by_id["m1"]["suite_pass"] == 1.0
    text = "\n".join(summary_lines(d, 0))
    assert (
        "mbpp: 1 task(s) ran only part of their tests (-k, -m, -x/--maxfail, --lf or --deselect); "
        "they stay in the metrics, scored on the tests that ran: m1" in text
    )
    assert "2 task(s) ran only part of their tests" in "\n".join(summary_lines(d, -1))
    # Rebuilding (merge) gives the same marks.
    assert build_document(d["header"], copy.deepcopy(d["tasks"]), PAPER) == d


def test_a_sample_left_out_makes_the_task_incomplete() -> None:
    entry = task("mbpp", "m1", [[True]], n_tests=1)
    d = build_document({**HEADER, "samples": 2}, [entry], PAPER)
    assert d["tasks"][0]["incomplete"] is True and d["subsets"]["mbpp"]["incomplete_tasks"] == ["m1"]
    second = {**entry["tests"][0], "sample": 1}
    d = build_document({**HEADER, "samples": 2}, [{**entry, "tests": [*entry["tests"], second]}], PAPER)
    assert d["tasks"][0]["incomplete"] is False


# --------------------------------------------------------------------------- reading and writing
def test_write_then_read_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "r.json"
    write_document(doc(), path)
    assert read_document(path) == doc()
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]  # no temporary file left


def test_a_file_reads_back_into_the_typed_records_and_scores_as_written(tmp_path: Path) -> None:
    """The file's task entries are TaskResults with TestOutcomes; its figures are not read but
    derived again by the one scoring function, which gives the document that was written."""
    path = tmp_path / "r.json"
    write_document(doc(), path)
    results = read_results(path)
    assert results.header == HEADER and results.subset_info["s2mt"]["paper"] == PAPER["s2mt"]["paper"]
    assert all(isinstance(t, TaskResult) and all(isinstance(x, TestOutcome) for x in t.tests) for t in results.tasks)
    first = results.tasks[0]
    assert (first.subset, first.task_id, first.tests[0].subset, first.tests[0].task_id) == ("mbpp", "m1", "mbpp", "m1")
    assert "suite_pass" not in first.to_json() and [t.to_json()["tests"] for t in results.tasks] == [
        t["tests"] for t in doc()["tasks"]
    ]
    assert score(results) == doc()


def test_the_scored_records_are_the_written_entries_with_their_figures(tmp_path: Path) -> None:
    """What the reports read (the scorer's TaskResults, figures included) is what the file holds:
    the same records as its task entries read back, each giving its entry again."""
    scored = doc()
    held = task_results(scored)
    path = tmp_path / "r.json"
    write_document(scored, path)
    again = read_document(path)
    assert held == task_results(dict(again)) == task_results(again)  # parsed from the entries, or kept
    assert [t.to_json() for t in held] == scored["tasks"]
    assert held[0].figures["suite_pass"] is not None and "tests" not in held[0].figures


def test_the_typed_reader_refuses_an_older_file_naming_its_version_and_what_to_do(tmp_path: Path) -> None:
    d = doc()
    d["version"] = RESULTS_VERSION - 1
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ResultsFormatError) as info:
        read_results(path)
    assert str(info.value) == (
        f"{path}: results file is older (version 1); re-run the benchmark, or re-score it from the answer "
        "cache with --plsql-cache-only, to get a version 2 file"
    )


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(version=RESULTS_VERSION - 1), "is older (version 1); re-run the benchmark"),
        (lambda d: d.update(version=RESULTS_VERSION + 1), f"is newer (version {RESULTS_VERSION + 1}) than"),
        (lambda d: d.update(version="2.0"), "of unknown version '2.0'"),
        (lambda d: d.update(format="something-else"), "not a pytest-plsqlbench results file"),
        (lambda d: d.pop("tasks"), "lacks 'tasks'"),
    ],
)
def test_reader_gives_one_clear_error_for_other_files(tmp_path: Path, mutate: Any, message: str) -> None:
    d = doc()
    mutate(d)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ResultsFormatError, match=r".*") as info:
        read_document(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)


def test_reader_rejects_non_json_and_the_cli_prints_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.json"
    path.write_text("{half a file")
    with pytest.raises(ResultsFormatError, match="not JSON"):
        read_document(path)
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("plsqlbench: error:") and "not JSON" in err[0]


def _break_first_task(key: str, value: Any = None) -> Any:
    def mutate(d: dict[str, Any]) -> None:
        if value is None:
            d["tasks"][0].pop(key)
        else:
            d["tasks"][0][key] = value

    return mutate


MALFORMED = [
    (lambda d: d["header"].update(shard="2of2"), "header: shard '2of2' is not I/N"),
    (lambda d: d["header"].update(shard="3/2"), "header: shard '3/2' is not I/N"),
    (_break_first_task("task_id"), "task entry 1: no 'task_id'"),
    (_break_first_task("subset", 7), "task entry 1: no 'subset'"),
    (_break_first_task("tests", "all passed"), "task entry 1 (mbpp/m1): 'tests' is not a list of objects"),
    (lambda d: d["tasks"][0]["tests"][0].pop("test_id"), "task entry 1 (mbpp/m1): test 1 has no 'test_id'"),
    (lambda d: d["tasks"][0]["tests"][0].update(turn="1"), "turn '1' is not a turn number"),
    (lambda d: d["tasks"][0]["tests"][0].update(passed="yes"), "'passed' is not true/false"),
    (_break_first_task("n_turns", 0), "n_turns 0 is not a positive integer"),
    (lambda d: d["tasks"].append("m9"), "task entry 6: not an object"),
    (lambda d: d.update(tasks={"m1": {}}), "'tasks' must be a list"),
    (lambda d: d.update(subsets=[]), "'subsets' must map subset names to objects"),
]


@pytest.mark.parametrize(("mutate", "message"), MALFORMED)
def test_reader_validates_every_task_entry(tmp_path: Path, mutate: Any, message: str) -> None:
    d = doc()
    mutate(d)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ResultsFormatError) as info:
        read_document(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)


@pytest.mark.parametrize("command", ["report", "leaderboard", "merge"])
@pytest.mark.parametrize(("mutate", "message"), [MALFORMED[0], MALFORMED[2]])
def test_commands_on_a_malformed_file_give_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, mutate: Any, message: str
) -> None:
    bad, good = doc(), doc()
    mutate(bad)
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    write_document(good, tmp_path / "good.json")
    args = {
        "report": ["report", str(tmp_path / "bad.json")],
        "leaderboard": ["leaderboard", str(tmp_path / "bad.json"), "--method", "M"],
        "merge": ["merge", str(tmp_path / "good.json"), str(tmp_path / "bad.json"), "-o", str(tmp_path / "m.json")],
    }[command]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("plsqlbench: error:") and message in err[0]


# --------------------------------------------------------------------------- data revisions
def test_manifest_digest_covers_the_task_folder(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "a.yaml").write_text("id: a\n")
    (tmp_path / "mine.yaml").write_text("name: mine\nloader: yaml\noptions: {dir: mine}\n")
    first = manifest_digest(load_manifest(tmp_path / "mine.yaml"))
    assert first == manifest_digest(load_manifest(tmp_path / "mine.yaml")) and first.startswith("sha256:")
    (tmp_path / "mine" / "a.yaml").write_text("id: a\nprompt: changed\n")
    assert manifest_digest(load_manifest(tmp_path / "mine.yaml")) != first


def test_converted_mbpp_tasks_report_the_sha256_of_the_input_they_read(tmp_path: Path) -> None:
    rows = [
        {
            "task_id": "Mbpp/901",
            "prompt": '"""\nWrite a function that adds 1.\n"""',
            "entry_point": "add_1",
            "canonical_solution": "def add_1(x):\n    return x + 1\n",
            "base_input": [[1], [2]],
            "plus_input": [[3]],
            "atol": 0,
            "assertion": "assert add_1(1) == 2\n",
        }
    ]
    src = tmp_path / "MbppPlus.jsonl"
    src.write_text(json.dumps(rows[0]) + "\n")
    settings = Settings.of(subsets=("mbpp-plus",), data_cache=tmp_path / "cache", sources={"mbppplus": src})
    manifest = discover()["mbpp-plus"]

    def load() -> list[Any]:
        return mbpp_loader.pytest_plsql_load_subset(config=None, manifest=manifest, settings=settings)

    want = "sha256:" + hashlib.sha256(src.read_bytes()).hexdigest()[:16]
    tasks = load()
    assert {t.metadata["data_revision"] for t in tasks} == {want}
    assert {t.metadata["data_revision"] for t in load()} == {want}  # read back from the cache
    entries = [TaskResult(t.subset, t.id, metadata=dict(t.metadata)) for t in tasks]
    # The header names it, not the manifest's pinned checksum (which this local copy does not match).
    assert data_revisions(settings, entries)["mbpp-plus"] == want


def test_header_carries_the_answers_files_digest(tmp_path: Path) -> None:
    class Config:
        def getoption(self, name: str, default: Any = None) -> Any:
            return default

        def getini(self, name: str) -> Any:
            return None

    digests = []
    for folder, text in [("one", '{"task_id": "a", "answer": "x"}\n'), ("two", '{"task_id": "a", "answer": "y"}\n')]:
        path = tmp_path / folder / "answers.jsonl"
        path.parent.mkdir()
        path.write_text(text)
        settings = Settings.of(subsets=("smoke",), answers=path)
        header = ResultsCollector(Config(), settings).header()  # type: ignore[arg-type]
        assert header["model"] == "answers:answers.jsonl"
        digests.append(header["answers_digest"])
    assert digests[0] != digests[1] and all(d.startswith("sha256:") for d in digests)
    assert "answers_digest" in RUN_IDENTITY


def test_header_records_every_setting_that_changes_a_score() -> None:
    """compare refuses runs that differ in these, so each must be written (a missing key reads as equal)."""
    from pytest_plsqlbench.reporting.compare import SCORING_SETTINGS

    class Config:
        def __init__(self, keep: bool | None) -> None:
            self.keep = keep

        def getoption(self, name: str, default: Any = None) -> Any:
            return self.keep if name == "plsql_keep_constant_tasks" else default

        def getini(self, name: str) -> Any:
            return False

    settings = Settings.of(subsets=("smoke",), model="reference", task_timeout=42.0, missing="exclude", max_output=77)
    header = ResultsCollector(Config(True), settings).header()  # type: ignore[arg-type]
    assert set(SCORING_SETTINGS) <= set(header)
    assert (header["task_timeout_s"], header["missing"], header["max_output"]) == (42.0, "exclude", 77)
    assert header["keep_constant_tasks"] is True
    assert ResultsCollector(Config(None), settings).header()["keep_constant_tasks"] is False  # type: ignore[arg-type]


# --------------------------------------------------------------------------- usage
GENERATED = {"model": "openai/gpt-5.4", "prompt_tokens": 1000, "completion_tokens": 500, "cost_usd": 0.01,
             "latency_s": 2.0, "status": "ok", "cached": False}
CACHED = {**GENERATED, "prompt_tokens": 7000, "completion_tokens": 3000, "cost_usd": 0.02, "cached": True}
FAILED = {"model": "openai/gpt-5.4", "attempts": 6, "status": "error", "cached": False}
UNPRICED = {"model": "openai/gpt-5.4", "prompt_tokens": 10, "completion_tokens": 5, "cost_usd": None,
            "latency_s": 4.0, "status": "ok", "cached": False}


def _answers(*usages: dict[str, Any], status: str = "ok") -> list[dict[str, Any]]:
    return [
        {"turn": 1, "sample": n, "status": u.get("status", status), "source": "model", "usage": u}
        for n, u in enumerate(usages)
    ]


def test_cached_answers_tokens_are_not_this_runs() -> None:
    answers = [*_answers(GENERATED, CACHED, FAILED, UNPRICED), *_answers({}, status="not_generated")]
    answers[-1]["sample"] = 4
    u = usage_totals(answers)
    assert (u["answers"], u["generated"], u["cached"], u["failed"], u["not_generated"]) == (5, 2, 1, 1, 1)
    assert (u["prompt_tokens"], u["completion_tokens"]) == (1010, 505)  # this run's only
    assert (u["cached_prompt_tokens"], u["cached_completion_tokens"]) == (7000, 3000)
    assert u["cost_usd"] == pytest.approx(0.01) and u["cached_cost_usd"] == pytest.approx(0.02)
    assert u["cost_unknown"] == 1 and u["latency_mean_s"] == pytest.approx(3.0)  # cached: no time now
    line = usage_line(u)
    assert line is not None
    assert line.startswith("generation (openai/gpt-5.4): 5 answers: 2 generated, 1 cached, 1 failed, 1 not generated")
    assert "; tokens 1,010 in / 505 out; cached answers: 7,000 in / 3,000 out, not this run's; " in line
    assert "cost $0.0100 (+$0.0200 paid earlier for cached answers), unknown for 1 answer(s)" in line
    assert "latency mean 3.00s p95 4.00s" in line


def test_reference_answers_give_no_usage_line() -> None:
    answers = [{"turn": 1, "sample": 0, "status": "ok", "source": "reference", "usage": {}}]
    assert usage_line(usage_totals(answers)) is None


def test_an_answer_recorded_twice_after_a_worker_crash_counts_once() -> None:
    """The crashed worker reported turn 1's answer; the rerun in a fresh worker reports it again."""

    config = SimpleNamespace(stash={})  # no --junitxml
    collector = ResultsCollector(config, Settings.of(subsets=("mbpp",)))  # type: ignore[arg-type]
    answer = {"turn": 1, "sample": 0, "status": "ok", "source": "model", "cache_key": "k", "usage": GENERATED}
    record = {
        "subset": "mbpp", "task_id": "m1", "node": "m1", "n_turns": 1, "turn": 1, "sample": 0,
        "passed": True, "failure_class": "passed",
    }
    for test_id in ["case-1", "case-2"]:  # case-1 before the crash, case-2 in the rerun
        rec = {**record, "test_id": test_id, "answer": dict(answer), "task": {"n_tests": 2, "metadata": {}}}
        report = SimpleNamespace(nodeid=f"mbpp/m1/{test_id}", when="call", skipped=False, failed=False, plsql=rec)
        collector.pytest_runtest_logreport(report)  # type: ignore[arg-type]
    entries = [t.to_json() for t in collector.results()]
    assert len(entries[0]["answers"]) == 1
    d = build_document({**HEADER, "subsets": ["mbpp"]}, entries, PAPER)
    assert d["usage"]["prompt_tokens"] == 1000 and d["usage"]["answers"] == 1
    # A document holding both copies (an older file) counts them once too.
    twice = {**entries[0], "answers": [dict(answer), dict(answer)]}
    assert build_document({**HEADER, "subsets": ["mbpp"]}, [twice], PAPER)["usage"]["prompt_tokens"] == 1000


# --------------------------------------------------------------------------- the summary
def test_summary_shows_header_table_cis_comparability_failures_and_exclusions() -> None:
    tasks = sample_tasks() + [task("mbpp", "gone", [[False]], cls="infrastructure")]
    lines = summary_lines(build_document(HEADER, tasks, PAPER), 0)
    text = "\n".join(lines)
    assert lines[0].startswith(
        "pytest-plsqlbench 0.1.0 | dialect postgres | PostgreSQL 18.6 (embedded) | model openai/some-model"
    )
    assert "data mbpp@rev-a, s2mt@rev-b" in lines[0]
    row = next(line for line in lines if line.startswith("mbpp "))
    assert row.split() == ["mbpp", "3", "8", "66.67", "33.33", "-", "-"]
    assert lines[lines.index(row) + 1].lstrip().startswith("95% CI")
    assert "mbpp: compare Suite Pass@1 with leaderboard 'mbpp'" in text
    assert (
        "Development overall (macro mean over dev subsets, as on the leaderboard; Mean Test Pass@1 takes the "
        "paper-comparable metric of mbpp: Suite Pass@1): Mean Test Pass@1" in text
    )
    failures = next(line for line in lines if line.startswith("mbpp ") and line is not row)
    assert failures.split()[:5] == ["mbpp", "3", "2", "1", "0"]  # judged turns, failed, invalid, interface
    assert "mbpp: 1 task(s) excluded from the metrics (infrastructure / not generated): gone" in text
    assert "tokens 9,000 in / 1,800 out; cost $0.0900" in text  # 9 answers of 1000 + 200 tokens


def test_quiet_summary_is_the_table_and_one_failure_line() -> None:
    lines = summary_lines(doc(), -1)
    assert lines[0].startswith("Subset") and not any("95% CI" in line for line in lines)
    assert not any(line.startswith("pytest-plsqlbench") for line in lines)
    assert lines[-1] == "failed task turns: invalid 1, wrong output 2"
    assert len(lines) < len(summary_lines(doc(), 0))


def test_summary_shows_samples_and_pass_at_k() -> None:
    tests = []
    for sample, ok in enumerate([True, False, True, True]):
        tests.append(
            {
                "turn": 1,
                "test_id": "t",
                "sample": sample,
                "passed": ok,
                "failure_class": "passed" if ok else "wrong_output",
            }
        )
    header = {**HEADER, "samples": 4, "temperature": 0.8, "subsets": ["mbpp"]}
    d = build_document(header, [{"subset": "mbpp", "task_id": "m", "n_turns": 1, "tests": tests}], PAPER)
    text = "\n".join(summary_lines(d, 0))
    assert "4 samples/task" in text and "pass@1 75.00, pass@2 100.00" in text
    assert d["subsets"]["mbpp"]["tasks"] == 1


def test_item_line_tells_how_pytest_counts_relate_to_the_metrics() -> None:
    """pytest (and JUnit) count every item; the metrics leave out what says nothing about the model."""
    missing = {"extra": {"missing_excluded": "--plsql-missing=exclude"}}  # left out by choice where that is one
    tasks = [
        task("mbpp", "m1", [[True, False]], cls="infrastructure"),  # 1 judged, 1 infra left out
        task("mbpp", "gone", [[False]], cls="not_generated"),  # excluded task
        task("s2mt", "c3", [[True, True], [False]], cls="not_generated"),  # turn 2 unanswered: the sample is out
        task("mbpp", "sk", [[False, False]], cls="skipped"),
    ]
    for t in tasks[1:3]:
        for x in t["tests"]:
            if x["failure_class"] == "not_generated":
                x.update(missing)
    d = build_document({**HEADER}, tasks, PAPER)
    from pytest_plsqlbench.summary import item_counts, items_line

    c = item_counts(d)
    assert (c["items"], c["passed"], c["failed"], c["skipped"]) == (8, 3, 3, 2)
    assert (c["judged"], c["judged_passed"], c["left_out"]) == (1, 1, 5)
    assert c["items"] == c["passed"] + c["failed"] + c["skipped"] == c["judged"] + c["left_out"] + c["skipped"]
    assert items_line(d) == (
        "pytest items: 3 passed, 3 failed or errors, 2 skipped; the metrics judge 1 (1 passed, 0 failed); "
        "not in the metrics: 3 failed (1 infrastructure and 2 not generated), 2 passed in task samples left "
        "out with them, 2 skipped (not runnable)"
    )
    assert items_line(d) in summary_lines(d, 0)


def test_the_collector_keeps_a_benchmark_items_reports_small_without_changing_them() -> None:
    """pytest keeps all three reports of every item to the end of the run: the record leaves the
    report once collected, and equal parts become one object (issue 12: controller memory)."""
    from _pytest.reports import TestReport

    collector = ResultsCollector(SimpleNamespace(stash={}), Settings.of(subsets=("mbpp",)))  # type: ignore[arg-type]
    reports = []
    for test_id in ("case-1", "case-2"):
        nodeid = f"mbpp/m1/{test_id}"
        props = [("task_id", "m1"), ("subset", "mbpp")]
        for when in ("setup", "call", "teardown"):
            report = TestReport(nodeid, (".", 0, nodeid), {test_id: 1, "plsql": 1, "m1": 1}, "passed", None, when,
                                user_properties=[*props, ("failure_class", "passed")] if when != "setup" else list(props))
            if when == "call":
                report.plsql = {"subset": "mbpp", "task_id": "m1", "node": "m1", "n_turns": 1, "turn": 1,  # type: ignore[attr-defined]
                                "sample": 0, "test_id": test_id, "passed": True, "failure_class": "passed"}
            before = copy.deepcopy((report.nodeid, report.keywords, report.location, report.user_properties))
            collector.pytest_runtest_logreport(report)
            assert (report.nodeid, report.keywords, report.location, report.user_properties) == before
            assert not hasattr(report, "plsql")
            reports.append(report)
    assert sorted(collector.records) == ["mbpp/m1/case-1", "mbpp/m1/case-2"]
    assert all(r.passed for r in collector.records.values())
    first, second = reports[:3], reports[3:]
    for item in (first, second):
        assert item[0].keywords is item[1].keywords is item[2].keywords
        assert item[0].location is item[2].location
    assert first[0].keywords is not second[0].keywords  # each item has its own name among them
    # Equal properties share their pairs; each report keeps a list of its own to add to.
    assert first[1].user_properties is not second[1].user_properties
    assert all(a is b for a, b in zip(first[1].user_properties, second[1].user_properties))
    assert all(a is b for a, b in zip(first[2].user_properties, second[2].user_properties))
    assert first[0].user_properties[0] is second[0].user_properties[0]
    assert not collector._item_parts  # every item's teardown came: nothing kept for it  # noqa: SLF001

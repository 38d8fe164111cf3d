"""A run is audited and re-scored from its own files (issue 29): ``plsqlbench answers export``
writes the exact answers of a run, and scoring that file reproduces the run's results.

Each case: a reference run, its answers exported and then made wrong deterministically (an
operator flipped, an empty answer, a broken statement appended; one answer padded past the
20,000 characters older files clipped at), a run scoring those, its answers exported again --
the same answers, byte for byte -- and a run scoring the export: the same outcomes and figures.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_plsqlbench.cli import main as cli_main
from pytest_plsqlbench.export import from_results

pytestmark = pytest.mark.slow

SWAP = {"+": "-", "-": "+", "<": ">", ">": "<"}
#: Longer than the 20,000 characters results files used to keep of an answer.
PADDING = "\n-- " + "padding " * 4000 + "\n"


def wrong(code: str, key: str) -> str:
    pick = int(hashlib.sha256(key.encode()).hexdigest(), 16) % 4
    if pick == 1:
        return ""
    if pick == 2:
        body = code.upper().find("BEGIN")
        for i in range(max(body, 0), len(code) - 1):
            if code[i] in SWAP and code[i - 1] not in "-<>" and code[i + 1] not in "-><=":
                return code[:i] + SWAP[code[i]] + code[i + 1 :]
    if pick == 3:
        return code + "\nSELEC broken;\n"
    return code


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("PLSQL_", "PYTEST_"))}


def _pytest(cwd: Path, subset_args: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2", "--plsql-dialect=postgres",
           f"--plsql-data-cache={cwd / 'data-cache'}", *subset_args, *args]
    return subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=1800, check=False)


def _export(*args: str) -> int:
    return cli_main(["answers", "export", *args])


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _outcomes(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text())
    tests = {f"{t['subset']}/{t['task_id']}/t{x.get('turn', 1)}/{x['test_id']}": (x["passed"], x["failure_class"],
             x.get("error_code"), x.get("message"), x.get("expected"), x.get("actual"))
             for t in doc["tasks"] for x in t["tests"]}
    subsets = {n: {k: v for k, v in m.items() if k != "usage"} for n, m in doc["subsets"].items()}
    return {"tests": tests, "subsets": subsets, "failure_classes": doc["failure_classes"]}


def _round_trip(tmp_path: Path, subset_args: list[str]) -> dict[str, Any]:
    ref = _pytest(tmp_path, subset_args, "--plsql-model=reference", "--plsql-results=ref.json")
    assert (tmp_path / "ref.json").is_file(), ref.stdout[-3000:] + ref.stderr[-3000:]
    assert _export(str(tmp_path / "ref.json"), "-o", str(tmp_path / "ref.jsonl")) == 0
    answers = _lines(tmp_path / "ref.jsonl")
    assert answers and all(set(a) == {"subset", "task_id", "turn", "answer"} for a in answers)
    for n, a in enumerate(answers):
        a["answer"] = wrong(a["answer"], f"{a['subset']}/{a['task_id']}/{a['turn']}")
        if n == 0:
            a["answer"] += PADDING
    mutated = tmp_path / "mutated.jsonl"
    mutated.write_text("".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")

    run = _pytest(tmp_path, subset_args, f"--plsql-answers={mutated}", "--plsql-results=run.json")
    assert (tmp_path / "run.json").is_file(), run.stdout[-3000:] + run.stderr[-3000:]
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["header"]["answer_code"] == "exact"
    exported, left_out = from_results(doc)
    assert left_out == []
    assert _export(str(tmp_path / "run.json"), "-o", str(tmp_path / "run.jsonl")) == 0
    key = lambda a: (a["subset"], a["task_id"], a["turn"])  # noqa: E731
    assert sorted(_lines(tmp_path / "run.jsonl"), key=key) == sorted(answers, key=key)  # exact, none clipped
    assert max(len(a["answer"]) for a in _lines(tmp_path / "run.jsonl")) > 20000

    again = _pytest(tmp_path, subset_args, f"--plsql-answers={tmp_path / 'run.jsonl'}", "--plsql-results=again.json")
    assert (tmp_path / "again.json").is_file(), again.stdout[-3000:]
    first, second = _outcomes(tmp_path / "run.json"), _outcomes(tmp_path / "again.json")
    assert second == first
    classes = {t[1] for t in first["tests"].values()}
    assert "passed" in classes and len(classes) > 1, classes  # a mix, so reproducing it means something
    assert again.returncode == run.returncode
    return first


def test_smoke_run_is_rescored_from_its_exported_answers(tmp_path: Path) -> None:
    _round_trip(tmp_path, ["--subset", "smoke"])


def test_mbppplus_slice_is_rescored_and_its_failures_show_call_expected_and_actual(tmp_path: Path) -> None:
    shared = Path(os.environ.get("PLSQLBENCH_SHARED_DATA", "/work/shared/data"))
    source = shared / "mbppplus" / "MbppPlus.jsonl"
    if not source.is_file():
        pytest.fail(f"{source} is missing: set PLSQLBENCH_SHARED_DATA to the shared data folder")
    head = tmp_path / "MbppPlus-head.jsonl"
    head.write_text("\n".join(source.read_text(encoding="utf-8").splitlines()[:10]) + "\n", encoding="utf-8")
    outcomes = _round_trip(tmp_path, ["--subset", "mbpp-plus", f"--plsql-source=mbppplus={head}"])
    wrong_values = [t for t in outcomes["tests"].values() if t[1] == "wrong_output"]
    assert wrong_values, "no failing case to show"
    for _, _, _, message, expected, actual in wrong_values:
        # "f(ARGS) returned VALUE; expected VALUE": the call, what came back, what was expected
        assert " returned " in message and "; expected " in message, message
        assert expected and actual is not None and actual[0] in message and expected[0] in message
    # ... and the HTML entry of a failing test: the call as its input, the expected and actual values
    assert cli_main(["report", str(tmp_path / "run.json"), "--format", "html", "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    doc = json.loads((tmp_path / "run.json").read_text())
    shown = [x for t in doc["tasks"] for x in t["tests"] if x["failure_class"] == "wrong_output"]
    call = shown[0]["extra"]["call"]
    assert html.escape(call) in page and html.escape(shown[0]["actual"][0]) in page
    assert "<summary>test script</summary>" in page


def test_export_from_the_cache_and_its_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    rec = {"format": 1, "key": "k" * 64, "task_id": "t1", "subset": "s", "turn": 1, "sample": 0, "model": "openai/a",
           "status": "ok", "code": "SELECT 1;" + PADDING, "created": "2026-01-01T00:00:00Z"}
    (cache / "openai-a" / "s").mkdir(parents=True)
    (cache / "openai-a" / "s" / "t1.t1.s0.old.json").write_text(json.dumps({**rec, "code": "old"}).replace("2026-01-01", "2025-01-01"))
    (cache / "openai-a" / "s" / "t1.t1.s0.new.json").write_text(json.dumps(rec))
    (cache / "openai-b" / "s").mkdir(parents=True)
    (cache / "openai-b" / "s" / "t1.json").write_text(json.dumps({**rec, "model": "openai/b", "code": "b"}))
    (cache / ".outages").mkdir()
    (cache / ".outages" / "x.json").write_text(json.dumps({"key": "x", "run_id": "r"}))
    out = tmp_path / "a.jsonl"
    assert _export("--cache", str(cache), "-o", str(out)) == 2
    assert "openai/a, openai/b" in capsys.readouterr().err  # two models: which one?
    assert _export("--cache", str(cache), "--model", "openai/a", "-o", str(out)) == 0
    assert _lines(out) == [{"subset": "s", "task_id": "t1", "turn": 1, "answer": rec["code"]}]  # the newest, whole
    assert _export("--cache", str(cache), "--model", "openai/c", "-o", str(out)) == 2
    assert _export(str(tmp_path / "missing.json"), "-o", str(out)) == 2
    assert _export("-o", str(out)) == 2
    err = capsys.readouterr().err
    assert "no answer of model 'openai/c'" in err and "Traceback" not in err


def test_a_clipped_answer_of_an_older_results_file_is_refused_by_name() -> None:
    doc = {"header": {}, "tasks": [{"subset": "s", "task_id": "t1", "answers": [
        {"turn": 1, "sample": 0, "status": "ok", "code": "x" * 20000 + "\n... [5 more characters not kept]"}]}]}
    from pytest_plsqlbench.errors import UsageError

    with pytest.raises(UsageError, match="clipped .*s/t1 turn 1.*--cache"):
        from_results(doc)
    doc["tasks"][0]["answers"].append({"turn": 2, "sample": 0, "status": "not_generated", "code": None})
    doc["header"]["answer_code"] = "exact"  # this version: code is whole, whatever it ends with
    answers, left_out = from_results(doc)
    assert [a.turn for a in answers] == [1] and left_out == ["s/t1 turn 2 (not_generated)"]

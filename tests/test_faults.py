"""Fault injection and bad input: the run completes, nothing is scored against the model that the
model did not do, and what could not be evaluated is listed (issue 7).

The fault runs use a small subset whose tests sleep briefly, so a fault can strike while a
statement runs, and a ``conftest.py`` in the pytester project that strikes at chosen items:
it terminates the candidate backend (``pg_terminate_backend`` from an admin connection),
SIGKILLs the embedded server, or ends the xdist worker with ``os._exit``, once or every time.
The disturbed run's metrics must equal an undisturbed run's over the items that completed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.slow

#: A conftest for the pytester project: strikes at the items named in $PLSQL_FAULTS.
FAULT_CONFTEST = '''
import json, os, threading, time
from pathlib import Path

import pytest

FAULTS = json.loads(os.environ.get("PLSQL_FAULTS", "{}"))
STATE = Path(os.environ.get("PLSQL_FAULT_DIR", "."))


def _log(kind, nodeid):
    with open(STATE / "fired.log", "a") as fh:
        fh.write(f"{kind} {nodeid} {os.getpid()}\\n")


def _first_time(kind, nodeid):
    """True once per run across all workers (an exclusive create)."""
    try:
        os.close(os.open(STATE / (kind + "-" + nodeid.replace("/", "_")), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    kind = FAULTS.get(item.nodeid)
    if kind == "crash-always" or (kind == "crash-once" and _first_time(kind, item.nodeid)):
        _log(kind, item.nodeid)
        os._exit(3)
    stop, thread = threading.Event(), None
    if kind in ("kill-backend-once", "kill-backend-always", "kill-server-once"):
        from pytest_plsqlbench.collect import HARNESS_KEY

        backend = item.config.stash[HARNESS_KEY].backend

        def strike():
            time.sleep(0.15)  # the test's statement is sleeping now
            while not stop.is_set():
                _log(kind, item.nodeid)
                if kind == "kill-server-once":
                    backend.server.kill()
                    return
                backend.terminate(backend.session().backend_pid)
                if kind == "kill-backend-once" or stop.wait(0.1):
                    return

        thread = threading.Thread(target=strike, daemon=True)
        thread.start()
    try:
        return (yield)
    finally:
        stop.set()
        if thread is not None:
            thread.join()
'''

#: (task id, number of tests, tests the answer gets wrong)
TASKS = [("calc_a", 3, ()), ("calc_b", 3, (3,)), ("calc_c", 3, ()), ("calc_d", 3, (1,)), ("calc_e", 1, ()), ("calc_f", 3, (2,))]
#: node id -> fault; the "-always" ones cannot be evaluated and must be listed, not scored.
FAULTS = {
    "faulty/calc_a/case-2": "kill-backend-once",
    "faulty/calc_b/case-2": "kill-server-once",
    "faulty/calc_c/case-1": "crash-once",
    "faulty/calc_d/case-3": "kill-backend-always",
    "faulty/calc_e/case-1": "crash-always",
}
LOST = sorted(n for n, kind in FAULTS.items() if kind.endswith("-always"))


def write_faulty_subset(root: Path) -> tuple[Path, Path]:
    folder = root / "faulttasks"
    (folder / "faulty").mkdir(parents=True)
    (folder / "faulty.yaml").write_text("name: faulty\nloader: yaml\ndialects: [postgres]\noptions: {dir: faulty}\n")
    answers = []
    for task_id, n_tests, wrong in TASKS:
        fn = f"{task_id}_double"
        tests = [
            {"id": f"case-{n}", "kind": "assert",
             "script": f"SELECT pg_sleep(0.4); DO $$ BEGIN IF {fn}({n}) IS DISTINCT FROM {2 * n} "
                       f"THEN RAISE EXCEPTION 'case-{n} failed'; END IF; END $$;"}
            for n in range(1, n_tests + 1)
        ]
        raw = {"id": task_id, "prompt": f"Write {fn}(x) returning twice x.", "entry_points": [fn], "tests": tests}
        (folder / "faulty" / f"{task_id}.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        body = "SELECT " + ("CASE " + "".join(f"WHEN x = {n} THEN -1 " for n in wrong) + "ELSE 2 * x END" if wrong else "2 * x")
        answers.append({"task_id": task_id, "answer": f"CREATE FUNCTION {fn}(x int) RETURNS int LANGUAGE sql AS '{body}';"})
    answers_file = root / "fault-answers.jsonl"
    answers_file.write_text("".join(json.dumps(a) + "\n" for a in answers))
    return folder, answers_file


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=600)


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """The metrics, without what only says that something was excluded."""
    out = {}
    for name, metrics in doc["subsets"].items():
        m = {k: v for k, v in metrics.items()
             if k not in ("excluded_tasks", "incomplete_tasks", "partly_excluded_tasks", "usage")}
        for key in ("failure_classes", "failure_units"):
            m[key] = {c: n for c, n in m[key].items() if c != "infrastructure"}
        out[name] = m
    return out


def by_node(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"faulty/{t['task_id']}/{x['test_id']}": x for t in doc["tasks"] for x in t["tests"]}


def test_killed_backend_server_and_workers_leave_the_metrics_of_an_undisturbed_run(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, answers = write_faulty_subset(pytester.path)
    pytester.makeconftest(FAULT_CONFTEST)
    base = ("--subset", "faulty", "--plsql-tasks", str(folder), f"--plsql-answers={answers}", "-n", "2",
            "--plsql-timeout=5")
    state = tmp_path / "fault-state"
    state.mkdir()
    monkeypatch.setenv("PLSQL_FAULT_DIR", str(state))

    # Undisturbed, over the items that can complete.
    monkeypatch.setenv("PLSQL_FAULTS", "{}")
    clean = run(pytester, *base, *(f"--deselect={n}" for n in LOST), "--plsql-results=clean.json")
    clean_doc = json.loads((pytester.path / "clean.json").read_text())
    assert (state / "fired.log").exists() is False

    monkeypatch.setenv("PLSQL_FAULTS", json.dumps(FAULTS))
    disturbed = run(pytester, *base, "--plsql-results=disturbed.json", "-rf", "--junitxml=disturbed.xml")
    doc = json.loads((pytester.path / "disturbed.json").read_text())

    fired = (state / "fired.log").read_text().split("\n")
    for nodeid, kind in FAULTS.items():
        assert any(line.startswith(f"{kind} {nodeid} ") for line in fired), (nodeid, fired)
    # Every fault really struck; the "-always" ones struck the retry too.
    # Struck the first run and the rerun; xdist may already have handed the item to a live
    # worker a third time before the second crash is handled (documented in faults.py).
    assert 2 <= sum(line.startswith("crash-always ") for line in fired) <= 3
    assert len({line.split()[2] for line in fired if line.startswith("kill-backend-always ")}) == 1

    assert comparable(doc) == comparable(clean_doc)
    # Deselecting a test leaves its task partly run; losing it to the infrastructure does not
    # (it ran, and is reported as lost).
    assert clean_doc["subsets"]["faulty"]["incomplete_tasks"] == ["calc_d"]
    assert doc["subsets"]["faulty"]["incomplete_tasks"] == []
    tests, clean_tests = by_node(doc), by_node(clean_doc)
    for nodeid, rec in clean_tests.items():
        assert (tests[nodeid]["passed"], tests[nodeid]["failure_class"]) == (rec["passed"], rec["failure_class"]), nodeid
    # What could not be evaluated is listed as such, never scored.
    assert sorted(n for n, x in tests.items() if x["failure_class"] == "infrastructure") == LOST
    faulty = doc["subsets"]["faulty"]
    assert faulty["failure_classes"]["infrastructure"] == 2
    assert faulty["excluded_tasks"] == ["calc_e"]  # its only test was lost
    assert faulty["partly_excluded_tasks"] == ["calc_d"]  # scored without its lost test, and named
    assert faulty["tasks"] == clean_doc["subsets"]["faulty"]["tasks"] == 5
    disturbed.stdout.fnmatch_lines(["*excluded from the metrics*calc_e*", "*FAILED faulty/calc_d/case-3*infrastructure*"],
                                   consecutive=False)
    # One JUnit testcase per item: the reruns after a crash leave no extra (empty, "passed") ones.
    names = [c.get("name") for c in ET.parse(pytester.path / "disturbed.xml").getroot().iter("testcase")]
    assert sorted(names) == sorted(f"faulty/{t}/case-{n}" for t, count, _ in TASKS for n in range(1, count + 1))
    clean.assert_outcomes(passed=11, failed=3)
    assert clean.ret == disturbed.ret == pytest.ExitCode.TESTS_FAILED


# --------------------------------------------------------------------------- bad input
@pytest.fixture
def mini(pytester: pytest.Pytester) -> Path:
    from minisubset import double_task, write_subset

    # Distinct prompts, so the two tasks have distinct answer cache keys.
    second = double_task("task_b").replace("Write double_it", "Please write double_it")
    return write_subset(pytester.path, "mini", {"a": double_task("task_a"), "b": second})


def test_answers_with_nul_bytes_or_broken_unicode_are_scored_not_crashed(pytester: pytest.Pytester, mini: Path) -> None:
    from minisubset import DOUBLE_REF_PG

    answers = pytester.path / "answers.jsonl"
    with answers.open("wb") as fh:
        # A lone surrogate (valid JSON, not encodable as UTF-8) and raw bytes that are not UTF-8.
        fh.write(json.dumps({"task_id": "task_a", "answer": DOUBLE_REF_PG + "\n-- \ud800"}).encode() + b"\n")
        fh.write(b'{"task_id": "task_b", "answer": "CREATE FUNCTION double_it(x integer) \xff\xfe RETURNS integer"}\n')
    out = pytester.path / "r.json"
    result = run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), f"--plsql-answers={answers}",
                 f"--plsql-results={out}", "-p", "no:xdist")
    tests = {(t["task_id"], x["test_id"]): x for t in json.loads(out.read_text())["tasks"] for x in t["tests"]}
    assert {x["failure_class"] for x in tests.values()} == {"invalid_artifact"}
    assert "not valid UTF-8" in tests[("task_a", "case-1")]["message"]
    result.assert_outcomes(failed=6)
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_answer_with_a_nul_byte_is_never_sent_to_the_database(pytester: pytest.Pytester, mini: Path) -> None:
    from minisubset import DOUBLE_REF_PG

    answers = pytester.path / "answers.jsonl"
    answers.write_text(json.dumps({"task_id": "task_a", "answer": DOUBLE_REF_PG.replace("x * 2", "x *\x00 2")}) + "\n")
    out = pytester.path / "r.json"
    run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), f"--plsql-answers={answers}",
        f"--plsql-results={out}", "-p", "no:xdist", "-k", "task_a")
    tests = [x for t in json.loads(out.read_text())["tasks"] for x in t["tests"]]
    # The harness refuses it before it reaches the database: an invalid artifact, never a
    # database or harness error, and never silently repaired.
    assert len(tests) == 3
    assert {x["failure_class"] for x in tests} == {"invalid_artifact"}
    assert all("NUL" in x["message"] for x in tests)


def test_invalid_yaml_task_file_is_one_error_naming_file_and_line(pytester: pytest.Pytester, mini: Path) -> None:
    broken = mini / "mini" / "zz_broken.yaml"
    broken.write_text("id: broken\nprompt: p\ntests:\n  - {id: x, kind: assert, script: 'SELECT 1'\n")
    result = run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), "--plsql-model=reference")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{broken}:*: not valid YAML*"])
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--plsql-safety=maybe", "*--plsql-safety*invalid choice*maybe*"),
        ("--plsql-timeout=soon", "*--plsql-timeout: invalid value 'soon'*"),
        ("--plsql-timeout=-1", "*--plsql-timeout must be positive*"),
        ("--plsql-no-such-option", "*unrecognized arguments: --plsql-no-such-option*"),
        ("--plsql-dsn==bad", "*--plsql-dsn: not a PostgreSQL connection string*"),
    ],
)
def test_bad_options_are_one_usage_error(pytester: pytest.Pytester, mini: Path, option: str, message: str) -> None:
    result = run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), "--plsql-model=reference", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


def test_malformed_dataset_line_names_file_and_line(tmp_path: Path) -> None:
    from pytest_plsqlbench import convert
    from pytest_plsqlbench.errors import UsageError

    data = tmp_path / "mbpp.jsonl"
    good = {"task_id": 2, "text": "Write a function.", "code": "def f(x):\n    return x\n", "test_list": ["assert f(1) == 1"]}
    data.write_text(json.dumps(good) + "\n{not json\n")
    with pytest.raises(UsageError, match=rf"{data.name}:2\b"):
        convert.convert_file("mbpp", data, "postgres", subset="mbpp")


def test_corrupt_answer_cache_entry_counts_as_missing_not_fatal(pytester: pytest.Pytester, mini: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from minisubset import DOUBLE_REF_PG
    from stub_openai import StubServer, ok

    monkeypatch.setenv("OPENAI_API_KEY", "sk-stub-not-a-key")
    cache = pytester.path / "cache"
    with StubServer(default=ok(DOUBLE_REF_PG)) as stub:
        base = ("--subset", "mini", "--plsql-tasks", str(mini), "--plsql-model=openai/stub",
                f"--plsql-api-base={stub.api_base}", f"--plsql-cache={cache}", "-p", "no:xdist")
        run(pytester, *base).assert_outcomes(passed=6)
        entries = sorted(p for p in cache.rglob("*.json") if not any(part.startswith(".") for part in p.relative_to(cache).parts))
        assert len(entries) == 2
        entries[0].write_text('{"task_id": "task_a", "answer": ')  # torn, not JSON
        asked = len(stub.bodies())
        # Cache only: the corrupt entry counts as missing; its task is not generated, and listed.
        out = pytester.path / "r.json"
        result = run(pytester, *base, "--plsql-cache-only", "--plsql-missing=exclude", f"--plsql-results={out}")
        # The task without an answer fails its items (not generated); the other task still passes.
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        result.assert_outcomes(passed=3, failed=3)
        doc = json.loads(out.read_text())
        not_generated = [t for t in doc["tasks"] for x in t["tests"] if x["failure_class"] == "not_generated"]
        assert len(not_generated) == 3 and len({t["task_id"] for t in not_generated}) == 1
        assert len(doc["subsets"]["mini"]["excluded_tasks"]) == 1
        assert doc["subsets"]["mini"]["mean_test_pass"] == 1.0
        assert len(stub.bodies()) == asked
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_results_file_of_an_older_version_is_one_clear_error(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"format": "pytest-plsqlbench/results", "version": 1, "header": {}, "subsets": {}, "tasks": []}))
    cli = [sys.executable, "-c", "from pytest_plsqlbench.cli import main; raise SystemExit(main())"]
    done = subprocess.run([*cli, "report", str(old)], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 2
    assert "older (version 1)" in done.stderr
    assert "Traceback" not in done.stderr

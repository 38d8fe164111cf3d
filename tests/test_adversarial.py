"""Adversarial answers: each one is contained, scored as the model's failure, and leaves the next
task untouched (issue 7).

Three layers, cheapest first:

* the safety pre-check on its own: it flags every hostile answer below that it can see, and
  none of the smoke subset's or the MBPP converter's reference answers (no false positives);
* the PostgreSQL backend directly (``--plsql-safety=off``: the database's grants and the
  timeouts are the containment), one hostile task followed by a canary task each;
* the whole plugin in a subprocess with ``-n 2``: a subset of hostile tasks interleaved with
  canaries, run with a 1 s timeout, checking classes, durations, wall time and that no file
  the answers try to create appears.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import yaml

from pytest_plsqlbench.dialects import pg_server
from pytest_plsqlbench.dialects.postgres import PostgresBackend
from pytest_plsqlbench.loaders.yaml_tasks import load_task_file
from pytest_plsqlbench.runner import evaluate_task
from pytest_plsqlbench.safety import SafetyChecker, findings, make_checker
from pytest_plsqlbench.settings import DatabaseSettings, Settings
from pytest_plsqlbench.tasks import Fixture, Task, Turn, UnitTest

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 1.0
MAX_OUTPUT = 1000
#: Worst case of one statement: the timeout, the watchdog's grace, its cancel wait, terminate.
STATEMENT_BOUND = TIMEOUT + 1 + 3 + 2
#: Files the answers try to create, unique per test session, outside every temporary folder
#: of the run (the embedded server may write /tmp when it runs as another user, so /tmp it is).
ESCAPES = {name: Path("/tmp") / f"plsqlbench-escape-{uuid.uuid4().hex[:12]}-{name}" for name in ("touch", "copy", "lo")}
SHOP = (REPO / "fixtures" / "shop" / "postgres.sql").read_text()


@dataclass(frozen=True)
class Case:
    """A hostile answer, the test run against it, and how it must be scored.

    ``contained``: failure classes acceptable when only the database contains it (safety off);
    ``flagged``: whether the safety pre-check refuses it before it runs.
    """

    name: str
    answer: str
    test: str
    expected: tuple[str, ...]
    contained: tuple[str, ...]
    flagged: bool


def fn(name: str, body: str, returns: str = "int", lang: str = "plpgsql") -> str:
    return f"CREATE FUNCTION {name}() RETURNS {returns} LANGUAGE {lang} AS $fn$ {body} $fn$;"


CASES = [
    Case("loop_forever", fn("spin", "BEGIN LOOP END LOOP; END"), "SELECT spin();", ("1",), ("timeout",), False),
    Case(
        "loop_ignoring_cancel",
        fn("spin", "BEGIN LOOP BEGIN PERFORM pg_sleep(10); EXCEPTION WHEN query_canceled THEN NULL; END; END LOOP; END"),
        "SELECT spin();", ("1",), ("timeout",), False,
    ),
    Case("sleeps", "SET statement_timeout = 0;\n" + fn("nap", "BEGIN PERFORM pg_sleep(600); RETURN 1; END"),
         "SELECT nap();", ("1",), ("timeout",), True),
    Case("drops_benchmark_table", "DROP TABLE shop.order_items;\nDELETE FROM shop.customers;\n" + fn("f", "BEGIN RETURN 1; END"),
         "SELECT f();", ("1",), ("unsafe",), True),
    Case(
        "squats_later_names",
        "CREATE TABLE answers.canary_t(x int);\n" + "\n".join(fn(f"canary_{i}", "BEGIN RETURN 0; END") for i in range(1, 6))
        + "\n" + fn("squat", "BEGIN RETURN 1; END"),
        "SELECT squat();", ("1",), ("passed",), False,
    ),
    Case("copy_to_program", f"COPY (SELECT 1) TO PROGRAM 'touch {ESCAPES['touch']}';\n" + fn("f", "BEGIN RETURN 1; END"),
         "SELECT f();", ("1",), ("unsafe",), True),
    Case("copy_to_file", f"COPY (SELECT 'x') TO '{ESCAPES['copy']}';\n" + fn("f", "BEGIN RETURN 1; END"),
         "SELECT f();", ("1",), ("unsafe",), True),
    Case("lo_export", fn("f", f"BEGIN PERFORM lo_export(lo_from_bytea(0, 'x'), '{ESCAPES['lo']}'); RETURN 1; END"),
         "SELECT f();", ("1",), ("unsafe",), True),
    Case("reads_server_file", fn("peek", "SELECT pg_read_file('/etc/passwd')", "text", "sql"),
         "SELECT length(peek()) > 0;", ("t",), ("unsafe",), True),
    Case("notice_flood",
         "CREATE PROCEDURE flood() LANGUAGE plpgsql AS $p$ BEGIN FOR i IN 1..1000000 LOOP RAISE NOTICE 'line %', i; END LOOP; END $p$;",
         "CALL flood();", ("line 1",), ("timeout", "wrong_output"), False),
    Case("set_role", "SET ROLE postgres;\n" + fn("f", "BEGIN RETURN 1; END"), "SELECT f();", ("1",), ("unsafe",), True),
    Case("session_authorization", "SET SESSION AUTHORIZATION postgres;\n" + fn("f", "BEGIN RETURN 1; END"),
         "SELECT f();", ("1",), ("unsafe",), True),
    Case("reset_all", "RESET ALL;\n" + fn("limit_now", "SELECT current_setting('statement_timeout')", "text", "sql"),
         "SELECT limit_now();", ("1s",), ("passed",), False),
    Case(
        "commit_in_procedure",
        "CREATE PROCEDURE leak() LANGUAGE plpgsql AS $p$ BEGIN CREATE TABLE answers.leaked(x int); COMMIT; END $p$;\nCOMMIT;",
        "CALL leak();", ("",), ("wrong_output",), False,
    ),
    Case("terminates_itself", fn("bye", "SELECT pg_terminate_backend(pg_backend_pid())", "boolean", "sql"),
         "SELECT bye();", ("t",), ("unsafe",), True),
    Case("own_transaction_timeout", "SET transaction_timeout = '1ms';\n" + fn("f", "BEGIN RETURN 1; END"),
         "SELECT f();", ("1",), ("timeout",), True),
    Case("huge_result", "SELECT generate_series(1, 500000000);\n" + fn("f", "BEGIN RETURN 1; END"),
         "SELECT f();", ("1",), ("timeout",), False),
    Case("copy_to_client", "COPY (SELECT 1) TO STDOUT;\n" + fn("f", "BEGIN RETURN 1; END"),
         "SELECT f();", ("1",), ("invalid_artifact",), False),
    Case("creates_in_benchmark_schema", "CREATE FUNCTION shop.f() RETURNS int LANGUAGE sql AS 'SELECT 1';",
         "SELECT shop.f();", ("1",), ("unsafe",), True),
]
CASE_IDS = [c.name for c in CASES]


def canary(n: int) -> tuple[str, list[dict]]:
    """A task that passes only in a clean state: its answer, and tests of what must hold."""
    answer = f"CREATE FUNCTION canary_{n}() RETURNS int LANGUAGE sql AS 'SELECT 1';"  # no OR REPLACE
    tests = [
        {"id": "own", "kind": "output", "script": f"SELECT canary_{n}();", "expected": ["1"]},
        {"id": "shop-intact", "kind": "output",
         "script": "SELECT (SELECT count(*) FROM shop.customers), (SELECT count(*) FROM shop.order_items);",
         "expected": ["5,8"]},
        {"id": "limits", "kind": "output",
         "script": "SELECT current_setting('statement_timeout'), current_setting('transaction_timeout'), "
                   "current_setting('idle_in_transaction_session_timeout'), current_user = session_user, "
                   "pg_has_role(current_user, 'pg_execute_server_program', 'MEMBER'), "
                   "current_setting('search_path');",
         "expected": [f"{TIMEOUT:g}s,0,30min,t,f,answers, public, pg_temp"]},
        {"id": "no-leftovers", "kind": "output",
         "script": "SELECT (SELECT count(*) FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace "
                   "WHERE s.nspname = 'answers'), (SELECT string_agg(p.proname, ' ') FROM pg_proc p "
                   "JOIN pg_namespace s ON s.oid = p.pronamespace WHERE s.nspname = 'answers');",
         "expected": [f"0,canary_{n}"]},
    ]
    return answer, tests


def as_task(name: str, tests: list[dict], entry: str) -> Task:
    units = tuple(UnitTest(t["id"], t["kind"], t["script"], tuple(t["expected"])) for t in tests)
    return Task(id=name, subset="adv", dialect="postgres", turns=(Turn(1, "p", units),), entry_points=(entry,),
                fixtures=(Fixture("yaml:shop:postgres", SHOP),))


def case_task(case: Case) -> Task:
    return as_task(case.name, [{"id": "t", "kind": "output", "script": case.test, "expected": list(case.expected)}], case.name)


# --------------------------------------------------------------------------- the safety pre-check
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_safety_check_flags_what_it_can_see(case: Case) -> None:
    found = findings(case_task(case), case.answer)
    assert bool(found) == case.flagged, [str(f) for f in found]


@pytest.mark.parametrize(
    ("dialect", "answer", "rule"),
    [
        ("postgres", "DO $$ BEGIN EXECUTE 'DROP TABLE ' || 'shop.customers'; END $$;", "drop"),
        ("postgres", "CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $$ BEGIN EXECUTE format('GRANT ALL ON %I TO public', 't'); END $$;", "privileges"),
        ("postgres", "ALTER SYSTEM SET fsync = on;", "system"),
        ("postgres", "CREATE EXTENSION dblink;", "system"),
        ("postgres", "LOAD 'plpython3';", "system"),
        ("postgres", "CREATE ROLE evil SUPERUSER;", "privileges"),
        ("postgres", "CREATE FUNCTION f() RETURNS int LANGUAGE c AS 'libc', 'system';", "programs"),
        ("postgres", "\\! touch /tmp/x\nSELECT 1;", "client"),
        ("postgres", "SET exit_on_error = on;", "limits"),
        ("postgres", "DO $$ BEGIN PERFORM set_config('exit_on_error', 'on', true); END $$;", "limits"),
        ("oracle", "BEGIN EXECUTE IMMEDIATE 'DROP TABLE employees'; END;\n/", "drop"),
        ("oracle", "BEGIN EXECUTE IMMEDIATE q'[GRANT DBA TO scott]'; END;\n/", "privileges"),
        ("oracle", "DECLARE f UTL_FILE.FILE_TYPE; BEGIN f := UTL_FILE.FOPEN('D', 'x', 'w'); END;\n/", "server-files"),
        ("oracle", "BEGIN DBMS_SCHEDULER.CREATE_JOB(job_name => 'j', job_type => 'EXECUTABLE'); END;\n/", "programs"),
        ("oracle", "CREATE OR REPLACE PROCEDURE p IS PRAGMA AUTONOMOUS_TRANSACTION; BEGIN NULL; END;\n/", "transactions"),
        ("oracle", "ALTER SESSION SET CURRENT_SCHEMA = SYS;", "system"),
    ],
)
def test_safety_check_rules(dialect: str, answer: str, rule: str) -> None:
    task = Task(id="t", subset="s", dialect=dialect, turns=(Turn(1, "p", (UnitTest("x", "assert", "x"),)),))  # type: ignore[arg-type]
    assert rule in {f.rule for f in findings(task, answer)}


@pytest.mark.parametrize(
    ("dialect", "answer"),
    [
        # Dropping the entry point (or what the answer itself creates) before creating it is common.
        ("postgres", "DROP FUNCTION IF EXISTS double_it(integer);\nDROP FUNCTION IF EXISTS public.double_it(int);\n"
                     "CREATE TEMP TABLE scratch(x int); INSERT INTO scratch VALUES (1); TRUNCATE scratch; DROP TABLE scratch;\n"
                     "CREATE FUNCTION double_it(x int) RETURNS int LANGUAGE sql AS 'SELECT 2 * x';"),
        # A column called role, FOR UPDATE, strings that only mention dangerous words.
        ("postgres", "CREATE FUNCTION double_it(x int) RETURNS int LANGUAGE plpgsql AS $$ DECLARE r record; BEGIN "
                     "FOR r IN SELECT * FROM shop.orders FOR UPDATE LOOP NULL; END LOOP; "
                     "RAISE NOTICE 'DROP TABLE %', 'GRANT'; RETURN 2 * x; END $$;"),
        ("oracle", "BEGIN EXECUTE IMMEDIATE 'DROP TABLE tmp_x'; EXCEPTION WHEN OTHERS THEN NULL; END;\n/\n"
                   "CREATE GLOBAL TEMPORARY TABLE tmp_x (a NUMBER);\n"
                   "ALTER SESSION SET NLS_DATE_FORMAT = 'YYYY-MM-DD';\n"
                   "CREATE OR REPLACE FUNCTION double_it(x IN NUMBER) RETURN NUMBER IS v NUMBER; BEGIN "
                   "EXECUTE IMMEDIATE 'SELECT :1 * 2 FROM dual' INTO v USING x; RETURN v; END;\n/"),
    ],
)
def test_safety_check_allows_ordinary_answers(dialect: str, answer: str) -> None:
    task = Task(id="t", subset="s", dialect=dialect, turns=(Turn(1, "p", (UnitTest("x", "assert", "x"),)),),  # type: ignore[arg-type]
                entry_points=("double_it",))
    assert findings(task, answer) == []


def test_safety_check_knows_the_conversation_so_far() -> None:
    """A later turn may drop or fill what an earlier turn of the same conversation created."""
    turns = tuple(Turn(i, "p", (UnitTest("x", "assert", "x"),)) for i in (1, 2))
    task = Task(id="t", subset="s", dialect="postgres", turns=turns)
    later = "INSERT INTO audit_log VALUES (1); DROP TABLE audit_log;"
    assert findings(task, later)
    assert findings(task, later, earlier=["CREATE TABLE audit_log(x int);"]) == []


def test_safety_allowances_per_task() -> None:
    task = Task(id="t", subset="s", dialect="postgres", turns=(Turn(1, "p", (UnitTest("x", "assert", "x"),)),),
                metadata={"safety_allow": ["write"]})
    assert findings(task, "INSERT INTO shop.orders VALUES (1);") == []
    assert findings(task, "DROP TABLE shop.orders;")


def test_make_checker_modes() -> None:
    assert make_checker(DatabaseSettings(safety="off")) is None
    assert isinstance(make_checker(DatabaseSettings(safety="warn")), SafetyChecker)
    assert make_checker(DatabaseSettings(safety="block")).mode == "block"  # type: ignore[union-attr]


def _reference_tasks() -> Iterator[tuple[str, Task, int, str, list[str]]]:
    for dialect in ("postgres", "oracle"):
        for path in sorted((REPO / "tasks" / "smoke").glob("*.yaml")):
            task = load_task_file(path, "smoke", dialect, (REPO / "fixtures",))
            earlier: list[str] = []
            for turn in task.turns:
                yield f"smoke/{dialect}/{task.id}", task, turn.index, turn.reference or "", list(earlier)
                earlier.append(turn.reference or "")


def test_smoke_reference_answers_pass_the_check() -> None:
    flagged = {
        label: [str(f) for f in findings(task, code, earlier)]
        for label, task, _, code, earlier in _reference_tasks()
        if findings(task, code, earlier)
    }
    assert flagged == {}


def test_mbpp_converter_reference_answers_pass_the_check(shared_data: Path, tmp_path: Path) -> None:
    from pytest_plsqlbench import convert
    # MBPP+ conversion runs canonical solutions; its first tasks are enough to cover its emitter.
    plus = tmp_path / "MbppPlus-head.jsonl"
    plus.write_text("".join((shared_data / "mbppplus" / "MbppPlus.jsonl").read_text().splitlines(True)[:10]))
    sources = [
        ("mbpp", shared_data / "mbpp-sanitized" / "mbpp.jsonl"),
        ("plsqlbench-mbpp", shared_data / "plsqlbench-sample" / "datasets" / "mbpp" / "mbpp_plsql.jsonl"),
        ("mbpp-plus", plus),
    ]
    checked, flagged = 0, {}
    for source, path in sources:
        for dialect in ("postgres", "oracle"):
            for task in convert.convert_file(source, path, dialect, subset=source).tasks:
                checked += 1
                found = findings(task, task.turns[0].reference or "")
                if found:
                    flagged[f"{source}/{dialect}/{task.id}"] = [str(f) for f in found]
    assert checked > 300
    assert flagged == {}


def test_published_oracle_references_pass_the_check(plsqlbench_sample: Path) -> None:
    """Spider2 and Spider-PLSQL references of the PLSQLBench release (packages, dynamic SQL ...)."""
    checked, flagged = 0, {}
    for name in ("spider2_st/spider2_st.jsonl", "spider2_mt/spider2_mt.jsonl", "spider/spider1.jsonl"):
        for line in (plsqlbench_sample / "datasets" / name).read_text().splitlines():
            rec = json.loads(line)
            task = Task(id=rec["instance_id"], subset="s", dialect="oracle", turns=(Turn(1, "p", (UnitTest("x", "assert", "x"),)),))
            for code in [rec.get("reference_answer") or "", *(rec.get("tests") or [])]:
                checked += 1
                found = findings(task, code)
                if found:
                    flagged[rec["instance_id"]] = [str(f) for f in found]
    assert checked > 50
    assert flagged == {}


# --------------------------------------------------------------------------- the backend alone
@pytest.fixture(scope="module")
def backend() -> Iterator[PostgresBackend]:
    limit = pg_server.MEMORY_LIMIT
    pg_server.MEMORY_LIMIT = 512 << 20  # small, so the memory test is quick
    b = PostgresBackend(Settings.of(subsets=(), timeout=TIMEOUT, max_output=MAX_OUTPUT), worker="adversarial")
    try:
        b.start()
    finally:
        pg_server.MEMORY_LIMIT = limit
    try:
        yield b
    finally:
        b.stop()


def _assert_canary_passes(backend: PostgresBackend, n: int = 1) -> None:
    answer, tests = canary(n)
    report = evaluate_task(backend, as_task(f"canary_{n}", tests, f"canary_{n}"), [answer])
    assert report.passed, [(o.test_id, o.failure_class, o.message, o.actual) for o in report.failures()]
    assert backend.scratch_objects() == []


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_backend_contains_the_answer_and_the_next_task_is_unaffected(backend: PostgresBackend, case: Case) -> None:
    t0 = time.monotonic()
    report = evaluate_task(backend, case_task(case), [case.answer])
    elapsed = time.monotonic() - t0
    outcome = report.outcomes[0]
    got = "passed" if outcome.passed else outcome.failure_class
    assert got in case.contained, (outcome.failure_class, outcome.message)
    assert elapsed < 2 * STATEMENT_BOUND, elapsed  # install and test, each bounded
    if outcome.actual is not None:
        assert sum(len(line) for line in outcome.actual) <= MAX_OUTPUT + 100
    _assert_canary_passes(backend)


@pytest.mark.parametrize("case", [c for c in CASES if c.flagged], ids=[c.name for c in CASES if c.flagged])
def test_blocked_answers_never_reach_the_database(
    backend: PostgresBackend, case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = backend.session()
    sent: list[tuple[str, str]] = []
    real_run = session.run

    def spy(script: str, *, isolated: bool, phase: str):
        sent.append((phase, script))
        return real_run(script, isolated=isolated, phase=phase)

    monkeypatch.setattr(session, "run", spy)
    report = evaluate_task(backend, case_task(case), [case.answer], safety=SafetyChecker("block"))
    outcome = report.outcomes[0]
    assert outcome.failure_class == "unsafe"
    assert outcome.message.startswith("safety check [")
    # Refused before anything of the answer (or the test that would call it) ran.
    assert not [phase for phase, script in sent if phase in ("install", "test")], sent


MEMORY_SCRIPT = """
import json
from pytest_plsqlbench.dialects import pg_server
from pytest_plsqlbench.dialects.postgres import PostgresBackend
from pytest_plsqlbench.runner import evaluate_task
from pytest_plsqlbench.settings import Settings
from pytest_plsqlbench.tasks import Task, Turn, UnitTest

pg_server.MEMORY_LIMIT = 512 << 20  # small, so the test is quick
hog = ("SELECT length(a) + length(b) + length(c) FROM (SELECT repeat(repeat('x', 1000000), 200) a, "
       "repeat(repeat('y', 1000000), 200) b, repeat(repeat('z', 1000000), 200) c) s;")

def task(name, script, expected):
    return Task(id=name, subset="adv", dialect="postgres",
                turns=(Turn(1, "p", (UnitTest("t", "output", script, expected),)),))

b = PostgresBackend(Settings.of(subsets=(), timeout=10), worker="memory")
b.start()
try:
    limits = open(f"/proc/{b.server.pid()}/limits").read()
    hogged = evaluate_task(b, task("hog", hog, ("600000000",)), ["SELECT 1;"]).outcomes[0]
    canary = evaluate_task(b, task("canary", "SELECT 40 + 2;", ("42",)), ["SELECT 1;"]).outcomes[0]
    print(json.dumps({
        "limited": any("address space" in l and str(512 << 20) in l for l in limits.splitlines()),
        "hog": [hogged.failure_class, hogged.error_code, hogged.message[:200]],
        "alive": b.server.alive(),
        "canary": canary.passed,
    }))
finally:
    b.stop()
"""


def test_runaway_memory_is_an_out_of_memory_error_not_a_dead_server() -> None:
    """In a fresh interpreter: the limit is set while the server starts, which the harness
    only does when it is small itself (a long-lived test worker may not be)."""
    done = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["limited"], "the embedded server runs without the memory limit"
    assert result["hog"][:2] == ["wrong_output", "53200"], result["hog"]
    assert result["alive"] and result["canary"]


def test_a_huge_result_does_not_grow_the_harness(backend: PostgresBackend) -> None:
    """Rows are streamed and dropped past the cap; the statement timeout ends the query."""
    before = psutil.Process().memory_info().rss
    case = Case("rows", "SELECT 1;", "SELECT generate_series(1, 500000000);", ("1",), ("timeout",), False)
    outcome = evaluate_task(backend, case_task(case), [case.answer]).outcomes[0]
    assert outcome.failure_class == "timeout"
    assert psutil.Process().memory_info().rss - before < 100 << 20


def test_a_result_cut_at_the_row_cap_says_so(backend: PostgresBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer printing exactly the first MAX_ROWS rows of a longer gold result must not match
    it: the cut is marked, as the character cap's is (a cap of 10 rows here, under the
    backend's character cap)."""
    from pytest_plsqlbench.dialects import postgres

    MAX_ROWS = 10
    monkeypatch.setattr(postgres, "MAX_ROWS", MAX_ROWS)
    session = backend.session()
    session.begin_task()
    try:
        whole = session.run(f"SELECT g FROM generate_series(1, {MAX_ROWS + 5}) g;", isolated=True, phase="test")
        exact = session.run(f"SELECT g FROM generate_series(1, {MAX_ROWS}) g;", isolated=True, phase="test")
    finally:
        session.end_task()
    assert whole.truncated and whole.lines[-1] == f"<result truncated at {MAX_ROWS} rows>"
    assert whole.lines[:MAX_ROWS] == exact.lines and not exact.truncated and whole.lines != exact.lines


# --------------------------------------------------------------------------- the whole plugin, -n 2
def write_adversarial_subset(root: Path) -> tuple[Path, Path, list[str]]:
    """Hostile tasks interleaved with canaries; returns (tasks folder, answers file, canary ids)."""
    folder = root / "advtasks"
    (folder / "adv").mkdir(parents=True)
    (folder / "adv.yaml").write_text("name: adv\nloader: yaml\ndialects: [postgres]\noptions: {dir: adv}\n")
    answers, canaries, position = [], [], 0
    for i, case in enumerate(CASES):
        items = [(case.name, case.answer, [{"id": "t", "kind": "output", "script": case.test, "expected": list(case.expected)}])]
        if i % 4 == 3 or i == len(CASES) - 1:
            n = len(canaries) + 1
            answer, tests = canary(n)
            items.append((f"canary_{n}", answer, tests))
            canaries.append(f"canary_{n}")
        for task_id, answer, tests in items:
            position += 1
            raw = {"id": task_id, "prompt": "p", "fixtures": ["shop"], "entry_points": [task_id], "tests": tests}
            (folder / "adv" / f"{position:02d}_{task_id}.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
            answers.append({"task_id": task_id, "answer": answer})
    answers_file = root / "adv-answers.jsonl"
    answers_file.write_text("".join(json.dumps(a) + "\n" for a in answers))
    return folder, answers_file, canaries


@pytest.mark.slow
def test_adversarial_subset_with_two_workers(pytester: pytest.Pytester) -> None:
    folder, answers, canaries = write_adversarial_subset(pytester.path)
    out = pytester.path / "r.json"
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--subset", "adv", "--plsql-tasks", str(folder), f"--plsql-answers={answers}",
        f"--plsql-results={out}", f"--plsql-timeout={TIMEOUT:g}", f"--plsql-max-output={MAX_OUTPUT}",
        "--plsql-safety=off", "-n", "2", "--no-loadscope-reorder", timeout=600,
    )
    wall = time.monotonic() - t0
    doc = json.loads(out.read_text())
    tests = {(t["task_id"], x["test_id"]): x for t in doc["tasks"] for x in t["tests"]}
    for case in CASES:
        rec = tests[(case.name, "t")]
        got = "passed" if rec["passed"] else rec["failure_class"]
        assert got in case.contained, (case.name, rec)
    for name in canaries:
        for test_id in ("own", "shop-intact", "limits", "no-leftovers"):
            assert tests[(name, test_id)]["passed"], (name, tests[(name, test_id)])
    # Every item's time is bounded by the timeouts (install plus test), none is the harness's fault.
    assert all(x["duration_s"] < 2 * STATEMENT_BOUND for x in tests.values()), sorted(
        (x["duration_s"], k) for k, x in tests.items())[-3:]
    assert doc["subsets"]["adv"]["failure_classes"]["infrastructure"] == 0
    assert doc["subsets"]["adv"]["excluded_tasks"] == []
    assert {x.get("worker") for x in tests.values()} == {"gw0", "gw1"}
    # Two embedded servers start, then at most ~20 s of timeouts split over two workers.
    assert wall < 120, wall
    assert not [p for p in ESCAPES.values() if p.exists()]
    assert "Traceback" not in result.stdout.str()


@pytest.mark.slow
def test_warn_mode_runs_the_answer_and_records_the_finding(pytester: pytest.Pytester) -> None:
    folder = pytester.path / "warntasks"
    (folder / "w").mkdir(parents=True)
    (folder / "w.yaml").write_text("name: w\nloader: yaml\ndialects: [postgres]\noptions: {dir: w}\n")
    raw = {"id": "w1", "prompt": "p", "entry_points": ["double_it"],
           "tests": [{"id": "t", "kind": "output", "script": "SELECT double_it(2);", "expected": ["4"]}]}
    (folder / "w" / "w1.yaml").write_text(yaml.safe_dump(raw))
    answer = textwrap.dedent("""\
        DROP TABLE IF EXISTS shop_copy;
        CREATE FUNCTION double_it(x int) RETURNS int LANGUAGE sql AS 'SELECT 2 * x';
    """)
    answers = pytester.path / "a.jsonl"
    answers.write_text(json.dumps({"task_id": "w1", "answer": answer}) + "\n")
    out = pytester.path / "r.json"
    base = ("-p", "no:cacheprovider", "--subset", "w", "--plsql-tasks", str(folder), f"--plsql-answers={answers}",
            f"--plsql-results={out}", "-p", "no:xdist")
    pytester.runpytest_subprocess(*base, "--plsql-safety=warn").assert_outcomes(passed=1)
    rec = json.loads(out.read_text())["tasks"][0]["tests"][0]
    assert rec["passed"] and "safety warning: safety check [drop]: DROP TABLE shop_copy" in rec["message"]
    pytester.runpytest_subprocess(*base, "--plsql-safety=block").assert_outcomes(failed=1)
    rec = json.loads(out.read_text())["tasks"][0]["tests"][0]
    assert rec["failure_class"] == "unsafe"

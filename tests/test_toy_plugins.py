"""The proof of the plug-in design (docs/redesign.md section 9): a third dialect, SQLite, added from
test code alone -- a ``conftest.py`` of a pytester project -- runs a task folder end to end, in
one process and on two xdist workers, with the package's own loader, judges, results and JUnit.

SQLite is a test double here, not a supported database: in memory, one per worker, the task's
time budget checked between statements only. What the core needs of a dialect and a family is
exactly what the conftest defines; naming ``sqlite`` or ``toy`` in the package to make this pass
would hide what it proves. The same plug-in, as an entry point of a distribution on PYTHONPATH,
is what the ``plsqlbench`` command sees outside pytest.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from pytest_plsqlbench import families, registry
from pytest_plsqlbench.errors import UsageError
from pytest_plsqlbench.generation.extract import _code_langs
from pytest_plsqlbench.loaders.yaml_tasks import load_task_file
from pytest_plsqlbench.results.reading import read_document
from pytest_plsqlbench.settings import resolve_database

pytest_plugins = ["pytester"]

CONFTEST = r'''
import re
import sqlite3
import time

import pytest

from pytest_plsqlbench import outcomes
from pytest_plsqlbench.errors import FixtureError, InfrastructureError
from pytest_plsqlbench.families import Column, Leaderboard
from pytest_plsqlbench.judges import Judge
from pytest_plsqlbench.lexicon import Lexicon, SafetyRules
from pytest_plsqlbench.outputs import format_row
from pytest_plsqlbench.outcomes import Verdict
from pytest_plsqlbench.protocols import BackendBase, DbError, Execution, OutputCapture, SessionBase
from pytest_plsqlbench.reporting.table import family_table_lines
from pytest_plsqlbench.tasks import Task, Turn, UnitTest


def statements(script):
    """Complete SQLite statements of ``script`` with the line each starts on (sqlite3 decides)."""
    buf, start = [], 1
    for n, line in enumerate(script.splitlines(), 1):
        if not buf and not line.strip():
            continue
        if not buf:
            start = n
        buf.append(line)
        text = "\n".join(buf)
        if sqlite3.complete_statement(text):
            yield start, text.strip()
            buf = []
    if "".join(buf).strip():
        yield start, "\n".join(buf).strip()


def failure_class(message, phase):
    if "interrupted" in message:
        return outcomes.TIMEOUT
    if "not authorized" in message:
        return outcomes.UNSAFE
    if re.search(r"no such (table|column|function)|wrong number of arguments", message):
        return outcomes.INTERFACE
    if phase == "install" or "syntax error" in message or "incomplete input" in message:
        return outcomes.INVALID_ARTIFACT
    return outcomes.WRONG_OUTPUT


def expect(condition, message):
    """The tests' RAISE: SELECT expect(<condition>, 'why') fails the statement when false."""
    if not condition:
        raise ValueError(message)
    return 1


class SqliteSession(SessionBase):
    """The task is one transaction (rolled back at its end); an isolated script a savepoint."""

    def __init__(self, backend):
        self.backend = backend

    @property
    def conn(self):
        return self.backend.conn

    def begin_task(self):
        self.conn.execute("BEGIN")

    def end_task(self):
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def run(self, script, *, isolated, phase):
        execution = Execution()
        out = OutputCapture.into(execution, self.backend.settings.database.max_output)
        t0 = time.monotonic()
        self.conn.execute("SAVEPOINT script")
        try:
            for line, text in statements(script):
                if self.deadline is not None and time.monotonic() > self.deadline:
                    execution.error = DbError("interrupted: task budget spent", None, outcomes.TIMEOUT, line)
                    break
                try:
                    cursor = self.conn.execute(text)
                    for row in cursor.fetchall() if cursor.description else ():
                        out.append_row(format_row(row))
                except sqlite3.Error as exc:
                    execution.error = DbError(str(exc), type(exc).__name__, failure_class(str(exc), phase), line)
                    break
        finally:
            if isolated or execution.error is not None:
                self.conn.execute("ROLLBACK TO script")
            self.conn.execute("RELEASE script")
        execution.truncated = out.truncated
        execution.duration_s = time.monotonic() - t0
        return execution


class SqliteBackend(BackendBase):
    """One in-memory database per worker: fixtures load as the owner, then the candidate may
    not write to their tables (the authorizer is the unprivileged role)."""

    dialect = "sqlite"

    def __init__(self, settings, worker):
        super().__init__()
        self.settings, self.worker = settings, worker
        self.conn = None
        self.owned = set()

    def start(self):
        # Autocommit (the session opens the task's transaction); any thread: the look-ahead runs on one.
        self.conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.conn.create_function("expect", 2, expect)
        self.conn.set_authorizer(self._authorize)
        self._session = SqliteSession(self)

    def stop(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _authorize(self, action, table, *rest):
        if action == sqlite3.SQLITE_ATTACH:
            return sqlite3.SQLITE_DENY
        writes = (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE, sqlite3.SQLITE_DROP_TABLE)
        if action in writes and table in self.owned and not self._loading:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    _loading = False

    @property
    def version(self):
        return f"SQLite {sqlite3.sqlite_version}"

    def _load(self, fixture):
        self._loading = True
        try:
            self.conn.executescript(fixture.script)
        except sqlite3.Error as exc:
            raise FixtureError(f"fixture {fixture.key}: {exc}") from None
        finally:
            self._loading = False
        self.owned |= {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def session(self):
        return self._session

    def recover(self):
        raise InfrastructureError("an in-memory SQLite database cannot be recovered")


class SqliteDialect:
    name = "sqlite"
    label = "SQLite (toy)"
    kinds = ("memory",)
    runs_without_setup = True  # an in-memory database; PostgreSQL, registered first, stays the default
    system_prompt = "You write SQLite SQL."
    lexicon = Lexicon(fence_names=frozenset({"sqlite", "sqlite3"}))  # (a tag containing "sql" is code anyway)
    safety = SafetyRules()

    def resolve_database(self, kind, dsn):
        return kind or self.kinds[0], dsn

    def preflight(self, database):
        pass

    def make_backend(self, settings, worker):
        return SqliteBackend(settings, worker)


def pytest_plsql_dialects():
    return [SqliteDialect()]


# ------------------------------------------------------------------ the toy family
class ToyEqualJudge(Judge):
    """The first line the test script returns, as a number, equals the test's ``want``."""

    kind = "toy-equal"

    def judge(self, ctx, turn, test, execution):
        if execution.error is not None:
            return Verdict(turn, test.id, False, execution.error.failure_class, execution.error.short())
        got = execution.lines[0] if execution.lines else ""
        try:
            ok = float(got) == float(test.options["want"])
        except ValueError:
            ok = False
        return Verdict(turn, test.id, ok, outcomes.PASSED if ok else outcomes.WRONG_OUTPUT,
                       "" if ok else f"got {got!r}", [str(test.options["want"])], list(execution.lines))


class ToyFamily:
    """The ``Family`` protocol implemented from scratch (no ``MetricFamily`` base class). Its
    loader's manifests need no ``metrics: toy``; its dataset ranks on a leaderboard of its own."""

    name = "toy"
    columns = (Column("toy_accuracy", "Toy accuracy"),)
    paper_dialect = None
    external_figures = frozenset()
    loaders = frozenset({"toy"})
    sources = {}
    charts = {}
    leaderboard = Leaderboard(splits={"test": ("toy_board",)}, notes={"toy_board": "the toy board has two tasks"})

    def task_figures(self, scores, task):
        return {}

    def subset_figures(self, data):
        tests = [t for task in data.tasks for t in task.tests]
        return {"tasks": len(data.tasks), "tests": len(tests),
                "toy_accuracy": sum(t.passed for t in tests) / len(tests)}

    def summary_lines(self, subsets, verbose=0):
        return [*family_table_lines(self, subsets, cis=verbose >= 0),
                *(f"toy family: {name} accuracy {m['toy_accuracy']:.2f}" for name, m in subsets.items())]

    def document_figures(self, subsets, tasks):
        pass

    def html_sections(self, document, subsets):
        return []


def pytest_plsql_load_subset(config, manifest, settings):
    """Loader ``toy``: the tasks are the manifest's ``options.tasks``, one toy-equal test each."""
    if manifest.loader != "toy":
        return None
    return [
        Task(id=t["id"], subset=manifest.name, dialect=settings.database.dialect,
             turns=(Turn(1, t["prompt"], (UnitTest("value", "toy-equal", t["query"], options={"want": t["want"]}),),
                         reference=t["reference"]),))
        for t in manifest.options["tasks"]
    ]


def pytest_plsql_judges(config):
    return [ToyEqualJudge()]


def pytest_plsql_families():
    return [ToyFamily()]
'''

MANIFEST = """\
name: toy
description: two SQLite tasks of the toy dialect, read by the package's YAML loader
loader: yaml
dialects: [sqlite]
options:
  dir: toy
"""

FIXTURE = """\
CREATE TABLE nums (n INTEGER PRIMARY KEY);
INSERT INTO nums (n) VALUES (1), (2), (3);
"""

#: Per-dialect values (entry_points, reference) keyed by the toy dialect's name.
DOUBLED = """\
id: doubled
entry_points: {sqlite: [doubled]}
fixtures: [nums]
prompt: Create a view doubled(n, d) giving d = 2 * n for every n of nums.
reference: {sqlite: "CREATE VIEW doubled AS SELECT n, 2 * n AS d FROM nums;"}
tests:
  - id: rows
    kind: output
    sqlite: SELECT d FROM doubled ORDER BY n;
    expected: ["2", "4", "6"]
  - id: count
    kind: assert
    sqlite: |
      SELECT expect((SELECT count(*) FROM doubled) = 3, 'doubled: 3 rows expected');
"""

SQUARES = """\
id: squares
entry_points: [squares]
fixtures: [nums]
prompt: Create a view squares(n, s) giving s = n * n for every n of nums.
reference: CREATE VIEW squares AS SELECT n, n * n AS s FROM nums;
tests:
  - id: rows
    kind: output
    sqlite: SELECT s FROM squares ORDER BY n;
    expected: ["1", "4", "9"]
  - id: count
    kind: assert
    sqlite: |
      SELECT expect((SELECT count(*) FROM squares) = 3, 'squares: 3 rows expected');
"""

#: The toy family's subset: its own loader (the tasks are in the manifest), judge and metrics; no
#: ``metrics:``: the family reading the loader scores it. Its toy accuracy is its leaderboard score.
FAMILY_MANIFEST = """\
name: toyfam
description: two tasks of the toy family
loader: toy
dialects: [sqlite]
paper: {leaderboard: toy_board, split: test, comparable_metric: toy_accuracy}
options:
  tasks:
    - {id: answer, prompt: "Create a view answer(x) holding 6 * 7.", query: "SELECT x FROM answer;", want: 42,
       reference: "CREATE VIEW answer AS SELECT 42 AS x;"}
    - {id: half, prompt: "Create a view half(x) holding 1 / 2.", query: "SELECT x FROM half;", want: 0.5,
       reference: "CREATE VIEW half AS SELECT 0.5 AS x;"}
"""

ANSWERS = [
    {"task_id": "doubled", "turn": 1, "answer": "CREATE VIEW doubled AS SELECT n, n + n AS d FROM nums;"},
    {"task_id": "squares", "turn": 1, "answer": "CREATE VIEW squares AS SELECT n, n + n AS s FROM nums;"},  # wrong
    {"task_id": "answer", "turn": 1, "answer": "CREATE VIEW answer AS SELECT 6 * 7 AS x;"},
    {"task_id": "half", "turn": 1, "answer": "CREATE VIEW half AS SELECT 1 / 2 AS x;"},  # wrong: integer division
]


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    """The pytester project: the conftest, the task folder with its fixture, the answers."""
    pytester.makeconftest(CONFTEST)
    tasks = pytester.mkdir("tasks")
    (tasks / "toy.yaml").write_text(MANIFEST)
    (tasks / "toyfam.yaml").write_text(FAMILY_MANIFEST)
    (tasks / "toy").mkdir()
    (tasks / "toy" / "doubled.yaml").write_text(DOUBLED)
    (tasks / "toy" / "squares.yaml").write_text(SQUARES)
    (tasks / "fixtures" / "nums").mkdir(parents=True)
    (tasks / "fixtures" / "nums" / "sqlite.sql").write_text(FIXTURE)
    (pytester.path / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in ANSWERS))
    return pytester.path


def _conftest() -> dict[str, Any]:
    """The conftest's names, in this process."""
    names: dict[str, Any] = {}
    exec(compile(CONFTEST, "conftest.py", "exec"), names)
    return names


def _run(project: Path, pytester: pytest.Pytester, workers: int) -> tuple[pytest.RunResult, dict[str, Any], Path]:
    results, junit = project / f"r{workers}.json", project / f"j{workers}.xml"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "-n", str(workers), "-rA",
        "--subset", "toy,toyfam", "--plsql-dialect", "sqlite", "--plsql-db", "memory",
        "--plsql-tasks", str(project / "tasks"), "--plsql-answers", str(project / "answers.jsonl"),
        f"--plsql-results={results}", f"--junitxml={junit}",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str() + result.stderr.str()
    return result, read_document(results), junit


def _comparable(doc: dict[str, Any]) -> Any:
    """The document without what differs between two equal runs (times, workers)."""
    drop = {"duration_s", "worker", "workers", "started", "finished", "elapsed_s"}

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in drop}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(doc)


def test_a_dialect_and_a_family_from_a_conftest_run_end_to_end(
    project: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reader checks each subset's figures with its family: this process needs the toy family
    # too (the conftest's own class; outside pytest an entry point would register it).
    monkeypatch.setattr(families, "REGISTRY", families.FamilyRegistry([_conftest()["ToyFamily"]()]))

    serial, doc, junit = _run(project, pytester, 0)
    serial.assert_outcomes(passed=4, failed=2)
    serial.stdout.fnmatch_lines_random([
        "PASSED toy/doubled/rows", "PASSED toy/doubled/count", "PASSED toy/squares/count", "FAILED toy/squares/rows*",
        "PASSED toyfam/answer/value", "FAILED toyfam/half/value - *got '0'*",
    ])

    assert doc["header"]["dialect"] == "sqlite"
    tests = {(t["subset"], t["task_id"], x["test_id"]): x for t in doc["tasks"] for x in t["tests"]}
    assert {k: v["passed"] for k, v in tests.items()} == {
        ("toy", "doubled", "rows"): True, ("toy", "doubled", "count"): True,
        ("toy", "squares", "rows"): False, ("toy", "squares", "count"): True,
        ("toyfam", "answer", "value"): True, ("toyfam", "half", "value"): False,
    }
    wrong = tests[("toy", "squares", "rows")]
    assert wrong["failure_class"] == "wrong_output"
    assert wrong["expected"] == ["1", "4", "9"] and wrong["actual"] == ["2", "4", "6"]
    assert tests[("toyfam", "half", "value")]["failure_class"] == "wrong_output"
    toy, toyfam = doc["subsets"]["toy"], doc["subsets"]["toyfam"]
    assert (toy["metric_family"], toy["tasks"], toy["tests"], toy["mean_test_pass"]) == ("plsqlbench", 2, 4, 0.75)
    assert (toyfam["metric_family"], toyfam["tasks"], toyfam["tests"], toyfam["toy_accuracy"]) == ("toy", 2, 2, 0.5)
    serial.stdout.fnmatch_lines(["*Subset*Tasks*Tests*Toy accuracy*", "toyfam*2*2*50.00*",
                                 "toy family: toyfam accuracy 0.50"])

    root = ElementTree.parse(junit).getroot()
    assert {c.get("name"): c.find("failure") is None for c in root.iter("testcase")} == {
        "toy/doubled/rows": True, "toy/doubled/count": True, "toy/squares/rows": False, "toy/squares/count": True,
        "toyfam/answer/value": True, "toyfam/half/value": False,
    }
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert properties["plsql.dialect"] == "sqlite" and properties["plsql.toyfam.toy_accuracy"] == "50.00"

    parallel, doc2, _ = _run(project, pytester, 2)
    parallel.assert_outcomes(passed=4, failed=2)
    assert _comparable(doc2) == _comparable(doc)

    # The reference answers (one given per dialect in the task file) pass; the dialect's marker is registered.
    reference = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--subset", "toy,toyfam", "--plsql-tasks", str(project / "tasks"),
        "--plsql-model=reference", "--strict-markers", "-m", "dialect_sqlite",
    )
    assert reference.ret == pytest.ExitCode.OK, reference.stdout.str() + reference.stderr.str()
    reference.assert_outcomes(passed=6)

    # Outside pytest the same plug-in is found through an entry point of a distribution on
    # PYTHONPATH (a dist-info folder is all importlib.metadata reads).
    plug = project / "plug"
    (plug / "toyplug-0.dist-info").mkdir(parents=True)
    (plug / "toyplug.py").write_text(CONFTEST)
    (plug / "toyplug-0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplug\nVersion: 0\n")
    (plug / "toyplug-0.dist-info" / "entry_points.txt").write_text("[pytest_plsqlbench]\ntoy = toyplug\n")
    path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(plug)) if p)

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "pytest_plsqlbench.cli", *args], capture_output=True, text=True,
                              cwd=project, env={**os.environ, "PYTHONPATH": path}, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    listed = cli("subsets", "--tasks", str(project / "tasks"))
    assert re.search(r"^toy +\[sqlite\] +family plsqlbench$", listed, re.M)
    assert re.search(r"^toyfam +\[sqlite\] +family toy$", listed, re.M)
    assert re.search(r"^dialects: .*\bsqlite\b", listed, re.M) and re.search(r"^families: .*\btoy\b", listed, re.M)
    report = cli("report", str(project / "r0.json"))
    assert re.search(r"^toyfam +2 +2 +50\.00$", report, re.M) and "toy family: toyfam accuracy 0.50" in report
    # The leaderboard's datasets, splits and notes are the family's.
    entry = json.loads(cli("leaderboard", str(project / "r0.json"), "--method", "m"))
    assert entry["scores"] == {"test_overall": {"mean_test_pass": 50.0}, "overall_test": {"mean_test_pass": 50.0},
                               "toy_board": {"mean_test_pass": 50.0}}
    assert entry["note"] == "the toy board has two tasks"


#: Answers failing in each way the core has a class for (the dialect's session classifies them).
BAD_ANSWERS = [
    {"task_id": "doubled", "turn": 1, "answer": "DROP TABLE nums;\nCREATE VIEW doubled AS SELECT 1 AS n, 2 AS d;"},
    {"task_id": "squares", "turn": 1, "answer": "CREATE VIEW squares AS SELEC n FROM nums;"},
    {"task_id": "answer", "turn": 1, "answer": "ATTACH DATABASE ':memory:' AS x;\nCREATE VIEW answer AS SELECT 42 AS x;"},
    {"task_id": "half", "turn": 1, "answer": "CREATE VIEW half AS SELECT x FROM nosuch;"},
]


def test_failing_answers_get_the_core_failure_classes(
    project: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The safety check reads the toy's scripts with its Lexicon (a DROP of a fixture table is
    caught before the answer runs); what it lets through, the backend's authorizer refuses."""
    monkeypatch.setattr(families, "REGISTRY", families.FamilyRegistry([_conftest()["ToyFamily"]()]))
    (project / "bad.jsonl").write_text("".join(json.dumps(a) + "\n" for a in BAD_ANSWERS))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--subset", "toy,toyfam", "--plsql-tasks", str(project / "tasks"),
        "--plsql-answers", str(project / "bad.jsonl"), f"--plsql-results={project / 'bad.json'}",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str() + result.stderr.str()
    doc = read_document(project / "bad.json")
    classes = {(t["task_id"], x["test_id"]): (x["failure_class"], x["message"].split(":")[0])
               for t in doc["tasks"] for x in t["tests"]}
    assert classes == {
        ("doubled", "rows"): ("unsafe", "safety check [drop]"), ("doubled", "count"): ("unsafe", "safety check [drop]"),
        ("squares", "rows"): ("invalid_artifact", "the answer failed to install"),
        ("squares", "count"): ("invalid_artifact", "the answer failed to install"),
        ("answer", "value"): ("unsafe", "the answer failed to install"),
        ("half", "value"): ("interface", "[OperationalError] no such table"),
    }

def test_yaml_per_dialect_values_may_be_keyed_by_a_plugged_in_dialect(tmp_path: Path) -> None:
    """The YAML loader took a mapping as per-dialect only when keyed by postgres/oracle."""
    (tmp_path / "doubled.yaml").write_text(DOUBLED.replace("fixtures: [nums]\n", ""))
    task = load_task_file(tmp_path / "doubled.yaml", "toy", "sqlite", (), ("sqlite",))
    assert task.entry_points == ("doubled",)
    assert task.turns[0].reference == "CREATE VIEW doubled AS SELECT n, 2 * n AS d FROM nums;"
    (tmp_path / "other.yaml").write_text(
        "id: other\nprompt: p\nreference: {postgres: SELECT 1;}\ntests: [{id: t, sqlite: SELECT 1;}]\n"
    )
    with pytest.raises(UsageError, match="other.yaml reference: missing the sqlite version"):
        load_task_file(tmp_path / "other.yaml", "toy", "sqlite", (), ("sqlite",))


def test_the_database_kinds_are_the_dialects_own() -> None:
    """The dialect's kinds decide --plsql-db (its argparse choices, PostgreSQL's and Oracle's kinds,
    refused the end-to-end run's ``--plsql-db memory``)."""
    dialect = _conftest()["SqliteDialect"]()
    assert resolve_database(dialect, None, None) == ("memory", None)
    assert resolve_database(dialect, "memory", None) == ("memory", None)
    with pytest.raises(UsageError, match=r"--plsql-db=embedded: sqlite has no such database \(it has: memory\)"):
        resolve_database(dialect, "embedded", None)


def test_the_toy_is_not_the_default_and_its_fence_names_are_code() -> None:
    """The toy runs without setup too, yet the default stays the first registered dialect that does
    (the built-in PostgreSQL): registering a dialect does not move runs there. Its fence names join
    the tags code extraction takes as code."""
    found = registry.Registry([*registry.outside_pytest().dialects.values(), _conftest()["SqliteDialect"]()])
    assert found.default_dialect().name == "postgres"
    assert {"sqlite", "sqlite3", "plpgsql", "oracle", "sql"} <= _code_langs(found)

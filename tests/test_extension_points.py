"""The core's extension points: node ids, item records, episodes, judges and metric families.

The end-to-end test plugs a new judge kind (cumulative: each test sees what the earlier ones
did) and a new metric family into a run from a ``conftest.py``, the way ProcArena plugs in.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_plsqlbench import families, nodeids
from pytest_plsqlbench.answers import Answer
from pytest_plsqlbench.episode import Episode
from pytest_plsqlbench.errors import UsageError
from pytest_plsqlbench.families import REGISTRY, Column, CoreFamily, FamilyRegistry, MetricFamily
from pytest_plsqlbench.judges import DEFAULT, Judge, JudgeRegistry
from pytest_plsqlbench.manifests import discover, load_manifest
from pytest_plsqlbench.outcomes import Verdict
from pytest_plsqlbench.results.record import TaskFacts, TestOutcome, json_value
from pytest_plsqlbench.tasks import Task, Turn, UnitTest

pytest_plugins = ["pytester"]


# --------------------------------------------------------------------------- node ids
@pytest.mark.parametrize(
    ("nodeid", "parts"),
    [
        ("smoke/clamp_value/below", ("smoke", "clamp_value", "below", 1, 0, False)),
        ("spider2-mt/conv/turn-3/test-1", ("spider2-mt", "conv", "test-1", 3, 0, True)),
        ("mbpp/Mbpp-2/sample-4/case-1", ("mbpp", "Mbpp-2", "case-1", 1, 3, False)),
        ("m/t/sample-2/turn-2/x", ("m", "t", "x", 2, 1, True)),
    ],
)
def test_node_ids_round_trip(nodeid: str, parts: tuple) -> None:
    parsed = nodeids.parse(nodeid)
    assert parsed is not None
    assert (parsed.subset, parsed.node, parsed.test_id, parsed.turn, parsed.sample, parsed.multi_turn) == parts
    assert str(parsed) == nodeid
    assert nodeids.scope_of(nodeid) == f"{parts[0]}/{parts[1]}"


@pytest.mark.parametrize("nodeid", ["tests/test_x.py::test_y", "smoke/only", "a/b/c/d/e"])
def test_other_node_ids_are_not_benchmark_items(nodeid: str) -> None:
    assert nodeids.parse(nodeid) is None


def test_junit_classname_is_the_task_with_its_sample() -> None:
    assert nodeids.junit_classname("s/t/turn-2/x") == "s.t"
    assert nodeids.junit_classname("s/t/sample-2/turn-2/x") == "s.t.sample-2"


# --------------------------------------------------------------------------- records
def test_record_round_trip_keeps_numbers_typed() -> None:
    rec = TestOutcome(
        subset="s", task_id="t", node="t", turn=1, test_id="x", passed=True, score=1.35,
        extra={"speedup": 1.35, "scans": 12, "ok": True, "note": "n" * 5000, "why": ValueError("v")},
        task=TaskFacts(metadata={"a": 1}, n_tests=3),
    )
    data = json.loads(json.dumps(rec.to_wire()))
    back = TestOutcome.from_wire(data)
    assert back.extra["speedup"] == 1.35 and back.extra["scans"] == 12 and back.extra["ok"] is True
    assert back.task == TaskFacts(metadata={"a": 1}, n_tests=3)
    assert back.to_json()["score"] == 1.35
    assert "task" not in back.to_json()
    assert json_value("n" * 5000) == "n" * 1000 and json_value(ValueError("v")) == "v"


def test_outcome_score_follows_passed_unless_given() -> None:
    assert Verdict(1, "x", True).score == 1.0
    assert Verdict(1, "x", False, "wrong_output").score == 0.0
    assert Verdict(1, "x", True, score=2.5).score == 2.5


# --------------------------------------------------------------------------- episodes
def _task(turns: int) -> Task:
    return Task(
        id="t", subset="s", dialect="postgres",
        turns=tuple(Turn(i, f"prompt {i}", (UnitTest("x", "assert", "SELECT 1;"),)) for i in range(1, turns + 1)),
    )


def test_episode_feeds_back_earlier_answers_and_carries_failures() -> None:
    seen = []

    def ask(task, turn, history, sample):  # noqa: ANN001, ANN202
        seen.append((turn, [h.answer for h in history]))
        if turn == 2:
            return Answer(code=None, status="error", error="boom")
        return Answer(code=f"code {turn}")

    episode = Episode(_task(3))
    assert episode.play(ask)
    assert seen == [(1, []), (2, ["code 1"])]
    assert [a.status for a in episode.answers] == ["ok", "error", "error"]
    assert episode.answers[2].error == "turn 2: boom"

    stopped = Episode(_task(3))
    assert stopped.play(ask, carry_failures=False)  # ends at the failed turn, not "busy"
    assert len(stopped.answers) == 2


def test_episode_stops_when_an_answer_is_not_available_yet() -> None:
    episode = Episode(_task(2))
    assert not episode.play(lambda task, turn, history, sample: None)
    assert episode.answers == [] and not episode.done


# --------------------------------------------------------------------------- registries
def test_unknown_kind_is_refused_by_the_registry_not_the_task_model() -> None:
    test = UnitTest("x", "state", "CALL p();")  # a kind a plugin may define: the task model accepts it
    with pytest.raises(ValueError, match="unknown kind 'state'"):
        DEFAULT.check(test)

    class StateJudge(Judge):
        kind = "state"

    JudgeRegistry().add([StateJudge()]).check(test)
    with pytest.raises(ValueError, match="kind 'output' needs 'expected'"):
        UnitTest("y", "output", "SELECT 1;")


def test_unknown_metric_family_is_one_clear_error() -> None:
    with pytest.raises(UsageError, match="unknown metric family 'nope'"):
        FamilyRegistry().family("nope")
    # No default family: a subset naming none has the core's figures alone.
    assert type(REGISTRY.family(None)) is CoreFamily and not REGISTRY.family(None).name
    assert isinstance(REGISTRY.family("plsqlbench"), MetricFamily)


def test_a_manifest_without_metrics_belongs_to_the_family_reading_its_loader(tmp_path: Path) -> None:
    """The bundled manifests without ``metrics:`` are their loader's family's; a loader no family
    reads is one clear error naming it when a run chooses the subset."""
    known = discover()
    assert {known["spider"].metrics, known["mbpp-plus"].metrics, known["smoke"].metrics} == {"plsqlbench"}
    assert known["procarena-sample"].metrics == "procarena"
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nloader: nobody-reads-me\n")
    mine = load_manifest(path)
    assert mine.metrics is None
    with pytest.raises(UsageError, match="no registered family reads loader 'nobody-reads-me'"):
        families.of_manifest(mine)


def test_the_family_registry_takes_the_protocol_not_the_base_class() -> None:
    """A family need not subclass MetricFamily (tests/test_toy_plugins.py runs one end to end);
    something missing a member of the ``Family`` protocol is refused with its repr."""

    class Bare:
        name = "bare"
        columns = ()
        paper_dialect = None
        external_figures = frozenset()
        loaders = frozenset()
        sources = {}
        leaderboard = None
        charts = {}

        def task_figures(self, scores, task):
            return {}

        def subset_figures(self, data):
            return {}

        def summary_lines(self, subsets, verbose=0):
            return []

        def document_figures(self, subsets, tasks):
            pass

        def html_sections(self, document, subsets):
            return []

    bare = Bare()
    assert FamilyRegistry([bare]).family("bare") is bare
    del Bare.html_sections
    with pytest.raises(TypeError, match="is not a Family with a name"):
        FamilyRegistry([Bare()])


# --------------------------------------------------------------------------- a plugged-in family
CONFTEST = r'''
import pytest

from pytest_plsqlbench import Answer
from pytest_plsqlbench.families import Column, CoreFamily
from pytest_plsqlbench.judges import Judge
from pytest_plsqlbench.outcomes import Verdict
from pytest_plsqlbench.tasks import Task, Turn, UnitTest

#: Each run of it adds one to a session setting and prints the new value.
BUMP = ("SELECT set_config('bench.n', (coalesce(nullif(current_setting('bench.n', true), ''), '0')::int + 1)::text,"
        " false);")


class CountJudge(Judge):
    """Test k passes when the count is k: only true when tests see the earlier tests' effects."""

    kind = "count"
    mode = "cumulative"

    def needs_expectation(self, test):
        return True

    def prepare(self, ctx, tests):
        ctx.worker_cache.setdefault("prepared", []).append(ctx.task.id)
        for turn, test in tests:
            ctx.expected[(turn.index, test.id)] = str(test.options["k"])

    def judge(self, ctx, turn, test, execution):
        want = ctx.expected[(turn, test.id)]
        got = execution.lines[-1] if execution.lines else ""
        passed = got == want
        return Verdict(turn, test.id, passed, "passed" if passed else "wrong_output",
                           "" if passed else f"count {got}, expected {want}",
                           score=int(got) / int(want), extra={"count": int(got), "prepared": len(ctx.worker_cache["prepared"])})


class CountingFamily(CoreFamily):
    name = "counting"
    columns = (Column("mean_test_pass", "Mean Test"), Column("mean_score", "Mean score", unit="ratio"))

    def subset_figures(self, data):
        figures = super().subset_figures(data)
        scores = [t.score for task in data.tasks for t in task.tests]
        figures["mean_score"] = sum(scores) / len(scores)
        return figures


def pytest_plsql_judges(config):
    return [CountJudge()]


def pytest_plsql_metric_families():
    return [CountingFamily()]


def pytest_plsql_load_subset(config, manifest, settings):
    if manifest.loader != "counting":
        return None
    tests = tuple(UnitTest(f"call-{k}", "count", BUMP, options={"k": k}) for k in (1, 2, 3))
    return [Task(id=f"task{i}", subset=manifest.name, dialect=settings.database.dialect,
                 turns=(Turn(1, "count", tests, reference="SELECT 1;"),)) for i in (1, 2)]
'''


def test_a_conftest_plugs_in_a_cumulative_judge_and_a_metric_family(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    tasks = pytester.mkdir("mytasks")
    (tasks / "counting.yaml").write_text("name: counting\nloader: counting\ndialects: [postgres]\nmetrics: counting\n")
    results = pytester.path / "r.json"
    result = pytester.runpytest_subprocess(
        "--subset", "counting", "--plsql-tasks", str(tasks), "--plsql-model=reference",
        "--plsql-safety=off", f"--plsql-results={results}", "-p", "no:randomly",
    )
    assert result.ret == 0, result.stdout.str()
    doc = json.loads(results.read_text())
    subset = doc["subsets"]["counting"]
    assert subset["metric_family"] == "counting"
    assert subset["mean_test_pass"] == 1.0 and subset["mean_score"] == 1.0
    tests = {(t["task_id"], x["test_id"]): x for t in doc["tasks"] for x in t["tests"]}
    assert [tests[("task1", f"call-{k}")]["extra"]["count"] for k in (1, 2, 3)] == [1, 2, 3]  # ints, cumulative
    assert isinstance(tests[("task1", "call-3")]["score"], float)
    # Expectations are prepared once per task, and the worker cache outlives a task.
    assert tests[("task2", "call-1")]["extra"]["prepared"] == 2
    result.stdout.fnmatch_lines(["*Subset*Tasks*Tests*Mean Test*Mean score*", "counting*2*6*100.00*1.00x*"])


def test_a_kind_without_a_judge_stops_the_run_with_one_line(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST.replace("return [CountJudge()]", "return []"))
    tasks = pytester.mkdir("mytasks")
    (tasks / "counting.yaml").write_text("name: counting\nloader: counting\ndialects: [postgres]\nmetrics: counting\n")
    result = pytester.runpytest_subprocess("--subset", "counting", "--plsql-tasks", str(tasks), "--plsql-model=reference")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*task 'task1': unit test 'call-1': unknown kind 'count'*"])
    assert "Traceback" not in result.stderr.str()


def test_a_manifest_naming_an_unknown_family_stops_the_run(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    tasks = pytester.mkdir("mytasks")
    (tasks / "counting.yaml").write_text("name: counting\nloader: counting\ndialects: [postgres]\nmetrics: nope\n")
    result = pytester.runpytest_subprocess("--subset", "counting", "--plsql-tasks", str(tasks), "--plsql-model=reference")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*counting.yaml: unknown metric family 'nope'*"])


# --------------------------------------------------------------------------- families in documents and reports
class _RatioFamily(CoreFamily):
    name = "ratio-test"
    columns = (Column("mean_test_pass", "Mean Test"), Column("speedup", "Speedup", unit="ratio"))

    def subset_figures(self, data):  # noqa: ANN001, ANN201
        figures = super().subset_figures(data)
        scores = [t.score for task in data.tasks for t in task.tests if t.score is not None]
        figures["speedup"] = len(scores) / sum(1 / s for s in scores)  # harmonic mean
        return figures


def _entries(subset: str, scores: list[float]) -> list[dict]:
    return [
        {"subset": subset, "task_id": f"t{i}", "n_turns": 1, "n_tests": 1,
         "tests": [{"turn": 1, "test_id": "x", "sample": 0, "passed": True, "failure_class": "passed", "score": s}]}
        for i, s in enumerate(scores)
    ]


def test_document_summary_report_and_merge_take_columns_from_the_family(tmp_path: Path) -> None:
    from pytest_plsqlbench.reporting.merge import merge_documents
    from pytest_plsqlbench.reporting.render import render
    from pytest_plsqlbench.results import build_document
    from pytest_plsqlbench.summary import summary_lines

    REGISTRY.add([_RatioFamily()])
    header = {"subsets": ["fast", "smoke"], "samples": 1}
    info = {"fast": {"metric_family": "ratio-test"}, "smoke": {}}
    tasks = _entries("fast", [2.0, 0.5]) + _entries("smoke", [1.0])
    doc = build_document(header, tasks, info)
    assert doc["subsets"]["fast"]["metric_family"] == "ratio-test"
    assert doc["subsets"]["fast"]["speedup"] == pytest.approx(0.8)  # harmonic mean of 2 and 0.5
    # A subset naming no family has the core's figures alone (no default family).
    assert doc["subsets"]["smoke"]["metric_family"] == "" and "speedup" not in doc["subsets"]["smoke"]
    lines = "\n".join(summary_lines(doc))
    assert "Speedup" in lines and "0.80x" in lines and "Episode Pass@1" in lines  # one table per family
    html = render(doc, "html")
    assert "Speedup" in html and "0.80x" in html
    # merge rebuilds each subset with the family its document names
    half = [(f"p{n}", build_document({**header, "shard": f"{n}/2"}, part, info)) for n, part in
            enumerate((tasks[:1], tasks[1:]), 1)]
    merged = merge_documents(half)
    assert merged["subsets"]["fast"]["speedup"] == pytest.approx(0.8)


def test_a_report_of_a_family_not_installed_falls_back_to_the_default_columns(caplog: pytest.LogCaptureFixture) -> None:
    from pytest_plsqlbench.summary import summary_lines

    doc = {"subsets": {"x": {"metric_family": "not-installed", "tasks": 1, "tests": 1, "mean_test_pass": 1.0}}}
    lines = summary_lines(doc)
    assert any("Mean Test Pass@1" in line for line in lines)
    assert "unknown metric family 'not-installed'" in caplog.text


# --------------------------------------------------------------------------- cumulative judging without a database
class _FakeSession:
    """Records what ran; a script's output is the number of non-isolated scripts run so far in the scope."""

    def __init__(self) -> None:
        self.scope_epoch = 0
        self.log: list[tuple[str, bool]] = []
        self.kept = 0

    def begin_task(self) -> None:
        self.kept = 0

    def end_task(self) -> None:
        self.kept = 0

    def run(self, script: str, *, isolated: bool, phase: str):  # noqa: ANN201
        from pytest_plsqlbench.dialects.base import Execution

        self.log.append((script, isolated))
        if not isolated:
            self.kept += 1
        return Execution(lines=[str(self.kept)])


class _FakeBackend:
    dialect = "postgres"

    def __init__(self) -> None:
        self._session = _FakeSession()
        self.judge_cache: dict = {}

    def ensure_fixtures(self, fixtures) -> None:  # noqa: ANN001
        pass

    def session(self) -> _FakeSession:
        return self._session

    def recover(self) -> None:
        pass


class _Cumulative(Judge):
    kind = "cumul"
    mode = "cumulative"

    def judge(self, ctx, turn, test, execution):  # noqa: ANN001, ANN201
        return Verdict(turn, test.id, True, extra={"kept": int(execution.lines[-1])})


def test_cumulative_tests_see_earlier_tests_and_are_replayed_when_the_scope_restarts() -> None:
    from pytest_plsqlbench.runner import TaskRun

    tests = tuple(UnitTest(f"call-{k}", "cumul", f"CALL step({k});") for k in (1, 2, 3))
    task = Task(id="t", subset="s", dialect="postgres", turns=(Turn(1, "p", tests, reference="R"),))
    backend = _FakeBackend()
    run = TaskRun(backend, task, ["ANSWER"], judges=JudgeRegistry().add([_Cumulative()]))  # type: ignore[arg-type]
    run.start()
    kept = [run.run_test(1, tests[0]).extra["kept"], run.run_test(1, tests[1]).extra["kept"]]
    assert kept == [2, 3]  # the answer, then each call on top of the earlier ones
    session = backend.session()
    session.scope_epoch += 1  # the session lost its connection: a fresh scope
    session.kept, session.log = 0, []
    assert run.run_test(1, tests[2]).extra["kept"] == 4  # answer + calls 1, 2 replayed + call 3
    assert session.log == [("ANSWER", False), ("CALL step(1);", False), ("CALL step(2);", False), ("CALL step(3);", False)]
    run.finish()


def test_a_plugin_episode_plays_the_turns(pytester: pytest.Pytester) -> None:
    """``pytest_plsql_episode``: where an interactive rollout (tools between turns) plugs in."""
    pytester.makeconftest(CONFTEST + r'''
from pytest_plsqlbench.episode import Episode


class Doubling(Episode):
    def play(self, ask, *, carry_failures=True):
        done = super().play(ask, carry_failures=carry_failures)
        self.answers = [Answer(code=a.code + "\n" + BUMP, source="doubling") for a in self.answers]
        return done


def pytest_plsql_episode(config, task, sample):
    return Doubling(task, sample)
''')
    tasks = pytester.mkdir("mytasks")
    (tasks / "counting.yaml").write_text("name: counting\nloader: counting\ndialects: [postgres]\nmetrics: counting\n")
    results = pytester.path / "r.json"
    result = pytester.runpytest_subprocess(
        "--subset", "counting", "--plsql-tasks", str(tasks), "--plsql-model=reference",
        "--plsql-safety=off", f"--plsql-results={results}", "-k", "task1",
    )
    doc = json.loads(results.read_text())
    assert {a["source"] for t in doc["tasks"] for a in t["answers"]} == {"doubling"}
    # The episode's answer is what ran: it bumps the count once on install, so call k reads k + 1.
    counts = sorted(x["extra"]["count"] for t in doc["tasks"] for x in t["tests"])
    assert counts == [2, 3, 4], result.stdout.str()

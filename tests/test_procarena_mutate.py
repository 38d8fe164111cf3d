"""The mutation check of ProcArena call suites (issue 32): the standard mutants made from gold's
own tokens, the score through the judge, equivalent marks in the task file, ``validate --mutants``.

The sample's quick mode runs here (CI); the full run is ``plsqlbench validate --subset
procarena-sample --mutants`` (README).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pytest_plsqlbench.manifests import load_manifest
from pytest_plsqlbench.procarena import mutate as mt
from pytest_plsqlbench.procarena.loader import load, spec_of
from pytest_plsqlbench.procarena.spec import SpecError, parse, read
from pytest_plsqlbench.settings import Settings

from embedded import started_backend

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "procarena_data"
MINI_TASK = DATA / "tasks" / "mini" / "postgres" / "a1_000.yaml"
SAMPLE = REPO / "tasks" / "procarena-sample"

PG = """CREATE OR REPLACE PROCEDURE p(a integer, b varchar(20))
LANGUAGE plpgsql AS $$
DECLARE
  n numeric(10,2) := 0;
BEGIN
  IF a BETWEEN 1 AND 5 OR b IS NULL THEN
    RAISE NOTICE 'count %', a + 1;
    n := n - 1;
  END IF;
  UPDATE s.t SET x = x * 2, y = -1 WHERE id = a AND x >= 3;
  DELETE FROM s.t WHERE id IN (SELECT id FROM s.u WHERE k < a) RETURNING id INTO n;
  RAISE EXCEPTION 'bad' USING ERRCODE = 'P0001';
END $$;"""

ORA = """CREATE OR REPLACE PROCEDURE p(a NUMBER, b VARCHAR2) IS
  n NUMBER(10,2) := 0;
BEGIN
  IF a <= 10 AND b <> 'x' THEN
    DBMS_OUTPUT.PUT_LINE('count ' || (a + 1));
    UPDATE s.t SET x = x / 2 WHERE id = a;
  END IF;
  RAISE_APPLICATION_ERROR(-20001, 'bad');
END;
/"""


def _by(mutants: list[mt.Mutant]) -> dict[str, list[mt.Mutant]]:
    out: dict[str, list[mt.Mutant]] = {}
    for m in mutants:
        out.setdefault(m.operator, []).append(m)
    return out


# --------------------------------------------------------------------------- the operators
def test_postgres_operators_come_from_the_golds_tokens() -> None:
    got = _by(mt.generate(PG, "postgres"))
    assert set(got) == set(mt.OPERATORS)
    afters = {(m.operator, m.before, m.after) for ms in got.values() for m in ms}
    # boundary pairs are their own operator; the other comparisons are relational
    assert ("boundary", ">=", ">") in afters and ("relational", ">=", "<") in afters
    assert ("relational", "=", "<>") in afters
    # AND/OR, but not the AND of BETWEEN
    logical = [m for m in got["logical"]]
    assert [m.before for m in logical] == ["OR", "AND"] and "BETWEEN 1 OR 5" not in "".join(m.code for m in logical)
    # constants: c+1, c-1 and 0; type modifiers (varchar(20), numeric(10,2)) are not constants
    consts = {(m.before, m.after) for m in got["constant"]}
    assert {("1", "2"), ("1", "0"), ("5", "6"), ("5", "4"), ("5", "0"), ("3", "0"), ("0", "1"), ("0", "(-1)")} <= consts
    assert not any(m.before in ("20", "10") for m in got["constant"])
    # binary arithmetic only: the unary minus of -1 is no operator
    assert {m.before for m in got["arithmetic"]} == {"-", "*"} and len(got["arithmetic"]) == 6
    # SET col = ... and USING ERRCODE = ... assign; they are not comparisons
    assert not any("SET x <>" in m.code or "ERRCODE <>" in m.code for m in got["relational"])
    # output-only statements are not mutated (the judge cannot see them)
    assert not any("count %', a - 1" in m.code or "count %', a  -  1" in m.code for m in mt.generate(PG, "postgres"))
    stmts = [m.before for m in got["statement"]]
    assert stmts[0] == "n := n - 1;" and any(s.startswith("UPDATE s.t") for s in stmts)
    assert all(m.after == "NULL;" for m in got["statement"]) and not any("NOTICE" in s for s in stmts)
    wheres = [m.before for m in got["where"]]
    assert wheres == ["WHERE id = a AND x >= 3", "WHERE id IN (SELECT id FROM s.u WHERE k < a)", "WHERE k < a"]
    # the header is never mutated
    assert all(m.code.startswith("CREATE OR REPLACE PROCEDURE p(a integer, b varchar(20))") for ms in got.values() for m in ms)


def test_oracle_operators_skip_the_header_and_the_slash() -> None:
    got = _by(mt.generate(ORA, "oracle"))
    assert {m.before for m in got["boundary"]} == {"<="} and {m.before for m in got["logical"]} == {"AND"}
    # -20001 is read as minus 20001: the constant changes, not the sign
    assert {"(-20002)", "-20002"} & {m.code.split("RAISE_APPLICATION_ERROR(")[1].split(",")[0] for m in got["constant"]
                                      if "RAISE_APPLICATION_ERROR" in m.code and m.before == "20001"}
    assert not any("DBMS_OUTPUT" in m.before for m in got["statement"])
    assert any(m.before.startswith("RAISE_APPLICATION_ERROR") for m in got["statement"])
    assert all(m.code.endswith("END;\n/") for ms in got.values() for m in ms)
    assert not any(m.before == "10" for m in got["constant"] if "NUMBER(" in m.code.split("\n")[1] and m.line == 2)


def test_a_set_item_after_a_case_item_is_an_assignment_not_a_comparison() -> None:
    """``SET a = CASE WHEN ... END, b = 2``: the ``=`` of ``b`` assigns (a relational mutant there
    would never install); the ``=`` inside the CASE and in WHERE compare."""
    gold = ("CREATE OR REPLACE PROCEDURE p(x integer)\nLANGUAGE plpgsql AS $$\nBEGIN\n"
            "  UPDATE s.t SET a = CASE WHEN x = 1 THEN 1 ELSE 0 END, b = 2, c = (CASE WHEN x = 2 THEN 3 END) WHERE id = x;\n"
            "END;\n$$;\n")
    line = gold.splitlines()[3]
    rel = {(m.line, int(m.id.split(":")[2])) for m in mt.generate(gold, "postgres", ["relational"])}  # 1-based column
    assert (4, line.index("x = 1") + 3) in rel and (4, line.index("x = 2") + 3) in rel and (4, line.index("id = x") + 4) in rel
    for target in ("a = CASE", "b = 2", "c = (CASE"):
        assert (4, line.index(target) + 3) not in rel, target


def test_mutants_are_unique_and_ids_stable() -> None:
    first = mt.generate(PG, "postgres")
    again = mt.generate(PG, "postgres")
    assert [m.id for m in first] == [m.id for m in again]
    assert len({m.id for m in first}) == len(first) and len({m.code for m in first}) == len(first)
    m = first[0]
    assert m.diff(PG).startswith("@@") and f"+{m.code.splitlines()[m.line - 1]}" in m.diff(PG)


@pytest.mark.parametrize("dialect", ["postgres", "oracle"])
def test_every_sample_gold_yields_mutants_of_each_family(dialect: str) -> None:
    files = sorted((SAMPLE / dialect).glob("*.yaml"))
    assert len(files) >= 26 and {p.name for p in files} == {p.name for p in (SAMPLE / "postgres").glob("*.yaml")}
    for path in files:
        spec = read(path)
        ops = Counter(m.operator for m in mt.generate(spec.gold, dialect))
        assert ops["statement"] and ops["where"] and ops["relational"] and ops["constant"], f"{path.name}: {ops}"


def test_unknown_operator_and_unlexable_gold_are_one_clear_error() -> None:
    with pytest.raises(mt.MutationError, match="unknown mutation operator"):
        mt.generate(PG, "postgres", ["swap"])


def test_equivalent_marks_need_an_id_and_a_reason() -> None:
    raw = yaml.safe_load(MINI_TASK.read_text())
    parse({**raw, "equivalent_mutants": [{"id": "constant:1:1:2", "why": "the table is never empty"}]}, MINI_TASK)
    for bad, msg in (([{"id": "x"}], "reason"), ({"id": "x"}, "must be a list"), ([{"id": "x", "why": "y", "z": 1}], "mapping"),
                     ([{"id": "x", "why": "y"}, {"id": "x", "why": "z"}], "listed twice")):
        with pytest.raises(SpecError, match=msg):
            parse({**raw, "equivalent_mutants": bad}, MINI_TASK)


# --------------------------------------------------------------------------- scoring on PostgreSQL
#: The engine's tiny bank task with the calls and rows its survivors asked for (boundary, NULL,
#: threshold calls; an account past 'open' in the alphabet), and the one equivalent mutant.
STRONG_CALLS = [
    "CALL move_money(1, 2, -1, DATE '2024-02-07');", "CALL move_money(5, 1, 1, DATE '2024-02-08');",
    "CALL move_money(9, 1, 5, DATE '2024-02-09');", "CALL move_money(1, 9, 5, DATE '2024-02-10');",
    "CALL move_money(6, 1, 5, DATE '2024-02-11');", "CALL move_money(1, 6, 5, DATE '2024-02-11');",
    "CALL move_money(5, 1, 19.5, DATE '2024-02-12');", "CALL move_money(1, 4, 150, DATE '2024-02-13');",
    "CALL move_money(2, 4, 99.5, DATE '2024-02-14');",
]
STRONG_ROWS = "INSERT INTO tinybank.accounts VALUES (5, 'ed', 20.00, 'open'), (6, 'fay', 30.00, 'suspended');\n"
EQUIVALENT = [{"id": "constant:22:37:1", "why": "transfers is never empty (the fixture has a row, no call deletes): "
                                                "MAX is never NULL, so the COALESCE default is never used"}]


def _mini_tree(tmp: Path, strong: bool) -> Path:
    raw = yaml.safe_load(MINI_TASK.read_text())
    raw["mutants"] = raw["mutants"][:1]
    fixture = (DATA / "fixtures" / "tinybank" / "postgres.sql").read_text()
    if strong:
        raw["calls"] = raw["calls"] + STRONG_CALLS
        raw["equivalent_mutants"] = EQUIVALENT
        fixture += STRONG_ROWS
    (tmp / "tasks" / "mini" / "postgres").mkdir(parents=True)
    (tmp / "tasks" / "mini" / "postgres" / "a1_000.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    (tmp / "tasks" / "mini.yaml").write_text((DATA / "tasks" / "mini.yaml").read_text())
    (tmp / "fixtures" / "tinybank").mkdir(parents=True)
    (tmp / "fixtures" / "tinybank" / "postgres.sql").write_text(fixture)
    return tmp / "tasks" / "mini.yaml"


@pytest.fixture(scope="module")
def backend() -> Iterator[object]:
    with started_backend("mutationtest", timeout=5) as b:
        yield b


def test_score_counts_kills_survivors_equivalents_and_stillborn(backend: object, tmp_path: Path) -> None:
    (task,) = load(load_manifest(_mini_tree(tmp_path, strong=True)), Settings.of(subsets=("procarena-mini",)))
    spec = spec_of(task)
    score = mt.score_task(backend, task, spec.gold, {**spec.equivalent, "where:1:1:": "stale"})
    assert score.count("equivalent") == 1 and score.stale == ["where:1:1:"]
    assert score.count("killed") + score.count("survived") == score.counted > 80
    assert score.score >= 0.95, "\n".join(mt.report_lines(score, spec.gold, 0.95))
    # the equivalent one really survives (else its mark would be wrong)
    (eq,) = [r.mutant for r in score.results if r.status == "equivalent"]
    from pytest_plsqlbench.procarena.evaluation import evaluate

    assert all(o.passed for o in evaluate(backend, task, eq.code))  # type: ignore[arg-type]
    broken = mt.Mutant("x", "statement", 1, "", "", spec.gold.replace("BEGIN", "BEGN", 1))
    assert mt._stillborn(evaluate(backend, task, broken.code))  # type: ignore[arg-type]


def test_weak_suite_lists_survivors_as_diffs(tmp_path: Path) -> None:
    (task,) = load(load_manifest(_mini_tree(tmp_path, strong=False)), Settings.of(subsets=("procarena-mini",)))
    spec = spec_of(task)
    with started_backend("mutationweak", timeout=5) as backend:  # the engine's own tinybank rows
        score = mt.score_task(backend, task, spec.gold, {}, operators=("boundary", "constant"))
    assert score.survivors() and score.score < 0.95
    lines = mt.report_lines(score, spec.gold, 0.95)
    assert "BELOW" in lines[0] and any(line.strip().startswith("SURVIVOR constant:") for line in lines)
    assert any(line.strip().startswith("+") and "<= 1" in line for line in lines), "a survivor shown as a diff"


def test_quick_mode_spreads_over_operators() -> None:
    mutants = mt.generate(PG, "postgres")
    chosen = mt.select(mutants, 7)
    assert len(chosen) == 7 and {m.operator for m in chosen} == set(mt.OPERATORS)
    assert [m.id for m in mt.select(mutants, 7)] == [m.id for m in chosen]


# --------------------------------------------------------------------------- the command
def _validate(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_plsqlbench.cli", "validate", *args],
                          cwd=tmp, capture_output=True, text=True, timeout=900)


def test_validate_mutants_passes_a_strong_suite_and_fails_a_weak_one(tmp_path: Path) -> None:
    strong = _mini_tree(tmp_path / "strong", strong=True)
    proc = _validate(tmp_path, "--subset", "procarena-mini", "--plsql-tasks", str(strong.parent), "--mutants")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mutants (full):" in proc.stdout and "1 marked equivalent" in proc.stdout
    assert "equivalent constant:22:37:1: transfers is never empty" in proc.stdout
    weak = _mini_tree(tmp_path / "weak", strong=False)
    proc = _validate(tmp_path, "--subset", "procarena-mini", "--plsql-tasks", str(weak.parent), "--mutants",
                     "--mutants-operators", "boundary,constant")
    assert proc.returncode == 1 and "PROBLEM postgres_a1_000: mutation score" in proc.stdout, proc.stdout + proc.stderr
    assert "SURVIVOR constant:" in proc.stdout


def test_validate_task_selects_one_task(tmp_path: Path) -> None:
    """``--task ID`` checks only that task: a second task with a problem (a hand-written mutant that is
    gold itself) is not run."""
    root = _mini_tree(tmp_path / "two", strong=True)
    task_dir = root.parent / "mini" / "postgres"
    raw = yaml.safe_load((task_dir / "a1_000.yaml").read_text())
    raw["id"], raw["mutants"] = "postgres_a1_001", [{"why": "gold itself, which no call can fail", "code": raw["gold"]}]
    (task_dir / "a1_001.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    both = _validate(tmp_path, "--subset", "procarena-mini", "--plsql-tasks", str(root.parent))
    assert both.returncode == 1 and "2 task(s)" in both.stdout, both.stdout + both.stderr
    one = _validate(tmp_path, "--subset", "procarena-mini", "--plsql-tasks", str(root.parent),
                    "--task", "postgres_a1_000", "--mutants", "--mutants-limit", "3")
    assert one.returncode == 0 and "1 task(s)" in one.stdout and "postgres_a1_001" not in one.stdout, one.stdout + one.stderr
    # A mutation run shows it is alive on stderr (start and end of each task), never in the report.
    assert "mutants: postgres_a1_000 (task 1 of 1): 0 of 3 run" in one.stderr, one.stderr
    assert "mutants: postgres_a1_000 (task 1 of 1): 3 of 3 run" in one.stderr and "of 3 run" not in one.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--subset", "procarena-mini", "--mutants-limit", "3"], "need --mutants"),
    (["--subset", "procarena-mini", "--mutants", "--mutants-limit", "0"], "positive number"),
    (["--subset", "procarena-mini", "--mutants", "--mutants-min", "95"], "between 0 and 1"),
    (["--subset", "procarena-mini", "--mutants", "--mutants-operators", "swap"], "unknown operator"),
    (["--subset", "spider", "--mutants"], "ProcArena subsets"),
    (["--mutants"], "give --subset"),
    (["--task", "postgres_a1_000"], "give --subset"),
    (["--subset", "spider", "--task", "postgres_a1_000"], "not one"),
    (["--subset", "procarena-mini", "--task", "postgres_zz_999"], "no task postgres_zz_999"),
])
def test_mutation_options_are_checked(tmp_path: Path, args: list[str], message: str) -> None:
    proc = _validate(tmp_path, *args, "--plsql-tasks", str(DATA / "tasks"))
    assert proc.returncode != 0 and message in proc.stderr + proc.stdout, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- the sample (quick mode in CI)
#: Quick mode: a fixed spread of this many mutants per task (the same ones every run), each
#: sample task held to :data:`QUICK_FLOOR` on its own -- a weakened call suite of any one task
#: fails here, not only a fall of the whole sample's average. The full run and its >= 95 % goal
#: per task: ``plsqlbench validate --subset procarena-sample --mutants`` (README, docs/procarena.md).
QUICK = 24


@functools.cache
def _sample() -> dict[str, object]:
    tasks = load(load_manifest(REPO / "tasks" / "procarena-sample.yaml"), Settings.of(subsets=("procarena-sample",)))
    return {task.id: task for task in tasks}


def test_the_quick_check_covers_the_whole_sample() -> None:
    assert len(_sample()) >= 26


@pytest.mark.parametrize("task_id", sorted(_sample()))
def test_sample_quick_mutation_score(backend: object, task_id: str) -> None:
    """One test per sample task (xdist spreads them over its workers)."""
    task = _sample()[task_id]
    spec = spec_of(task)
    score = mt.score_task(backend, task, spec.gold, dict(spec.equivalent), limit=QUICK)
    assert not score.stale, f"{task.id}: stale equivalent marks {score.stale}"
    assert score.counted >= QUICK * 0.6, f"{task.id}: only {score.counted} of {QUICK} quick mutants counted"
    assert score.score >= QUICK_FLOOR, (f"{task.id}: quick mutation score {score.score:.1%} ({score.count('killed')} "
                                        f"of {score.counted}) below {QUICK_FLOOR:.0%}")


#: The issue's target per task (issue 32); every sample task's quick spread meets it (measured:
#: at most one survivor in a spread, every task at 96-100 % in the full run).
QUICK_FLOOR = 0.95


# --------------------------------------------------------------------------- hollow tasks
def _variant(tmp: Path, **change: object) -> object:
    manifest = _mini_tree(tmp, strong=True)
    path = manifest.parent / "mini" / "postgres" / "a1_000.yaml"
    raw = yaml.safe_load(path.read_text())
    raw.update(change)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return manifest


def test_validate_refuses_hollow_tasks(backend: object, tmp_path: Path) -> None:
    from pytest_plsqlbench.procarena.validate import check_task

    raising = _variant(tmp_path / "r", calls=["CALL move_money(1, 2, 0, DATE '2024-02-01');",
                                              "CALL move_money(1, 2, -5, DATE '2024-02-02');"])
    (task,) = load(load_manifest(raising), Settings.of(subsets=("procarena-mini",)))
    problems = check_task(backend, task)
    assert any("hollow task: gold raises on every call (call-1: [P0001] amount must be positive" in p for p in problems), problems
    raw = yaml.safe_load(MINI_TASK.read_text())
    nothing = raw["gold"].split("BEGIN", 1)[0] + "BEGIN\n  NULL;\nEND $$;\n"
    (task,) = load(load_manifest(_variant(tmp_path / "n", gold=nothing, mutants=[])), Settings.of(subsets=("procarena-mini",)))
    problems = check_task(backend, task)
    assert any("a procedure that does nothing passes every call" in p for p in problems), problems
    assert any("gold is a no-op" in p for p in problems)


def test_printed_output_is_refused_and_the_task_left_out(backend: object, tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    import logging


    raw = yaml.safe_load(MINI_TASK.read_text())
    manifest = _variant(tmp_path, requirement=raw["requirement"] + "Finally print the new balance with RAISE NOTICE.\n")
    with caplog.at_level(logging.INFO, logger="pytest_plsqlbench.progress"):
        assert load(load_manifest(manifest), Settings.of(subsets=("procarena-mini",))) == []
    assert "1 of 1 task(s) left out as hollow tasks" in caplog.text and "asks for printed output ('print')" in caplog.text
    from pytest_plsqlbench.procarena import hollow

    assert hollow.output_request("Print the total.") and hollow.output_request("shows a notice with the count")
    assert hollow.output_request("Update display_name and the totals.") is None
    assert hollow.gold_prints("BEGIN DBMS_OUTPUT.PUT_LINE('x'); END;") and not hollow.gold_prints(raw["gold"])


# --------------------------------------------------------------------------- Oracle (stand-in)
def test_oracle_mutation_run_on_a_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run on an Oracle task: mutants of the PL/SQL gold go through ``evaluation.evaluate`` (here a
    stand-in answering as the Oracle judge words its outcomes): a mutant that compiles with errors is
    stillborn, one whose calls all pass survives, a failing call kills."""
    from pytest_plsqlbench import outcomes
    from pytest_plsqlbench.outcomes import Verdict
    from pytest_plsqlbench.procarena import evaluation

    tasks = load(load_manifest(REPO / "tasks" / "procarena-sample.yaml"),
                 Settings.of(subsets=("procarena-sample",), dialect="oracle"))
    task = next(t for t in tasks if t.id == "oracle_a3_000")
    spec = spec_of(task)
    seen: list[str] = []

    def stand_in(backend: object, task_: object, code: str) -> list[Verdict]:
        seen.append(code)
        n = len(task.turns[0].tests)
        if "NULL;" in code:
            return [Verdict(1, f"call-{k}", False, outcomes.INVALID_ARTIFACT,
                            "the answer failed to install: [ORA-24344] success with compilation error") for k in range(1, n + 1)]
        if " >= " in code and " >= " not in spec.gold:
            return [Verdict(1, f"call-{k}", True) for k in range(1, n + 1)]
        return [Verdict(1, "call-1", True), *(Verdict(1, f"call-{k}", False, outcomes.WRONG_OUTPUT, "table differs")
                                                  for k in range(2, n + 1))]

    monkeypatch.setattr(evaluation, "evaluate", stand_in)
    mutants = mt.generate(spec.gold, "oracle")
    eq = mutants[0].id
    score = mt.score_task(object(), task, spec.gold, {eq: "stand-in"})
    assert len(seen) == len(mutants) - 1, "the equivalent mutant is not run"
    assert score.count("stillborn") == sum(1 for m in mutants if "NULL;" in m.code and m.id != eq) > 0
    assert score.count("survived") == sum(1 for m in mutants if "NULL;" not in m.code and " >= " in m.code and m.id != eq)
    assert all(c.rstrip().endswith("/") for c in seen), "Oracle mutants keep the script's terminator"
    assert all(c.split(" IS", 1)[0] == spec.gold.split(" IS", 1)[0] for c in seen), "the header is never mutated"


@pytest.mark.skipif(not __import__("os").environ.get("PLSQL_ORACLE_DSN"), reason="no Oracle reachable: set PLSQL_ORACLE_DSN")
def test_oracle_sample_quick_mutation_scores_live() -> None:
    import os

    from pytest_plsqlbench.runner import open_backend

    settings = Settings.of(subsets=("procarena-sample",), dialect="oracle", db="dsn", dsn=os.environ["PLSQL_ORACLE_DSN"])
    tasks = load(load_manifest(REPO / "tasks" / "procarena-sample.yaml"), settings)
    killed = counted = 0
    with open_backend(settings, "mutants") as backend:
        for task in tasks:
            spec = spec_of(task)
            score = mt.score_task(backend, task, spec.gold, dict(spec.equivalent), limit=QUICK)
            assert not score.stale, f"{task.id}: stale equivalent marks {score.stale}"
            killed += score.count("killed")
            counted += score.counted
    assert counted and killed / counted >= QUICK_FLOOR


def test_hollow_tasks_left_out_are_named_in_the_data_report_and_the_results(tmp_path: Path, pytester: pytest.Pytester) -> None:
    """Issue 32: a task left out at load as hollow is counted where constant-passable MBPP tasks
    are -- a data report in the terminal summary and ``procarena_report`` in the results file --
    not only on the progress line; the other task of the subset still runs."""
    manifest = _mini_tree(tmp_path, strong=True)
    raw = yaml.safe_load(MINI_TASK.read_text())
    raw.update(id="postgres_a1_001", requirement=raw["requirement"] + "Finally print the new balance with RAISE NOTICE.\n")
    (manifest.parent / "mini" / "postgres" / "a1_001.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    results = tmp_path / "r.json"
    run = pytester.runpytest_subprocess(f"--plsql-tasks={manifest.parent}", "--subset", "procarena-mini",
                                        "--plsql-model=reference", "-p", "no:cacheprovider",
                                        "--plsql-results", str(results))
    out = run.stdout.str()
    assert run.ret == 0, out
    assert "ProcArena data report" in out and "procarena-mini: 1 task(s) left out as hollow" in out, out
    doc = json.loads(results.read_text())
    (left,) = doc["procarena_report"]["procarena-mini"]["left_out_hollow"]
    assert left.startswith("postgres_a1_001: ") and "printed output" in left, left
    ran = {t["task_id"] for t in doc["tasks"]}
    assert ran == {"postgres_a1_000"}, ran

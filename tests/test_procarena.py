"""The ProcArena engine (issue 13): task format, prompt, state canonical form, the call-suite
judge on embedded PostgreSQL, failure types and the metric family.

Database tests run the engine's own small task (tests/procarena_data: a tiny bank, written for
these tests) and every task of ``procarena-sample`` that is present: gold passes every call,
and each of a task's ``mutants`` (plausible wrong procedures) fails at least one.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pytest_plsqlbench import outcomes
from pytest_plsqlbench.manifests import load_manifest
from pytest_plsqlbench.procarena import failure_types as ft
from pytest_plsqlbench.procarena import metrics as pm
from pytest_plsqlbench.procarena import state as st
from pytest_plsqlbench.procarena.evaluation import evaluate
from pytest_plsqlbench.procarena.loader import load, spec_of
from pytest_plsqlbench.procarena.spec import SpecError, parse
from pytest_plsqlbench.settings import Settings
from pytest_plsqlbench.tasks import Task

from embedded import started_backend

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "procarena_data"
MINI = DATA / "tasks" / "mini.yaml"
SAMPLE = REPO / "tasks" / "procarena-sample.yaml"
MINI_TASK = DATA / "tasks" / "mini" / "postgres" / "a1_000.yaml"


def _mini_tasks() -> list[Task]:
    return load(load_manifest(MINI), Settings.of(subsets=("procarena-mini",)))


def _sample_tasks(dialect: str = "postgres") -> list[Task]:
    folder = REPO / "tasks" / "procarena-sample" / dialect
    if not any(folder.glob("*.yaml")):
        return []
    return load(load_manifest(SAMPLE), Settings.of(subsets=("procarena-sample",), dialect=dialect))


# --------------------------------------------------------------------------- canonical form
@pytest.mark.parametrize(
    ("value", "floating", "want"),
    [
        (None, False, None),
        (decimal.Decimal("1.50"), False, "1.5"),
        (decimal.Decimal("-0.00"), False, "0"),
        (decimal.Decimal("100"), False, "100"),
        (7, False, "7"),
        (0.1 + 0.2, False, "0.3"),
        ("0.30000000000000004", True, "0.3"),
        (1e20, False, "100000000000000000000"),
        (True, False, "true"),
        (dt.date(2024, 1, 2), False, "2024-01-02"),
        (dt.datetime(2024, 1, 2, 3, 4, 5), False, "2024-01-02 03:04:05"),
        (dt.datetime(2024, 1, 2, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))), False, "2024-01-02 10:00:00"),
        (b"\x01\xff", False, "01ff"),
        ("Ab ", False, "Ab "),
        ("", False, ""),
    ],
)
def test_canonical_values(value: object, floating: bool, want: str | None) -> None:
    assert st.canonical(value, floating=floating) == want


def test_pg_text_values_are_canonical_by_type() -> None:
    assert st._pg_value("12.500", "N", "numeric") == "12.5"
    assert st._pg_value("0.30000000000000004", "N", "float8") == "0.3"
    assert st._pg_value("t", "B", "bool") == "true"
    assert st._pg_value(None, "S", "text") is None
    assert st._pg_value("2024-01-02 10:00:00+00", "D", "timestamptz") == "2024-01-02 10:00:00+00"


def test_state_compares_multisets_and_names_the_table() -> None:
    gold = {"s.t": st.table_state("s.t", ["id", "v"], [("1", "a"), ("2", None), ("2", None)])}
    same = {"s.t": st.table_state("s.t", ["id", "v"], [("2", None), ("1", "a"), ("2", None)])}
    assert st.diff(gold, same) == []
    fewer = {"s.t": st.table_state("s.t", ["id", "v"], [("1", "a"), ("2", None)])}
    msg = st.diff(gold, fewer)
    assert len(msg) == 1 and msg[0].startswith("table s.t differs: 1 gold row(s) missing, 0 unexpected")
    assert "missing: (id='2', v=NULL)" in msg[0]
    created = {**gold, "answers.log": st.table_state("answers.log", ["x"], [("1",)])}
    assert st.diff(gold, created) == ["table answers.log: created by the answer, not by gold (1 row(s))"]
    cols = {"s.t": st.table_state("s.t", ["id"], [("1",)])}
    assert "columns differ" in st.diff(gold, cols)[0]


def test_failure_message_shows_a_few_rows_only() -> None:
    gold = {"s.t": st.table_state("s.t", ["id"], [(str(i),) for i in range(10)])}
    cand = {"s.t": st.table_state("s.t", ["id"], [])}
    text = st.diff(gold, cand)[0]
    assert text.count("missing: (") == st.SHOWN_ROWS and "... 7 more missing" in text


# --------------------------------------------------------------------------- failure types
def test_failure_type_rules() -> None:
    assert ft.of_error("42P01", outcomes.INTERFACE) == ft.SCHEMA
    assert ft.of_error("42703", outcomes.WRONG_OUTPUT) == ft.SCHEMA
    assert ft.of_error(None, outcomes.INTERFACE, "ORA-06550: line 1\nORA-00942: table or view does not exist") == ft.SCHEMA
    assert ft.of_error("42883", outcomes.INTERFACE) == ft.CONTRACT
    assert ft.of_error("42601", outcomes.INVALID_ARTIFACT) == ft.CONTRACT
    assert ft.of_error("PLS-00306", outcomes.INTERFACE) == ft.CONTRACT
    assert ft.of_error("22012", outcomes.WRONG_OUTPUT) == ft.EXCEPTION
    gold = "BEGIN IF a THEN x; ELSIF b THEN y; END IF; FOR r IN c LOOP z; END LOOP; END"
    same = "begin if a2 then x2; elsif b then y; end if; for r in c loop w; end loop; end"
    flipped = "BEGIN IF a THEN x; END IF; FOR r IN c LOOP z; END LOOP; END"
    assert ft.of_call(candidate_error=None, gold_raised=None, candidate=same, gold=gold) == ft.STATE_EFFECT
    assert ft.of_call(candidate_error=None, gold_raised=None, candidate=flipped, gold=gold) == ft.CONTROL_FLOW
    assert ft.of_call(candidate_error=None, gold_raised="P0001", candidate=flipped, gold=gold) == ft.CONTROL_FLOW
    # a runtime error gold did not have is Exception; raising where gold raised is judged by state
    assert ft.of_call(candidate_error=("22012", outcomes.WRONG_OUTPUT, "division by zero"), gold_raised=None,
                      candidate=same, gold=gold) == ft.EXCEPTION
    assert ft.of_call(candidate_error=("22023", outcomes.WRONG_OUTPUT, "x"), gold_raised="P0001",
                      candidate=same, gold=gold) == ft.EXCEPTION
    assert ft.of_call(candidate_error=("P0001", outcomes.WRONG_OUTPUT, "x"), gold_raised="P0001",
                      candidate=flipped, gold=gold) == ft.CONTROL_FLOW


def test_structure_ignores_comments_strings_and_end_keywords() -> None:
    code = "-- IF LOOP RETURN\nBEGIN x := 'IF LOOP'; WHILE a LOOP EXIT; END LOOP; RETURN; END"
    assert ft.structure(code) == {"loop": 1, "return": 2}


# --------------------------------------------------------------------------- loader
def _raw() -> dict:
    return yaml.safe_load(MINI_TASK.read_text())


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"scenario": "c9"}, "'scenario'"),
        ({"id": "postgres_a2_000"}, "'id'"),
        ({"calls": []}, "'calls'"),
        ({"calls": ["BEGIN move_money(1); END;"]}, "'calls' item 1"),
        ({"gold": "CREATE PROCEDURE other() AS $$ $$"}, "'gold'"),
        ({"materials": [{"file": "a.md", "kind": "doc"}]}, "'materials' item 1"),
        ({"surprise": 1}, "unknown field(s) ['surprise']"),
        ({"signature": "other(x int)"}, "'signature'"),
        ({"b2": {"pattern": "cursor_loop", "degraded": "x"}}, "'b2'"),
        ({"interactive": {"requirement": "r", "ledger": [{"id": "M1", "op": "guess", "key": "k", "answer": "a"}]}},
         "'interactive'.ledger item 1"),
    ],
)
def test_loader_errors_name_file_and_field(change: dict, field: str) -> None:
    raw = {**_raw(), **change}
    with pytest.raises(SpecError) as info:
        parse(raw, Path("tasks/x/postgres/a1_000.yaml"))
    assert str(info.value).startswith("tasks/x/postgres/a1_000.yaml: ")
    assert field in str(info.value)


def test_a5_needs_components_and_b2_needs_its_fields() -> None:
    raw = {**_raw(), "id": "postgres_a5_000", "scenario": "a5"}
    with pytest.raises(SpecError, match="'components' is required"):
        parse(raw, Path("f.yaml"))
    raw = {**_raw(), "id": "postgres_b2_000", "scenario": "b2"}
    with pytest.raises(SpecError, match="'b2'"):
        parse(raw, Path("f.yaml"))
    raw["b2"] = {"pattern": "n_plus_one", "degraded": "CREATE ...", "scale": {"tinybank.accounts": 500}}
    spec = parse(raw, Path("f.yaml"))
    assert spec.b2 is not None and spec.b2.scale == {"tinybank.accounts": 500} and spec.b2.repeats == 7


def test_task_shape_and_prompt_hide_the_hidden_part() -> None:
    (task,) = _mini_tasks()
    spec = spec_of(task)
    assert task.id == "postgres_a1_000" and len(task.turns) == 1
    assert [t.id for t in task.turns[0].tests] == [f"call-{n}" for n in range(1, 7)]
    assert task.metadata["scenario"] == "a1" and task.metadata["database"] == "tinybank"
    assert "scenario_a1" in task.markers and task.fixtures[0].description == "tinybank"
    prompt = task.turns[0].prompt
    assert spec.requirement.strip() in prompt and "move_money(p_from integer" in prompt
    assert "Table tinybank.accounts" in prompt and "'ada'" in prompt and "foreign key from_id -> tinybank.accounts" in prompt
    for hidden in (spec.gold.splitlines()[3], spec.calls[0], spec.mutants[0].code.splitlines()[-3], spec.behaviour):
        assert hidden.strip() not in prompt


def test_sample_prompts_never_show_hidden_fields() -> None:
    for dialect in ("postgres", "oracle"):
        for task in _sample_tasks(dialect):
            spec = spec_of(task)
            prompt = task.turns[0].prompt
            shown = {m.text.strip() for m in spec.materials}
            # A mutant may be the attachment itself (B1's "change not made"): that one is visible
            # by design. Ledger answers are facts of the complete Direct requirement, so not hidden here.
            hidden = [*((f"call {n}", c) for n, c in enumerate(spec.calls, 1)), ("gold", spec.gold),
                      *((f"mutant {m.why!r}", m.code) for m in spec.mutants if m.code.strip() not in shown)]
            for field, text in hidden:
                assert text.strip() not in prompt, f"{task.id}: {field} reaches the prompt verbatim: {text.strip()[:80]!r}"


# --------------------------------------------------------------------------- judge (PostgreSQL)
@pytest.fixture(scope="module")
def backend() -> Iterator[object]:

    with started_backend("procarenatest", timeout=10) as b:
        yield b


@functools.cache
def _judged_tasks() -> dict[str, Task]:
    return {t.id: t for t in _mini_tasks() + _sample_tasks("postgres")}


def test_the_reference_check_covers_the_mini_tasks_and_the_whole_sample() -> None:
    assert set(_judged_tasks()) == {t.id for t in _mini_tasks()} | {t.id for t in _sample_tasks("postgres")}
    assert len(_sample_tasks("postgres")) >= 54


@pytest.mark.parametrize("task_id", sorted(_judged_tasks()))
def test_reference_passes_and_mutants_fail(backend: object, task_id: str) -> None:
    """One test per task (xdist spreads them): gold passes every call, each hand-written mutant fails one."""
    task = _judged_tasks()[task_id]
    spec = spec_of(task)
    got = evaluate(backend, task, spec.gold)  # type: ignore[arg-type]
    assert all(o.passed for o in got), f"{task.id}: gold fails: {[o.message for o in got if not o.passed][:1]}"
    assert spec.mutants, f"{task.id}: needs at least one mutant (a plausible wrong procedure)"
    for mutant in spec.mutants:
        got = evaluate(backend, task, mutant.code)  # type: ignore[arg-type]
        assert not all(o.passed for o in got), f"{task.id}: mutant '{mutant.why}' passes every call"
    assert backend.scratch_objects() == []  # type: ignore[attr-defined]


def _returns_task() -> Task:
    (task,) = load(load_manifest(DATA / "tasks" / "returns.yaml"), Settings.of(subsets=("procarena-returns",)))
    return task


def test_out_parameters_and_sequences_are_compared(backend: object) -> None:
    """A call's OUT parameters are what it returns, and a sequence's position is state: a wrong
    OUT value with the right rows fails, and so does numbering rows without the sequence."""
    task = _returns_task()
    spec = spec_of(task)
    assert all(o.passed for o in evaluate(backend, task, spec.gold))  # type: ignore[arg-type]
    wrong_out, no_sequence = (m.code for m in spec.mutants)
    got = {o.test_id: o for o in evaluate(backend, task, wrong_out)}  # type: ignore[arg-type]
    assert not got["call-1"].passed and "the call returned 101, gold's returned 100" in got["call-1"].message
    # The label guard raises as gold's does: call 2 passes; call 3 returns a wrong id again.
    assert got["call-2"].passed and "the call returned 102, gold's returned 101" in got["call-3"].message
    got = {o.test_id: o for o in evaluate(backend, task, no_sequence)}  # type: ignore[arg-type]
    assert not got["call-1"].passed and "ticketing.ticket_seq (sequence)" in got["call-1"].message
    # Gold again: its own earlier runs (nextval is not rolled back) left nothing for this one.
    assert all(o.passed for o in evaluate(backend, task, spec.gold))  # type: ignore[arg-type]


def test_on_a_shared_server_sequences_are_put_back_after_every_run(backend: object) -> None:
    """--plsql-db=dsn: gold and the answer share the worker's database, where nextval is not
    rolled back; the judge puts the task schema's sequences back, so gold passes run after run."""
    task = _returns_task()
    spec = spec_of(task)
    with started_backend("procarenadsn", timeout=10, db="dsn", dsn=backend.admin_dsn) as shared:  # type: ignore[attr-defined]
        assert not shared.pristines.available
        for _ in range(2):
            assert all(o.passed for o in evaluate(shared, task, spec.gold))
        got = evaluate(shared, task, spec.mutants[1].code)
        assert not got[0].passed and "ticketing.ticket_seq (sequence)" in got[0].message
        last = shared.admin.execute("SELECT last_value, is_called FROM ticketing.ticket_seq").fetchone()
        assert tuple(last) == (100, False)


def test_a_call_that_raises_is_judged_by_its_error_not_its_returned_rows() -> None:
    from pytest_plsqlbench.dialects.base import DbError, Execution
    from pytest_plsqlbench.procarena.judge import CallResult, call_problem

    err = DbError("boom", "P0001", "wrong_output")
    printed = CallResult.of(Execution(lines=["row 1", "<printed> hi"], row_lines=[0]), {})
    assert printed.returned == ("row 1",)  # a printed line is no returned value
    same = CallResult.of(Execution(lines=["row 1", "<printed> other"], row_lines=[0]), {})
    assert call_problem(printed, same) is None
    other = CallResult.of(Execution(lines=["row 2"], row_lines=[0]), {})
    assert call_problem(printed, other) == "the call returned row 2, gold's returned row 1"
    raised = CallResult.of(Execution(lines=[], error=err), {})
    assert call_problem(raised, CallResult.of(Execution(lines=["x"], row_lines=[0], error=err), {})) is None


def test_mismatch_message_and_failure_type(backend: object) -> None:
    (task,) = _mini_tasks()
    spec = spec_of(task)
    flipped = spec.mutants[0].code  # > 100 instead of >= 100: same structure, different write
    got = evaluate(backend, task, flipped)  # type: ignore[arg-type]
    bad = [o for o in got if not o.passed]
    assert [o.test_id for o in bad] == ["call-6"]
    assert bad[0].message.startswith("table tinybank.accounts differs")
    assert "balance='101'" in bad[0].message and bad[0].extra["failure_type"] == ft.STATE_EFFECT
    no_insert = evaluate(backend, task, spec.mutants[1].code)  # type: ignore[arg-type]
    # a missing write under the same branch/loop/return structure is a State effect
    assert no_insert[0].extra["failure_type"] == ft.STATE_EFFECT


def test_raising_must_match(backend: object) -> None:
    (task,) = _mini_tasks()
    gold = spec_of(task).gold
    never_raises = gold.replace("RAISE EXCEPTION 'amount must be positive' USING ERRCODE = 'P0001';", "RETURN;")
    got = {o.test_id: o for o in evaluate(backend, task, never_raises)}  # type: ignore[arg-type]
    assert not got["call-4"].passed and "gold's call raised P0001" in got["call-4"].message
    other_code = gold.replace("ERRCODE = 'P0001';\n  END IF;\n  SELECT", "ERRCODE = '22023';\n  END IF;\n  SELECT", 1)
    other_code = other_code.replace("'amount must be positive' USING ERRCODE = 'P0001'", "'amount must be positive' USING ERRCODE = '22023'")
    got = {o.test_id: o for o in evaluate(backend, task, other_code)}  # type: ignore[arg-type]
    assert not got["call-4"].passed and got["call-4"].extra["failure_type"] == ft.EXCEPTION


def test_contract_and_schema_failures(backend: object) -> None:
    (task,) = _mini_tasks()
    wrong_sig = "CREATE OR REPLACE PROCEDURE move_money(p_from integer) LANGUAGE plpgsql AS $$ BEGIN NULL; END $$;"
    got = evaluate(backend, task, wrong_sig)  # type: ignore[arg-type]
    assert not any(o.passed for o in got[:3]) and got[0].extra["failure_type"] == ft.CONTRACT
    wrong_table = spec_of(task).gold.replace("INSERT INTO tinybank.transfers", "INSERT INTO tinybank.transfer")
    got = evaluate(backend, task, wrong_table)  # type: ignore[arg-type]
    assert got[0].extra["failure_type"] == ft.SCHEMA
    broken = "CREATE OR REPLACE PROCEDURE move_money( LANGUAGE"
    got = evaluate(backend, task, broken)  # type: ignore[arg-type]
    assert got[0].failure_class == outcomes.INVALID_ARTIFACT
    # the runner fails the calls of an answer that did not install; the family types them by the error
    entry = {"tests": [{"test_id": o.test_id, "passed": o.passed, "failure_class": o.failure_class,
                        "error_code": o.error_code, "message": o.message, "extra": o.extra} for o in got]}
    assert pm.task_outcome(entry) == {"ex": False, "test_pass": 0.0, "failure_type": ft.CONTRACT}


HOSTILE = [
    # an install that writes the task's data instead of the procedure doing it
    "INSERT INTO tinybank.transfers VALUES (99, 1, 2, 1, 0.1, DATE '2024-01-01');\n",
    # objects named like what a snapshot might read
    "CREATE VIEW answers.accounts AS SELECT * FROM tinybank.accounts WHERE false;\n"
    "CREATE FUNCTION answers.format_type(oid, integer) RETURNS text LANGUAGE sql AS $$ SELECT 'x' $$;\n"
    "CREATE TYPE answers.text AS (x int);\n",
]


@pytest.mark.parametrize("prefix", HOSTILE, ids=["install-writes", "shadow-objects"])
def test_hostile_answers_earn_nothing(backend: object, prefix: str) -> None:
    (task,) = _mini_tasks()
    noop = "CREATE OR REPLACE PROCEDURE move_money(p_from integer, p_to integer, p_amount numeric, p_day date) " \
           "LANGUAGE plpgsql AS $$ BEGIN NULL; END $$;\n"
    got = evaluate(backend, task, prefix + noop)  # type: ignore[arg-type]
    assert not all(o.passed for o in got)
    if "INSERT" in prefix:
        assert "installing the answer changed table(s) tinybank.transfers" in got[0].message
    # gold stays correct after a hostile run on the same worker (nothing survived the task)
    assert all(o.passed for o in evaluate(backend, task, spec_of(task).gold))  # type: ignore[arg-type]


#: A table of the answer's own that the snapshot cannot read (forced row-level security, read
#: with ``row_security = off``), and ``exit_on_error`` (its name split past the safety check),
#: which would make that read's error end the session: set by the install, or by the procedure
#: during each call.
UNREADABLE = ("CREATE TABLE answers.zz_note(x int);\nALTER TABLE answers.zz_note ENABLE ROW LEVEL SECURITY;\n"
              "ALTER TABLE answers.zz_note FORCE ROW LEVEL SECURITY;\nCREATE POLICY zz_p ON answers.zz_note USING (true);\n")
EXIT_ON_ERROR = "PERFORM pg_catalog.set_config('exit' || '_on_error', 'on', false);"


@pytest.mark.parametrize("where", ["install", "call", "none"])
def test_settings_an_answer_leaves_cannot_turn_its_failure_into_the_harnesss(backend: object, where: str) -> None:
    (task,) = _mini_tasks()
    body = EXIT_ON_ERROR if where == "call" else "NULL;"
    install = "DO $d$ BEGIN " + EXIT_ON_ERROR + " END $d$;\n" if where == "install" else ""
    wrong = UNREADABLE + install + (
        "CREATE OR REPLACE PROCEDURE move_money(p_from integer, p_to integer, p_amount numeric, p_day date) "
        f"LANGUAGE plpgsql AS $$ BEGIN {body} END $$;\n")
    got = evaluate(backend, task, wrong)  # type: ignore[arg-type]
    assert not any(o.passed for o in got)
    # The answer's failure, counted in the metrics -- not the harness's, which would drop the task.
    assert {o.failure_class for o in got} == {outcomes.WRONG_OUTPUT}, [(o.failure_class, o.message) for o in got]
    assert "answers.zz_note" in got[0].message
    assert all(o.passed for o in evaluate(backend, task, spec_of(task).gold))  # type: ignore[arg-type]


def test_search_path_games_do_not_redirect_the_snapshot(backend: object) -> None:
    (task,) = _mini_tasks()
    gold = spec_of(task).gold
    # the answer is gold plus a table shadowing the task's in its own schema and a search_path change
    sneaky = "CREATE TABLE answers.accounts AS SELECT * FROM tinybank.accounts;\nSET search_path = answers, pg_catalog;\n" + gold
    got = evaluate(backend, task, sneaky)  # type: ignore[arg-type]
    assert not got[0].passed and "answers.accounts: created by the answer" in got[0].message


def test_a_table_past_the_row_cap_is_compared_whole(backend: object) -> None:
    """Past ``max_rows`` the snapshot keeps no rows but a digest of the whole table: a change
    after the first rows read still differs, an equal table in another physical order does not."""
    from pytest_plsqlbench.procarena import state as st

    session = backend.session()  # type: ignore[attr-defined]
    session.begin_task()
    try:
        conn = session.conn
        conn.execute("CREATE TABLE answers.big AS SELECT g AS id, g * 2 AS v FROM generate_series(1, 50) g")
        before = st.pg_snapshot(conn, ["answers"], max_rows=10)
        conn.execute("UPDATE answers.big SET v = -1 WHERE id = 45")
        changed = st.pg_snapshot(conn, ["answers"], max_rows=10)
        conn.execute("UPDATE answers.big SET v = 90 WHERE id = 45")  # back, as another row version
        again = st.pg_snapshot(conn, ["answers"], max_rows=10)
    finally:
        session.end_task()
    assert "50 rows, digest" in (before["answers.big"].problem or "")
    assert st.diff(before, changed) and not st.diff(before, again)


def test_an_unreadable_table_is_that_tables_state_and_the_others_read_as_always(backend: object) -> None:
    """The snapshot reads every table in a few round trips; an error there (here a table its
    owner may no longer read) makes it read again table by table: that table is "unreadable",
    every other one is the state the quick read gives, sequences included."""
    from pytest_plsqlbench.procarena import state as st

    session = backend.session()  # type: ignore[attr-defined]
    session.begin_task()
    try:
        conn = session.conn
        conn.execute("CREATE TABLE answers.a (id integer, amount numeric(8,2), flag boolean, at date)")
        conn.execute("INSERT INTO answers.a VALUES (1, 2.50, true, '2026-01-02'), (2, NULL, false, NULL), (1, 2.5, true, '2026-01-02')")
        conn.execute("CREATE TABLE answers.z (id integer)")
        conn.execute("INSERT INTO answers.z VALUES (7)")
        conn.execute("CREATE SEQUENCE answers.s")
        conn.execute("SELECT nextval('answers.s')")
        quick = st.pg_snapshot(conn, ["answers"])
        conn.execute("CREATE TABLE answers.m (id integer)")
        conn.execute("REVOKE SELECT ON answers.m FROM CURRENT_USER")
        guarded = st.pg_snapshot(conn, ["answers"])
        conn.execute("SELECT 1")  # the session is usable afterwards
    finally:
        session.end_task()
    assert (guarded["answers.m"].problem or "").startswith("unreadable (permission denied")
    assert {k: v for k, v in guarded.items() if k != "answers.m"} == quick
    assert quick["answers.a"].rows == Counter({("1", "2.5", "true", "2026-01-02"): 2, ("2", None, "false", None): 1})
    assert quick["answers.s (sequence)"].rows == Counter({("1",): 1}) and quick["answers.z"].columns == ("id",)


# --------------------------------------------------------------------------- metrics
def _entry(scenario: str, dialect: str, passed: list[bool], ftype: str = "control_flow") -> dict:
    tests = [{"test_id": f"call-{i}", "passed": p, "failure_class": "passed" if p else "wrong_output",
              "extra": {} if p else {"failure_type": ftype}} for i, p in enumerate(passed, 1)]
    return {"task_id": f"{dialect}_{scenario}", "dialect": dialect, "metadata": {"scenario": scenario}, "tests": tests}


def test_metric_family_table6() -> None:
    m = pm.compute([
        _entry("a1", "postgres", [True, True]),
        _entry("a1", "postgres", [True, False], "state_effect"),
        _entry("b1", "postgres", [False, True]),
        _entry("a2", "oracle", [True]),
        _entry("a1", "postgres", [False], "schema") | {"tests": [{"test_id": "call-1", "passed": False, "failure_class": "infrastructure"}]},
    ])
    pg = m["by_dialect"]["postgres"]
    assert m["tasks"] == 4 and pg["a1"] == {"ex": 0.5, "tasks": 2, "ci": [0.0, 1.0]} and pg["b1"]["ex"] == 0.0
    assert pg["synthesis"] == 0.5 and pg["editing"] == 0.0 and pg["overall"] == pytest.approx(1 / 3)
    assert m["by_dialect"]["oracle"]["a2"]["ex"] == 1.0 and m["ex"] == 0.5
    assert m["mean_test_pass"] == pytest.approx((1 + 0.5 + 0.5 + 1) / 4)
    assert m["failure_types"] == {"schema": 0, "contract": 0, "exception": 0, "control_flow": 1, "state_effect": 1}
    lines = pm.summary_lines("x", m)
    assert lines[0].startswith("ProcArena EX (%) -- x: 4 task(s) (B2 apart), EX 50.0 [")
    assert lines[1].split() == ["Subscenario", "oracle", "postgres"]
    assert any(line.split()[:5] == ["A1", "-", "50.0", "[0.0,", "100.0]"] for line in lines)


def test_ex_leaves_b2_out_and_gives_each_cell_a_bootstrap_interval() -> None:
    """Table 6 has no B2 (scored by speed, §5.3): a B2 task, passed or failed, moves no EX figure."""
    base = [_entry("a1", "postgres", [True]) | {"task_id": f"t{i}"} for i in range(3)]
    base += [_entry("a1", "postgres", [False]) | {"task_id": "t9"}]
    with_b2 = base + [_entry("b2", "postgres", [False, False]) | {"task_id": "b2x"}]
    m, m2 = pm.compute(base), pm.compute(with_b2)
    for key in ("ex", "ex_ci", "tasks", "mean_test_pass", "failure_types"):
        assert m[key] == m2[key], key
    assert m2["by_dialect"]["postgres"]["overall"] == 0.75 and "b2" not in m2["by_dialect"]["postgres"]
    lo, hi = m["ex_ci"]
    assert 0.0 <= lo < 0.75 < hi <= 1.0
    # The interval is a function of the tasks, not of their order in the document.
    assert pm.compute(list(reversed(base)))["ex_ci"] == m["ex_ci"]
    # Every cell passed: the interval collapses on 1.0.
    assert pm.compute(base[:3])["by_dialect"]["postgres"]["a1"]["ci"] == [1.0, 1.0]


# --------------------------------------------------------------------------- end to end
def test_end_to_end_reference_run(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--plsql-tasks", str(DATA / "tasks"),
         "--subset", "procarena-mini", "--plsql-model=reference", "-n", "2", f"--plsql-results={out}", "-q"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "6 passed" in proc.stdout
    doc = json.loads(out.read_text())
    (task,) = doc["tasks"]
    assert task["metadata"]["scenario"] == "a1" and all(t["passed"] for t in task["tests"])


def test_validate_cli_checks_the_call_suite(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_plsqlbench.cli", "validate", "--subset", "procarena-mini",
         "--plsql-tasks", str(DATA / "tasks")],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "procarena-mini (postgres): 1 task(s), 6 call(s), 2 raising under gold; 0 problem(s)" in proc.stdout


def test_validate_finds_a_call_that_changes_nothing(backend: object, tmp_path: Path) -> None:
    from pytest_plsqlbench.procarena.validate import check_task

    raw = yaml.safe_load(MINI_TASK.read_text())
    raw["calls"] = [*raw["calls"], "CALL move_money(1, 2, 10, DATE '2024-02-01');".replace("10", "0"),
                    "CALL move_money(1);"]
    raw["mutants"] = [{"why": "gold itself", "code": raw["gold"]}]
    folder = tmp_path / "tasks" / "mini" / "postgres"
    folder.mkdir(parents=True)
    (folder / "a1_000.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "tasks" / "mini.yaml").write_text(MINI.read_text())
    (tmp_path / "fixtures").symlink_to(DATA / "fixtures")
    (task,) = load(load_manifest(tmp_path / "tasks" / "mini.yaml"), Settings.of(subsets=("procarena-mini",)))
    problems = check_task(backend, task)
    assert any("mutant 'gold itself' passes every call" in p for p in problems)
    assert any(p.startswith("postgres_a1_000: call-8 fails under gold as interface") for p in problems), problems



def test_deselected_calls_still_run_before_the_judged_one(tmp_path: Path) -> None:
    """``-k call-6`` judges call 6 after calls 1..5 ran (the state it is compared with is gold's after 1..6)."""
    (task,) = _mini_tasks()
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"task_id": task.id, "subset": "procarena-mini", "answer": spec_of(task).mutants[0].code}) + "\n")
    common = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--plsql-tasks", str(DATA / "tasks"),
              "--subset", "procarena-mini", "-n", "0", "-q"]
    ref = subprocess.run([*common, "--plsql-model=reference", "-k", "call-6"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert "1 passed, 5 deselected" in ref.stdout, ref.stdout[-2000:]
    wrong = subprocess.run([*common, f"--plsql-answers={answers}", "-k", "call-6"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert "1 failed, 5 deselected" in wrong.stdout and "balance='101'" in wrong.stdout, wrong.stdout[-2000:]


def test_show_prompt_prints_the_visible_part_only(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--plsql-tasks", str(DATA / "tasks"),
         "--subset", "procarena-mini", "--plsql-show-prompt=postgres_a1_000"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    spec = spec_of(_mini_tasks()[0])
    assert "## Requirement" in proc.stdout and "## Required signature" in proc.stdout, proc.stdout[-2000:] + proc.stderr
    assert "Table tinybank.transfers" in proc.stdout
    assert spec.calls[0] not in proc.stdout and "v_from.balance - p_amount" not in proc.stdout


def test_too_many_tables_is_a_state_of_its_own() -> None:
    big = {"<too many tables>": st.table_state("<too many tables>", (), (), "900 tables")}
    assert st.diff({}, big) == ["table <too many tables>: created by the answer, not by gold (0 row(s))"]


def test_runner_calls_judge_finish_after_the_scope(backend: object) -> None:
    """Judge.finish (added for the Oracle restore) runs once per task, after the task's scope ended."""
    from pytest_plsqlbench.judges import DEFAULT, AssertJudge, JudgeRegistry
    from pytest_plsqlbench.runner import evaluate_task
    from pytest_plsqlbench.tasks import Task, Turn, UnitTest

    calls: list[str] = []

    class Counted(AssertJudge):
        kind = "counted"

        def finish(self, ctx):  # noqa: ANN001, ANN201
            calls.append(ctx.task.id)

    task = Task(id="t", subset="s", dialect="postgres",
                turns=(Turn(1, "p", (UnitTest("a", "counted", "SELECT 1"), UnitTest("b", "counted", "SELECT 2"))),))
    report = evaluate_task(backend, task, ["SELECT 1;"], judges=JudgeRegistry([*DEFAULT.values(), Counted()]))  # type: ignore[arg-type]
    assert report.passed and calls == ["t"]


def test_postgres_harness_members(backend: object) -> None:
    """The public members ProcArena uses (docs/redesign.md sections 3.2, 3.3) on PostgreSQL: admin
    SQL (a % is no placeholder without parameters; ignored SQLSTATEs give no rows), the candidate's
    schema and role, and the session's harness SQL, pinned setting, server id and reconnect."""
    from pytest_plsqlbench.dialects.postgres import PostgresBackend
    from pytest_plsqlbench.errors import InfrastructureError

    assert isinstance(backend, PostgresBackend)
    assert backend.candidate_schema == "answers" and backend.candidate_role == backend.role
    assert backend.admin_sql("SELECT 1 WHERE 'a' LIKE '%'") == [(1,)]
    assert backend.admin_sql("SELECT %s::int", [2]) == [(2,)]
    assert backend.admin_sql("SELECT 1 / 0", ignore=["22012"]) == []
    with pytest.raises(InfrastructureError, match="division by zero"):
        backend.admin_sql("SELECT 1 / 0")
    backend.admin_commit()
    session = backend.session()
    session.begin_task()
    try:
        assert session.server_session_id == session.connection.info.backend_pid
        assert session.harness_sql("SELECT current_user") == [(backend.candidate_role,)]
        session.pin_setting("SET LOCAL extra_float_digits = 3")
        assert session.run("SELECT 1;", isolated=False, phase="install").ok  # a kept script resets pinned settings
        assert session.harness_sql("SHOW extra_float_digits") == [("3",)]
    finally:
        session.end_task()
    pid = session.server_session_id
    session.reconnect()
    assert session.server_session_id != pid

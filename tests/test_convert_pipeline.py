"""The conversion pipeline on the shared data and on small hand-made inputs (no database)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_plsqlbench.convert import convert_file
from pytest_plsqlbench.convert.emitter import EmitCase, Signature
from pytest_plsqlbench.convert.model import CASE_REASONS, LEFT_OUT_REASONS, TASK_REASONS
from pytest_plsqlbench.convert.pipeline import emitter_for, published_block_matches
from pytest_plsqlbench.convert.sqltypes import NUMBER
from pytest_plsqlbench.tasks import task_from_dict, task_to_dict

#: Published test blocks the Oracle emitter does not reproduce, and why. Empty: all 28 of
#: the shared sample match; a task listed here must really differ (asserted below).
CONFORMANCE_EXCEPTIONS: dict[str, str] = {}


@pytest.fixture(scope="module")
def plsqlbench_oracle(plsqlbench_sample):
    return convert_file("plsqlbench-mbpp", plsqlbench_sample, "oracle", subset="mbpp")


@pytest.fixture(scope="module")
def published_rows(plsqlbench_sample):
    path = plsqlbench_sample / "datasets" / "mbpp" / "mbpp_plsql.jsonl"
    return {r["task_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def unshown(script: str) -> str:
    """A block without what shows its returned value: the local procedures before ``assert_eq``
    and the ``|| plsqlbench_shown(...)`` of its messages."""
    start = script.find("  PROCEDURE plsqlbench_put(")
    if start >= 0:
        end = script.index("\n  END;\n", script.index("  FUNCTION plsqlbench_shown(")) + len("\n  END;\n")
        script = script[:start] + script[end:]
    return re.sub(r" \|\| plsqlbench_shown\((?:a|v_actual)\)", "", script)


def _norm(text: str) -> str:
    return " ".join(text.split())


def test_oracle_emitter_reproduces_the_published_test_blocks(plsqlbench_oracle, published_rows):
    tasks = {t.id: t for t in plsqlbench_oracle.tasks}
    assert plsqlbench_oracle.summary_lines()[0] == f"converted {len(published_rows)} of {len(published_rows)}"
    differing = {tid for tid, t in tasks.items() if not t.metadata["published_test_match"]}
    assert differing == set(CONFORMANCE_EXCEPTIONS), "update CONFORMANCE_EXCEPTIONS with the reason"
    assert len(tasks) - len(differing) >= 0.9 * len(published_rows)


def test_published_block_matching_is_not_vacuous(published_rows):
    """One literal off and the rendered block no longer matches the published one."""
    published = published_rows["MBPP/5"]["test"]
    sig = Signature("count_ways", (NUMBER,), NUMBER)
    cases = [EmitCase("case-1", (2,), 3), EmitCase("case-2", (8,), 153), EmitCase("case-3", (12,), 2131)]
    assert published_block_matches(emitter_for("oracle"), sig, cases, published)
    cases[1] = EmitCase("case-2", (8,), 154)
    assert not published_block_matches(emitter_for("oracle"), sig, cases, published)


def test_oracle_prompts_and_types_match_the_published_records(plsqlbench_oracle, published_rows):
    for task in plsqlbench_oracle.tasks:
        row = published_rows[task.id]
        assert task.metadata["published_prompt_match"], task.id
        assert task.turns[0].prompt == row["prompt"]
        ddl = [f.script.replace("\n/\n", "").strip() for f in task.fixtures]
        assert ddl == [d for _, d in row["type_ddl_info"]], task.id
        assert task.entry_points == (row["entry_point_py"],)


def test_published_mode_runs_the_published_block_as_one_item(plsqlbench_sample, published_rows):
    result = convert_file(
        "plsqlbench-mbpp", plsqlbench_sample, "oracle", subset="mbpp", assertions="published"
    )
    for task in result.tasks:
        (test,) = task.turns[0].tests
        assert test.id == "block" and test.kind == "assert"
        published = published_rows[task.id]["test"]
        # Run as published; only assert_eq's message also carries the returned value.
        assert test.script != published and unshown(test.script) == published
        labels = re.findall(r"'(case_\d+) failed'", published)
        assert sorted(test.options["cases"]) == sorted(labels) and labels
    pg = convert_file("plsqlbench-mbpp", plsqlbench_sample, "postgres", subset="mbpp", assertions="published")
    task = next(t for t in pg.tasks if t.id == "MBPP/1")
    assert [t.id for t in task.turns[0].tests] == ["case-1", "case-2", "case-3"]
    assert "IF v_actual <> 8 THEN" in task.turns[0].tests[0].script


def test_null_safe_mode_has_one_item_per_case(plsqlbench_oracle):
    task = next(t for t in plsqlbench_oracle.tasks if t.id == "MBPP/1")
    tests = task.turns[0].tests
    assert [t.id for t in tests] == ["case-1", "case-2", "case-3"]
    assert "eq_number(a, b)" in tests[0].script and "a != b" not in tests[0].script
    assert task.metadata["cases_total"] == 3 and task.metadata["cases_dropped"] == 0


@pytest.fixture(scope="module")
def sanitized_pg(mbpp_sanitized_file):
    return convert_file("mbpp", mbpp_sanitized_file, "postgres", subset="mbpp-sanitized")


def test_sanitized_mbpp_converts_at_least_95_percent(sanitized_pg):
    r = sanitized_pg
    assert r.total == 310
    assert r.converted >= 0.95 * r.total
    assert r.summary_lines()[0] == f"converted {r.converted} of {r.total}"
    assert r.converted + len(r.rejected) + len(r.left_out) == r.total
    assert {x.reason for x in r.rejected} <= set(TASK_REASONS)
    ids = [t.id for t in r.tasks]
    assert ids[0] == "Mbpp/2" and len(set(ids)) == len(ids)


def test_nothing_is_dropped_silently(sanitized_pg):
    r = sanitized_pg
    for task in r.tasks:
        dropped = r.dropped.get(task.id, [])
        assert task.n_tests + len(dropped) == r.source_cases[task.id], task.id
        assert task.metadata["cases_dropped"] == len(dropped)
        assert all(d.reason in CASE_REASONS and d.detail for d in dropped)
    for rejection in r.rejected:
        assert rejection.detail
        assert rejection.task_id in r.explain(rejection.task_id)


def test_sanitized_keeps_set_and_isclose_semantics(sanitized_pg):
    tasks = {t.id: t for t in sanitized_pg.tasks}
    sim = tasks["Mbpp/2"]  # assert set(similar_elements(...)) == set((4, 5))
    assert sim.metadata["set_compared"]
    assert '"o":"set"' in sim.turns[0].tests[0].script
    sphere = tasks["Mbpp/82"]  # assert math.isclose(volume_sphere(10), 4188.79..., rel_tol=0.001)
    assert (
        '"k": "isclose"' in sphere.turns[0].tests[0].script
        and '"rtol": "0.001"' in sphere.turns[0].tests[0].script
    )


def test_explain_names_the_reason(sanitized_pg):
    r = sanitized_pg
    rejected = r.rejected[0]
    text = r.explain(rejected.task_id)
    assert text.startswith(f"{rejected.task_id}: rejected ({rejected.reason}): {rejected.detail}")
    with_drops = next(tid for tid, cases in r.dropped.items() if cases and any(t.id == tid for t in r.tasks))
    text = r.explain(with_drops)
    assert "converted to postgres" in text
    for d in r.dropped[with_drops]:
        assert f"{d.case_id}: {d.reason}: {d.detail}" in text
    assert "not in mbpp input" in r.explain("Mbpp/999999")


def test_tasks_survive_the_json_round_trip(sanitized_pg):
    for task in sanitized_pg.tasks[:20]:
        assert task_from_dict(json.loads(json.dumps(task_to_dict(task)))) == task


# --------------------------------------------------------------------------- hand-made inputs
def _sanitized(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "mbpp.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _row(task_id: int, code: str, tests: list[str]) -> dict:
    return {"task_id": task_id, "text": "Do it.", "code": code, "test_list": tests, "test_setup_code": ""}


def test_majority_signature_drops_the_odd_case_and_says_so(tmp_path):
    path = _sanitized(
        tmp_path,
        [
            _row(
                1,
                "def rev(xs):\n    return xs[::-1]",
                ["assert rev([1, 2]) == [2, 1]", "assert rev([3]) == [3]", "assert rev(['a']) == ['a']"],
            ),
            _row(2, "def pick(x):\n    return x", ["assert pick(1) == 1", "assert pick('a') == 'a'"]),
        ],
    )
    r = convert_file("mbpp", path, "postgres", subset="s")
    (task,) = r.tasks
    assert task.metadata["signature"] == "rev(list[number]) -> list[number]"
    assert [d.case_id for d in r.dropped["Mbpp/1"]] == ["case-3"]
    assert r.dropped["Mbpp/1"][0].reason == "type-mismatch"
    (rejection,) = r.rejected
    assert rejection.task_id == "Mbpp/2" and rejection.reason == "inconsistent-types"  # 1 vs 1: no majority
    assert "argument 1" in rejection.detail


def test_oracle_empty_string_collision_is_dropped_as_ambiguous(tmp_path):
    path = _sanitized(
        tmp_path,
        [
            _row(
                1,
                "def f(s):\n    return s is None",
                ["assert f(None) == True", "assert f('') == False", "assert f('a') == False"],
            )
        ],
    )
    ora = convert_file("mbpp", path, "oracle", subset="s")
    assert [(d.case_id, d.reason) for d in ora.dropped["Mbpp/1"]] == [("case-2", "ambiguous-input")]
    pg = convert_file("mbpp", path, "postgres", subset="s")  # '' is not NULL in PostgreSQL
    assert pg.dropped["Mbpp/1"] == [] and pg.tasks[0].n_tests == 3


def test_reserved_entry_point_is_renamed_in_sql(tmp_path):
    path = _sanitized(tmp_path, [_row(1, "def check(n):\n    return n > 0", ["assert check(1) == True", "assert check(-1) == False"])])
    (task,) = convert_file("mbpp", path, "postgres", subset="s").tasks
    assert task.entry_points == ("check_fn",)
    assert "CREATE OR REPLACE FUNCTION check_fn(" in task.turns[0].prompt
    assert "def check(n):" in task.turns[0].prompt
    assert task.metadata["python_entry_point"] == "check"


def test_unknown_source_dialect_and_mode_are_usage_errors(tmp_path):
    from pytest_plsqlbench.errors import UsageError

    path = _sanitized(tmp_path, [_row(1, "def f(x):\n    return x", ["assert f(1) == 1"])])
    with pytest.raises(UsageError):
        convert_file("humaneval", path, "postgres", subset="s")
    with pytest.raises(UsageError):
        convert_file("mbpp", path, "mysql", subset="s")
    with pytest.raises(UsageError):
        convert_file("mbpp", path, "postgres", subset="s", assertions="loose")


# --------------------------------------------------------------------------- constant-passable tasks
def test_sanitized_tasks_a_constant_passes_are_left_out_and_explained(sanitized_pg):
    r = sanitized_pg
    left = {t.id: t for t in r.left_out}
    # 222 (check_type) keeps only its True cases, 582 (my_dict) only its False ones.
    assert {"Mbpp/222", "Mbpp/582"} <= set(left)
    assert left["Mbpp/222"].metadata["constant_answer"] == "True"
    assert left["Mbpp/582"].metadata["constant_answer"] == "False"
    assert not {t.id for t in r.tasks} & set(left)
    for task in r.left_out:
        assert task.metadata["left_out"] in LEFT_OUT_REASONS
        assert "dropped case(s) expect something else" in task.metadata["left_out_detail"]
    line = next(x for x in r.summary_lines() if x.startswith("left out "))
    assert "constant-passable" in line and "Mbpp/222 (-> True, 2 of 3 cases)" in line
    assert "left out by default (constant-passable)" in r.explain("Mbpp/222")


def test_keep_constant_tasks_keeps_them_marked(mbpp_sanitized_file):
    r = convert_file("mbpp", mbpp_sanitized_file, "postgres", subset="mbpp-sanitized", keep_left_out=True)
    kept = {t.id: t for t in r.tasks}
    assert kept["Mbpp/222"].metadata["left_out"] == "constant-passable"
    assert any(x.startswith("kept on request, marked ") for x in r.summary_lines())


def _typed(outputs, alternatives=()):
    from pytest_plsqlbench.convert.evalplus import tolerance_for
    from pytest_plsqlbench.convert.model import SourceCase, SourceTask
    from pytest_plsqlbench.convert.pipeline import type_task

    cases = [
        SourceCase(
            id=f"case-{i}", origin="case", args=(i,), expected=o, alternatives=alternatives, tolerance=tolerance_for(o, 0)
        )
        for i, o in enumerate(outputs, 1)
    ]
    task = SourceTask(id="T/1", entry_point="f", params=("x",), prompt_py="def f(x):\n", cases=cases)
    return type_task(task)


@pytest.mark.parametrize(
    "outputs, constant",
    [
        ([True, True, True], "True"),
        ([False, False], "False"),
        ([0, 0, 0], "0"),
        (["", "", ""], "''"),
        ([[], [], []], "[]"),
        ([(1, "a"), (1, "a")], "(1, 'a')"),
        ([1.0, 1.0000000001, 0.9999999999], "1.0"),  # within the float tolerance the tests apply
        ([5], "5"),  # one case: the value a prompt's example shows
    ],
)
def test_every_constant_class_is_detected(outputs, constant):
    from pytest_plsqlbench.convert.pipeline import emit_task

    for dialect in ("postgres", "oracle"):
        task, _, rejection = emit_task(_typed(outputs), dialect, "s", "null-safe")
        assert rejection is None and task is not None
        assert task.metadata["left_out"] == "constant-passable", (dialect, outputs)
        assert task.metadata["constant_answer"] == constant


@pytest.mark.parametrize("outputs", [[True, False], [0, 1, 0], ["", "a"], [[], [1]], [1.0, 1.1]])
def test_tasks_that_need_more_than_a_constant_stay(outputs):
    from pytest_plsqlbench.convert.pipeline import emit_task

    task, _, _ = emit_task(_typed(outputs), "postgres", "s", "null-safe")
    assert task is not None and "left_out" not in task.metadata and "constant_answer" not in task.metadata


def test_an_alternative_every_case_accepts_is_a_constant_too():
    """sum_div style: each case also accepts 0, so returning 0 passes them all."""
    from pytest_plsqlbench.convert.pipeline import emit_task

    task, _, _ = emit_task(_typed([3, 7, 9], alternatives=(0,)), "postgres", "s", "null-safe")
    assert task is not None and task.metadata["constant_answer"] == "0"


def test_oracle_reads_empty_string_as_null_so_both_are_one_constant():
    from pytest_plsqlbench.convert.pipeline import emit_task

    pg, _, _ = emit_task(_typed(["", None]), "postgres", "s", "null-safe")
    ora, _, _ = emit_task(_typed(["", None]), "oracle", "s", "null-safe")
    assert "left_out" not in pg.metadata
    assert ora.metadata["left_out"] == "constant-passable"


def test_validate_reports_cases_kept_and_constant_tasks(mbpp_sanitized_file, tmp_path):
    from pytest_plsqlbench.convert.validate import case_report

    r = convert_file("mbpp", mbpp_sanitized_file, "postgres", subset="mbpp-sanitized", keep_left_out=True)
    lines = case_report(r.tasks)
    kept = sum(t.n_tests for t in r.tasks)
    total = sum(t.metadata["cases_total"] for t in r.tasks)
    assert lines[0].startswith(f"cases kept {kept} of {total} (")
    assert any("constant-passable" in x and "Mbpp/222 (-> True, 2 of 3 cases)" in x for x in lines)
    default = convert_file("mbpp", mbpp_sanitized_file, "postgres", subset="mbpp-sanitized")
    assert "constant-passable 0: no task is passed by one constant answer" in case_report(default.tasks)


def test_streaming_emission_writes_what_emit_all_writes(mbpp_sanitized_file):
    """The loader's one-pass emission (shared literal memo, both modes, task by task) is
    byte-for-byte the per-target emission, left-out tasks included."""
    from pytest_plsqlbench.convert.pipeline import emit_all, emit_streaming, type_source

    typed = type_source("mbpp", mbpp_sanitized_file)
    targets = [("postgres", "null-safe"), ("oracle", "null-safe"), ("postgres", "published"), ("oracle", "published")]
    written: dict[tuple[str, str], list[str]] = {t: [] for t in targets}
    results = emit_streaming(
        typed, "mbpp", subset="s", targets=targets,
        sink=lambda d, m, task: written[(d, m)].append(json.dumps(task_to_dict(task), ensure_ascii=False)),
    )
    for d, mode in targets:
        expected = emit_all(typed, "mbpp", d, subset="s", assertions=mode, keep_left_out=True)
        assert written[(d, mode)] == [json.dumps(task_to_dict(t), ensure_ascii=False) for t in expected.tasks]
        assert results[(d, mode)].summary_lines() == expected.summary_lines()
        assert len(results[(d, mode)].left_out) == len(expected.left_out) >= 2

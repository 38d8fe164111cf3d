"""End-to-end behaviour of the plugin, run in subprocesses the way users run pytest."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from minisubset import DOUBLE_REF_PG, conversation_task, double_task, write_answers, write_subset

WRONG_CASE3 = "CREATE FUNCTION double_it(x integer) RETURNS integer LANGUAGE sql AS 'SELECT CASE WHEN x = 3 THEN 0 ELSE x * 2 END';"
WRONG_ONLY1 = "CREATE FUNCTION double_it(x integer) RETURNS integer LANGUAGE sql AS 'SELECT CASE WHEN x = 1 THEN 2 ELSE 0 END';"


def greet(turn: int, ok_for: tuple[int, ...] = (1, 2)) -> str:
    cond = " OR ".join(f"n = {n}" for n in ok_for) or "false"
    return (
        "CREATE OR REPLACE PROCEDURE greet(n integer) LANGUAGE plpgsql AS $$ BEGIN "
        f"IF {cond} THEN RAISE NOTICE 'hello % %', {turn}, n; ELSE RAISE NOTICE 'nope'; END IF; END $$;"
    )


@pytest.fixture
def mini(pytester: pytest.Pytester) -> Path:
    return write_subset(
        pytester.path,
        "mini",
        {"a": double_task("task_a"), "b": double_task("task_b"), "conv": conversation_task("conv")},
    )


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def results(path: Path) -> dict:
    return json.loads(path.read_text())


def test_plugin_is_inert_without_subset(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_one():\n    assert 1 + 1 == 2\n")
    result = run(pytester, "-v")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*PLSQLBench summary*")


def test_collect_only_needs_no_database_and_no_model(pytester: pytest.Pytester, mini: Path) -> None:
    result = run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), "--collect-only", "-q")
    assert result.ret == 0
    lines = sorted(line for line in result.outlines if line.startswith("mini/"))
    assert lines == [
        "mini/conv/turn-1/a", "mini/conv/turn-1/b", "mini/conv/turn-2/a", "mini/conv/turn-2/b",
        "mini/conv/turn-3/a", "mini/conv/turn-3/b",
        "mini/task_a/case-1", "mini/task_a/case-2", "mini/task_a/case-3",
        "mini/task_b/case-1", "mini/task_b/case-2", "mini/task_b/case-3",
    ]
    # No database was started: no embedded data directory was reported, no summary printed.
    result.stdout.no_fnmatch_line("*PLSQLBench summary*")


def test_unknown_subset_is_a_usage_error_listing_known_subsets(pytester: pytest.Pytester, mini: Path) -> None:
    result = run(pytester, "--subset", "nope", "--plsql-tasks", str(mini), "--plsql-model=reference")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown subset(s) nope; known subsets:*mini*smoke*"])
    assert "Traceback" not in result.stderr.str()


def test_missing_answer_source_is_a_usage_error(pytester: pytest.Pytester, mini: Path) -> None:
    result = run(pytester, "--subset", "mini", "--plsql-tasks", str(mini))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--subset needs answers*--plsql-model=reference*"])


def test_oracle_with_embedded_database_is_a_usage_error(pytester: pytest.Pytester, mini: Path) -> None:
    result = run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), "--plsql-dialect=oracle",
                 "--plsql-db=embedded", "--plsql-model=reference")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*embedded exists only for postgres*"])


def test_malformed_answers_file_names_file_and_line(pytester: pytest.Pytester, mini: Path) -> None:
    answers = pytester.path / "answers.jsonl"
    answers.write_text('{"task_id": "task_a", "answer": "x"}\n{not json\n')
    result = run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), f"--plsql-answers={answers}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{answers}:2: not valid JSON*"])


def test_malformed_task_file_names_the_file(pytester: pytest.Pytester, mini: Path) -> None:
    (mini / "mini" / "broken.yaml").write_text("id: broken\nprompt: p\ntests: [{id: x, kind: assert}]\n")
    result = run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*broken.yaml test 1 (x): no postgres script*"])


def test_reference_run_passes_and_reports_paper_metrics(pytester: pytest.Pytester, mini: Path) -> None:
    out = pytester.path / "r.json"
    result = run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), "--plsql-model=reference",
                 f"--plsql-results={out}", "--plsql-dialect=postgres")
    result.assert_outcomes(passed=12)
    result.stdout.fnmatch_lines(["*PLSQLBench summary*", "*Mean Test Pass@1*Suite Pass@1*", "mini*3*12*100.00*100.00*100.00*100.00*"])
    doc = results(out)
    assert doc["subsets"]["mini"]["suite_pass"] == 1.0
    assert doc["subsets"]["mini"]["episode_pass"] == 1.0
    assert doc["header"]["database_version"].startswith("PostgreSQL 18")


def test_wrong_answers_fail_exactly_the_affected_items_and_score_partial_credit(
    pytester: pytest.Pytester, mini: Path
) -> None:
    answers = write_answers(
        pytester.path / "answers.jsonl",
        [
            {"task_id": "task_a", "answer": WRONG_CASE3},  # passes 2 of 3
            {"task_id": "task_b", "answer": WRONG_ONLY1},  # passes 1 of 3
            {"task_id": "conv", "turn": 1, "answer": greet(1)},  # 2/2
            {"task_id": "conv", "turn": 2, "answer": greet(2)},  # 2/2
            {"task_id": "conv", "turn": 3, "answer": greet(3, ok_for=(1,))},  # 1/2
        ],
    )
    out = pytester.path / "r.json"
    result = run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), f"--plsql-answers={answers}",
                 f"--plsql-results={out}", "-rf")
    result.assert_outcomes(passed=8, failed=4)
    result.stdout.fnmatch_lines(
        [
            "FAILED mini/task_a/case-3 - *wrong_output*",
            "FAILED mini/task_b/case-2 - *wrong_output*",
            "FAILED mini/task_b/case-3 - *wrong_output*",
            "FAILED mini/conv/turn-3/b - *wrong_output*",
        ],
        consecutive=False,
    )
    doc = results(out)
    by_id = {t["task_id"]: t for t in doc["tasks"]}
    assert by_id["task_a"]["test_pass"] == pytest.approx(2 / 3)
    assert by_id["task_b"]["test_pass"] == pytest.approx(1 / 3)
    # The paper's worked examples (App. C).
    conv = by_id["conv"]
    assert conv["episode_pass"] == 0.0
    assert conv["turn_suite_pass"] == pytest.approx(2 / 3)
    assert conv["test_pass"] == pytest.approx(5 / 6)
    mini_metrics = doc["subsets"]["mini"]
    assert mini_metrics["mean_test_pass"] == pytest.approx((2 / 3 + 1 / 3 + 5 / 6) / 3)
    assert mini_metrics["suite_pass"] == 0.0
    assert mini_metrics["failure_classes"]["wrong_output"] == 4


def test_compile_error_fails_every_test_of_the_task_as_invalid_artifact(pytester: pytest.Pytester, mini: Path) -> None:
    answers = write_answers(
        pytester.path / "answers.jsonl",
        [{"task_id": "task_a", "answer": "CREATE FUNCTION double_it(x integer) RETURNS integer LANGUAGE plpgsql AS $$ BEGIN RETURN x * ; END $$;"},
         {"task_id": "task_b", "answer": "CREATE FUNCTION twice(x integer) RETURNS integer LANGUAGE sql AS 'SELECT 2 * x';"}],
    )
    out = pytester.path / "r.json"
    run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), f"--plsql-answers={answers}", f"--plsql-results={out}",
        "-k", "task_a or task_b")
    tests = {(t["task_id"], x["test_id"]): x for t in results(out)["tasks"] for x in t["tests"]}
    assert {tests[("task_a", f"case-{n}")]["failure_class"] for n in (1, 2, 3)} == {"invalid_artifact"}
    # A missing entry point is an interface error, per PLSQLBench E.2.
    assert {tests[("task_b", f"case-{n}")]["failure_class"] for n in (1, 2, 3)} == {"interface"}


def test_missing_answers_are_not_generated_and_excluded(pytester: pytest.Pytester, mini: Path) -> None:
    answers = write_answers(pytester.path / "answers.jsonl", [{"task_id": "task_a", "answer": DOUBLE_REF_PG}])
    out = pytester.path / "r.json"
    # Excluded only when asked (the default scores them failed: tests/test_integrity_missing.py).
    result = run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), f"--plsql-answers={answers}",
                 f"--plsql-results={out}", "-k", "task_a or task_b", "--plsql-missing=exclude")
    result.assert_outcomes(passed=3, failed=3)
    doc = results(out)
    assert doc["subsets"]["mini"]["tasks"] == 1
    assert doc["subsets"]["mini"]["excluded_tasks"] == ["task_b"]
    assert doc["subsets"]["mini"]["mean_test_pass"] == 1.0
    result.stdout.fnmatch_lines(["*1 task(s) excluded from the metrics*task_b*"])


def test_an_answer_cannot_leave_traces_for_the_next_task(pytester: pytest.Pytester) -> None:
    """Dropping a fixture table, leaving functions and committing are all undone."""
    folder = write_subset(
        pytester.path,
        "iso",
        {
            "first": "id: first\nprompt: p\nfixtures: [shop]\nreference: {postgres: 'SELECT 1;', oracle: 'SELECT 1 FROM dual;'}\n"
            "tests:\n  - {id: t, kind: output, postgres: 'SELECT count(*) FROM shop.customers;', oracle: x, expected: ['5']}\n",
            "second": "id: second\nprompt: p\nfixtures: [shop]\nreference: {postgres: 'SELECT 1;', oracle: 'SELECT 1 FROM dual;'}\n"
            "tests:\n  - {id: table-intact, kind: output, postgres: 'SELECT count(*) FROM shop.customers;', oracle: x, expected: ['5']}\n"
            "  - {id: no-leftover, kind: output, postgres: \"SELECT count(*) FROM pg_proc WHERE proname = 'leftover';\", oracle: x, expected: ['0']}\n",
        },
    )
    evil = (
        "DROP TABLE shop.order_items; DELETE FROM shop.customers;\n"
        "CREATE FUNCTION leftover() RETURNS int LANGUAGE sql AS 'SELECT 1';\n"
        "COMMIT;\nCREATE TABLE answers.junk(x int);"
    )
    answers = write_answers(pytester.path / "answers.jsonl", [
        {"task_id": "first", "answer": evil},
        {"task_id": "second", "answer": "SELECT 1;"},
    ])
    out = pytester.path / "r.json"
    # One worker, so both tasks share a database session and server.
    result = run(pytester, "--subset", "iso", "--plsql-tasks", str(folder), f"--plsql-answers={answers}",
                 f"--plsql-results={out}", "-p", "no:xdist")
    tests = {(t["task_id"], x["test_id"]): x for t in results(out)["tasks"] for x in t["tests"]}
    # The first answer was refused by the database's grants, not by luck.
    assert tests[("first", "t")]["failure_class"] in ("unsafe", "invalid_artifact")
    assert tests[("second", "table-intact")]["passed"], tests[("second", "table-intact")]
    assert tests[("second", "no-leftover")]["passed"], tests[("second", "no-leftover")]
    result.assert_outcomes(passed=2, failed=1)


def test_leftover_function_of_a_passing_answer_is_gone_for_the_next_task(pytester: pytest.Pytester) -> None:
    folder = write_subset(
        pytester.path,
        "iso2",
        {
            "first": "id: first\nprompt: p\nreference: {postgres: x, oracle: x}\n"
            "tests:\n  - {id: t, kind: output, postgres: 'SELECT helper();', oracle: x, expected: ['1']}\n",
            "second": "id: second\nprompt: p\nreference: {postgres: x, oracle: x}\n"
            "tests:\n  - {id: t, kind: output, postgres: \"SELECT count(*) FROM pg_proc WHERE proname = 'helper';\", oracle: x, expected: ['0']}\n",
        },
    )
    answers = write_answers(pytester.path / "answers.jsonl", [
        {"task_id": "first", "answer": "CREATE FUNCTION helper() RETURNS int LANGUAGE sql AS 'SELECT 1';"},
        {"task_id": "second", "answer": "SELECT 1;"},
    ])
    result = run(pytester, "--subset", "iso2", "--plsql-tasks", str(folder), f"--plsql-answers={answers}", "-p", "no:xdist")
    result.assert_outcomes(passed=2)


@pytest.mark.slow
def test_results_identical_with_n0_n1_n2(pytester: pytest.Pytester, mini: Path) -> None:
    answers = write_answers(
        pytester.path / "answers.jsonl",
        [
            {"task_id": "task_a", "answer": WRONG_CASE3},
            {"task_id": "task_b", "answer": DOUBLE_REF_PG},
            {"task_id": "conv", "turn": 1, "answer": greet(1)},
            {"task_id": "conv", "turn": 2, "answer": greet(2, ok_for=(2,))},
            {"task_id": "conv", "turn": 3, "answer": greet(3)},
        ],
    )
    docs = []
    for n in ("0", "1", "2"):
        out = pytester.path / f"r{n}.json"
        xml = pytester.path / f"j{n}.xml"
        run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), f"--plsql-answers={answers}",
            f"--plsql-results={out}", "-n", n, f"--junitxml={xml}")
        doc = results(out)
        cases = {
            (case.get("classname"), case.get("name")): (
                [(p.get("name"), p.get("value")) for p in case.iter("property")],
                [(f.tag, f.get("message")) for f in case if f.tag in ("failure", "error", "skipped")],
            )
            for case in ET.parse(xml).getroot().iter("testcase")
        }
        docs.append(
            (
                doc["subsets"],
                # Everything a test's entry says but where and how fast it ran: what crosses the
                # xdist wire (packed, ``wire.py``) arrives as it left.
                [(t["task_id"], t["answers"], [{k: v for k, v in x.items() if k not in ("worker", "duration_s")}
                                               for x in t["tests"]]) for t in doc["tasks"]],
                cases,
            )
        )
    assert docs[0] == docs[1] == docs[2]
    assert any(props and dict(props).get("failure_class") == "wrong_output" for props, _ in docs[0][2].values())
    assert docs[0][0]["mini"]["tests"] == 12
    # Under -n 2 every task's items ran on a single worker.
    workers = {t["task_id"]: {x.get("worker") for x in t["tests"]} for t in results(pytester.path / "r2.json")["tasks"]}
    assert all(len(w) == 1 and w <= {"gw0", "gw1"} for w in workers.values()), workers


def test_junit_xml_carries_task_properties(pytester: pytest.Pytester, mini: Path) -> None:
    answers = write_answers(pytester.path / "answers.jsonl", [{"task_id": "task_a", "answer": WRONG_CASE3}])
    xml = pytester.path / "junit.xml"
    run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), f"--plsql-answers={answers}", f"--junitxml={xml}",
        "-k", "task_a")
    cases = {c.get("name"): c for c in ET.parse(xml).getroot().iter("testcase")}
    case3 = next(c for name, c in cases.items() if name.endswith("case-3"))
    props = {p.get("name"): p.get("value") for p in case3.iter("property")}
    assert props["task_id"] == "task_a"
    assert props["subset"] == "mini"
    assert props["dialect"] == "postgres"
    assert props["model"] == "answers:answers.jsonl"
    assert props["failure_class"] == "wrong_output"
    failure = case3.find("failure")
    assert failure is not None and "case-3 failed" in (failure.get("message") or "")


def test_markers_and_keywords_select_items(pytester: pytest.Pytester, mini: Path) -> None:
    base = ("--subset", "mini", "--plsql-tasks", str(mini), "--collect-only", "-q")
    by_marker = run(pytester, *base, "-m", "multiturn")
    selected = [line for line in by_marker.outlines if line.startswith("mini/")]
    assert len(selected) == 6 and all(line.startswith("mini/conv/turn-") for line in selected)
    by_keyword = run(pytester, *base, "-k", "arith")  # metadata db_id of the double tasks
    assert sum(line.startswith("mini/task_") for line in by_keyword.outlines) == 6
    assert not any(line.startswith("mini/conv") for line in by_keyword.outlines)
    # Every item carries its task's markers (set once on the task's node, inherited).
    every = [line for line in run(pytester, *base).outlines if line.startswith("mini/")]
    marked = run(pytester, *base, "-m", "plsql and subset_mini and dialect_postgres and (singleturn or multiturn)")
    assert len(every) > 6 and [line for line in marked.outlines if line.startswith("mini/")] == every
    assert not any(line.startswith("mini/") for line in run(pytester, *base, "-m", "dialect_oracle").outlines)


def test_command_line_answer_source_wins_over_the_environment(
    pytester: pytest.Pytester, mini: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLSQL_MODEL", "claude")
    answers = write_answers(pytester.path / "answers.jsonl", [{"task_id": "task_a", "answer": DOUBLE_REF_PG}])
    result = run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), f"--plsql-answers={answers}", "-k", "task_a")
    result.assert_outcomes(passed=3)
    both = run(pytester, "--subset", "mini", "--plsql-tasks", str(mini), f"--plsql-answers={answers}",
               "--plsql-model=reference", "--collect-only")
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    both.stderr.fnmatch_lines(["*choose one of --plsql-model and --plsql-answers*"])


def test_plugin_ini_keys_are_not_read_without_subset(pytester: pytest.Pytester) -> None:
    """A project with a bad plsql_ ini value is untouched unless it runs a benchmark."""
    pytester.makeini("[pytest]\nplsql_timeout = 0\n")
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    run(pytester).assert_outcomes(passed=1)


def test_run_dialect_prefers_the_default_and_falls_back_to_a_shared_one(tmp_path: Path) -> None:
    from pytest_plsqlbench.manifests import Manifest, run_dialect

    def m(*dialects: str) -> Manifest:
        return Manifest(name="x", loader="yaml", dialects=dialects, path=tmp_path / "x.yaml")

    assert run_dialect([m("postgres", "oracle"), m("oracle", "postgres")], "postgres") == "postgres"
    assert run_dialect([m("postgres", "oracle"), m("oracle")], "postgres") == "oracle"
    assert run_dialect([m("oracle")], "oracle") == "oracle"
    assert run_dialect([m("postgres"), m("oracle")], "postgres") == "postgres"  # none shared: the caller's error
    assert run_dialect([], "postgres") == "postgres"

"""Spider-PLSQL end to end on the release's own database (the shared excerpt
``plsqlbench-spider-sample``: the sample's 22 tasks and CRE_DOC_TEMPLATE_MGT's exact DDL and
DML lines), read through ``--plsql-data`` as a user would point at a clone.

The release's data is not clean (see docs/spider.md, "The release's data as loaded"): its
``Templates`` rows put ``''`` into a NOT NULL column and its ``Documents`` rows for this
database are not in the release. These tests pin what the run does about it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_plsqlbench.settings import Settings
from pytest_plsqlbench.spider.validate import validate_subset

NOT_NULL_LINE = (
    "  load of CRE_DOC_TEMPLATE_MGT adjusted: CRE_DOC_TEMPLATE_MGT.TEMPLATES.TEMPLATE_DETAILS: NOT NULL not "
    "enforced, as in the release's load (20 row(s) insert '', which Oracle stores as NULL; the release "
    "reports the INSERT successful)"
)
ON_DOCUMENTS = [f"spider_{n}" for n in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 16, 17, 18, 19)]


@pytest.fixture(scope="session")
def spider_sample(shared_data: Path) -> Path:
    return shared_data / "plsqlbench-spider-sample"


def run(pytester: pytest.Pytester, data: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--subset", "spider", f"--plsql-data={data}", *args
    )


def outcomes_by_task(results: Path) -> dict[str, str]:
    doc = json.loads(results.read_text())
    return {
        t["task_id"]: "passed" if t["tests"][0]["passed"] else t["tests"][0]["failure_class"]
        for t in doc["tasks"]
    }


@pytest.mark.parametrize("workers", ["0", "2"])
def test_published_references_on_the_releases_database(
    pytester: pytest.Pytester, spider_sample: Path, workers: str
) -> None:
    results = pytester.path / "results.json"
    # Every published reference, kept as published: the 11 tasks an answer printing nothing
    # passes are left out by default (tests/test_empty_answer_left_out.py), kept here on request.
    result = run(
        pytester, spider_sample, "--plsql-model=reference", "-n", workers, f"--plsql-results={results}",
        "--plsql-keep-constant-tasks",
    )
    # No infrastructure error: the data loads, with its adjustment named.
    result.assert_outcomes(passed=16, failed=6)
    result.stdout.fnmatch_lines(
        [
            "  runnable: 22 (22 with data, 0 on empty tables); ran: 22 (22 with data, 0 on empty tables)",
            NOT_NULL_LINE,
            (
                "  table CRE_DOC_TEMPLATE_MGT.DOCUMENTS has no rows in the data (no 'Documents' entry for this "
                "database in the DML); 19 task(s) run on it empty: spider_0, spider_1, *"
            ),
            (
                "  published references run: 22; pass the strict comparator: 16; fail it merely on formatting "
                "(lenient pass): 6 [header 1, label 4, one-line 1]; fail both: 0; not evaluated: 0"
            ),
            "    formatting only: spider_8, spider_9, spider_11, spider_17, spider_19, spider_20",
        ]
    )
    doc = json.loads(results.read_text())
    report = doc["spider_report"]["spider"]
    # Every reference that fails is explained in the data report: formatting only.
    failing = sorted(t for t, o in outcomes_by_task(results).items() if o != "passed")
    assert failing == sorted(report["references"]["lenient_tasks"])
    assert report["tables_without_rows"]["CRE_DOC_TEMPLATE_MGT.DOCUMENTS"]["tasks"] == ON_DOCUMENTS
    assert report["load_adjustments"] == {"CRE_DOC_TEMPLATE_MGT": [NOT_NULL_LINE.split(": ", 1)[1]]}
    assert report["load_errors"] == {} and report["rows_not_loaded"] == []
    # Tasks an answer printing nothing passes are named (the gold rows each test recorded).
    empty = sorted((t["task_id"] for t in doc["tasks"] if t["tests"][0]["expected"] == []), key=lambda i: int(i[7:]))
    assert report["empty_gold_tasks"] == empty and len(empty) == 11
    result.stdout.fnmatch_lines(
        ["  gold result empty: 11 of the 22 task(s) run -- an answer that prints nothing passes them; kept on request (11)*"]
    )
    assert doc["subsets"]["spider"]["failure_classes"]["infrastructure"] == 0
    assert doc["subsets"]["spider"]["suite_pass"] == pytest.approx(16 / 22)


ANSWERS = {
    # Right, and only if the release's '' was loaded as NULL (Oracle's reading): 20 rows.
    "spider_21": "DO $$ BEGIN RAISE NOTICE '%', (SELECT COUNT(*) FROM cre_doc_template_mgt.templates "
    "WHERE template_details IS NULL); END $$;",
    # Wrong count.
    "spider_20": "DO $$ BEGIN RAISE NOTICE '%', (SELECT COUNT(*) + 1 FROM cre_doc_template_mgt.templates); END $$;",
    # Right on the release's (empty) Documents.
    "spider_0": "DO $$ BEGIN RAISE NOTICE '%', (SELECT COUNT(*) FROM cre_doc_template_mgt.documents); END $$;",
    # A constant that would pass on the full Spider database's 15 documents, not on this one.
    "spider_1": "DO $$ BEGIN RAISE NOTICE '15'; END $$;",
    # A table that does not exist.
    "spider_22": "DO $$ DECLARE r record; BEGIN FOR r IN SELECT * FROM cre_doc_template_mgt.template LOOP "
    "RAISE NOTICE '%', r.template_id; END LOOP; END $$;",
    # Not a program at all.
    "spider_18": "DO $$ BEGIN RAISE NOTICE '%' (; END $$;",
}


def test_an_answers_file_is_judged_task_by_task(pytester: pytest.Pytester, spider_sample: Path) -> None:
    answers = pytester.path / "answers.jsonl"
    answers.write_text(
        "".join(json.dumps({"task_id": t, "turn": 1, "answer": a}) + "\n" for t, a in ANSWERS.items())
    )
    results = pytester.path / "results.json"
    result = run(pytester, spider_sample, f"--plsql-answers={answers}", f"--plsql-results={results}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    by_task = outcomes_by_task(results)
    assert {t: by_task[t] for t in ANSWERS} == {
        "spider_21": "passed",
        "spider_20": "wrong_output",
        "spider_0": "passed",
        "spider_1": "wrong_output",
        "spider_22": "interface",
        "spider_18": "invalid_artifact",
    }
    doc = json.loads(results.read_text())
    empty_gold = set(doc["spider_report"]["spider"]["empty_gold_tasks"])
    # The 11 tasks an answer printing nothing passes are left out (skipped), answered or not.
    assert len(empty_gold) == 11 and not empty_gold & set(ANSWERS)
    assert {t for t, o in by_task.items() if o == "skipped"} == empty_gold
    assert {o for t, o in by_task.items() if t not in ANSWERS and t not in empty_gold} == {"not_generated"}
    summary = doc["subsets"]["spider"]
    # Tasks the file has no answer for fail (not generated) by default: 2 of the 11 scored pass.
    assert summary["tasks"] == 11 and summary["suite_pass"] == pytest.approx(2 / 11)
    assert summary["failure_classes"]["infrastructure"] == 0


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_load_that_fails_is_a_data_error_once_per_database(
    pytester: pytest.Pytester, spider_sample: Path, tmp_path: Path, workers: str
) -> None:
    """A fault no build-time check catches (a duplicate key) is reported with its cause, once in
    the data report, and the tasks needing the database are errors that fail the run (issue 29:
    data that cannot be loaded never goes green as skips)."""
    copy = tmp_path / "release"
    shutil.copytree(spider_sample, copy)
    dml = copy / "schema" / "spider" / "spider_dml.json"
    doc = json.loads(dml.read_text())
    entry = doc["tables"]["Ref_Template_Types"]
    entry["insert_statements"] = [entry["insert_statements"][0] + ", ('PPT', 'Presentation again')"]
    dml.write_text(json.dumps(doc))
    results = pytester.path / "results.json"
    result = run(
        pytester, copy, "--plsql-model=reference", "-rs", f"--plsql-results={results}", "-n", workers
    )
    result.assert_outcomes(errors=22)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            (
                "  not runnable, data error at load (22): fixture 'spider schema CRE_DOC_TEMPLATE_MGT (* rows)' "
                "failed to load at script line *: duplicate key value violates unique constraint *: spider_0, spider_1, *"
            ),
        ]
    )
    data_report = result.stdout.str().split("PLSQLBench data report")[1].split("PLSQLBench summary")[0]
    assert data_report.count("failed to load") == 1  # once for the database, with its tasks
    assert "plsqlbench:spider:" not in result.stdout.str()  # named, not by its hashed key
    doc = json.loads(results.read_text())
    assert {t["failure_class"] for task in doc["tasks"] for t in task["tests"]} == {"infrastructure"}


def test_validate_runs_every_gold_query_on_the_releases_database(spider_sample: Path, tmp_path: Path) -> None:
    settings = Settings.of(subsets=(), dialect="postgres", data=spider_sample, data_cache=tmp_path / "cache")
    lines, ok = validate_subset(settings, "spider")
    assert ok, lines
    assert lines[1:] == [
        "  gold queries transpiled to PostgreSQL: 22 of 22 with their schema (22 of 22 overall)",
        "  gold queries run: 22 of 22 tried (11 return no rows, e.g. on empty tables); failed: 0",
        NOT_NULL_LINE,
        (
            "  table CRE_DOC_TEMPLATE_MGT.DOCUMENTS has no rows in the data (no 'Documents' entry for this "
            "database in the DML)"
        ),
    ]


def test_oracle_runs_are_told_the_same_adjustments(pytester: pytest.Pytester, spider_sample: Path) -> None:
    """No Oracle here: collection alone builds the Oracle fixtures and reports what they adjust."""
    result = run(pytester, spider_sample, "--plsql-dialect=oracle", "--collect-only", "-q")
    assert result.ret == 0, result.stderr.str()
    result.stdout.fnmatch_lines(
        [
            "spider (oracle, data sha256:*): 22 task(s) in the data",
            "  runnable: 22 (22 with data, 0 on empty tables)",
            NOT_NULL_LINE,
            "  table CRE_DOC_TEMPLATE_MGT.DOCUMENTS has no rows in the data *; 19 task(s) run on it empty: *",
        ]
    )

"""End-to-end runs of the smoke subset whose results, JUnit XML and reports other tests check.

Answers come from a ``conftest.py`` in the run's folder that implements the generation hook:
the reference answer of every task, except for a few wrong answers chosen per task, turn and
sample, so the numbers are not all 100% and do not depend on how many tasks the smoke subset
has. Runs are cached per test process: the shard, report and JUnit tests share one unsharded run.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_plsqlbench.results import RESULTS_VERSION

#: clamp_value passes 'inside' and 'below' but not 'above' nor 'null-arg' (2 of 4).
CLAMP_WRONG = (
    "CREATE OR REPLACE FUNCTION clamp_value(p_value numeric, p_low numeric, p_high numeric) "
    "RETURNS numeric LANGUAGE sql AS 'SELECT GREATEST(p_value, p_low)';"
)
#: Turn 2 of the conversation prints totals with one decimal: both of its tests fail.
CONV_TURN2_WRONG = """CREATE OR REPLACE PROCEDURE report_customer(p_customer_id integer)
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR r IN SELECT o.order_id, o.status, SUM(i.quantity * p.unit_price) AS total
           FROM shop.orders o JOIN shop.order_items i ON i.order_id = o.order_id
           JOIN shop.products p ON p.product_id = i.product_id
           WHERE o.customer_id = p_customer_id GROUP BY o.order_id, o.status ORDER BY o.order_id LOOP
    RAISE NOTICE '% % %', r.order_id, r.status, to_char(r.total, 'FM9999990.0');
  END LOOP;
END;
$$;"""

#: "task/turn/sample" (sample "*" = every sample) -> answer; everything else gets the reference.
WRONG_ANSWERS = {"clamp_value/1/*": CLAMP_WRONG, "customer_report_conversation/2/*": CONV_TURN2_WRONG}

CONFTEST = '''
"""Answers for the test run: references, except the wrong ones in overrides.json."""
import json
from pathlib import Path

import pytest

from pytest_plsqlbench import Answer

OVERRIDES = json.loads((Path(__file__).parent / "overrides.json").read_text())
SKIP = OVERRIDES.pop("__skip__", [])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Skip the tasks named in __skip__, as a loader skips tasks its data cannot run."""
    if item.nodeid.split("/")[1:2] and item.nodeid.split("/")[1] in SKIP:
        pytest.skip("not runnable: skipped by the test")


def pytest_plsql_generate(config, task, turn, history, sample):
    code = OVERRIDES.get(f"{task.id}/{turn}/{sample}", OVERRIDES.get(f"{task.id}/{turn}/*"))
    if code is None:
        code = task.turns[turn - 1].reference
    usage = {"model": "test/overrides", "prompt_tokens": 100, "completion_tokens": 20, "cost_usd": 0.001}
    raw = f"Here is the code:\\n```sql\\n{code}\\n```"  # as a model replies: the code is extracted from it
    return Answer(code=code, raw=raw, source="test-overrides", cache_key=f"{task.id}:{turn}:{sample}", usage=usage)
'''


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLSQL_", "PYTEST_"))}
    env.pop("PLSQLBENCH_SHARED_DATA", None)
    return env


@functools.cache
def smoke_run(*args: str, overrides: str = json.dumps(WRONG_ANSWERS)) -> dict[str, Any]:
    """Run the smoke subset (postgres, -n 2) once per argument list; results, JUnit and output."""
    folder = Path(tempfile.mkdtemp(prefix="plsql-e2e-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # runs are shared until the process ends
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "overrides.json").write_text(overrides)
    results, junit = folder / "r.json", folder / "junit.xml"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--subset",
        "smoke",
        "--plsql-model=reference",
        "--plsql-dialect=postgres",
        "-n",
        "2",
        f"--plsql-results={results}",
        f"--junitxml={junit}",
        "-rN",
        *args,
    ]
    proc = subprocess.run(
        cmd, check=False, cwd=folder, env=_env(), capture_output=True, text=True, timeout=600
    )
    if not results.is_file():
        raise AssertionError(
            f"run {args} wrote no results (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return {
        "folder": folder,
        "results": results,
        "junit": junit,
        "doc": json.loads(results.read_text()),
        "stdout": proc.stdout,
        "returncode": proc.returncode,
    }


def by_task(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["task_id"]: t for t in doc["tasks"]}


# --------------------------------------------------------------------------- the run itself
@pytest.mark.slow
def test_run_scores_the_wrong_answers_and_writes_a_current_document() -> None:
    run = smoke_run()
    doc = run["doc"]
    assert doc["version"] == RESULTS_VERSION
    tasks = by_task(doc)
    assert tasks["clamp_value"]["test_pass"] == pytest.approx(0.5)
    conv = tasks["customer_report_conversation"]
    assert conv["episode_pass"] == 0.0 and conv["turn_suite_pass"] == pytest.approx(2 / 3)
    smoke = doc["subsets"]["smoke"]
    assert 0 < smoke["mean_test_pass"] < 1 and smoke["tasks"] == len(tasks) >= 2
    assert smoke["failure_units"]["wrong_output"] == 2  # clamp_value's turn, the conversation's turn 2
    assert smoke["failure_classes"]["wrong_output"] == 4  # 2 tests each
    assert doc["usage"]["prompt_tokens"] == 100 * sum(t["n_turns"] for t in doc["tasks"])
    assert {a["cache_key"] for a in conv["answers"]} == {
        f"customer_report_conversation:{n}:0" for n in (1, 2, 3)
    }
    # The terminal summary is the document's summary.
    assert "PLSQLBench summary" in run["stdout"] and "95% CI" in run["stdout"]


@pytest.mark.slow
def test_skipped_tasks_are_listed_apart_from_failures_and_exclusions() -> None:
    overrides = {**WRONG_ANSWERS, "__skip__": ["initials"]}
    run = smoke_run("-k", "clamp_value or initials", overrides=json.dumps(overrides))
    smoke = run["doc"]["subsets"]["smoke"]
    assert smoke["skipped_tasks"] == ["initials"] and smoke["excluded_tasks"] == []
    assert smoke["tasks"] == 1 and smoke["mean_test_pass"] == pytest.approx(0.5)
    assert smoke["failure_units"]["infrastructure"] == 0 and smoke["failure_classes"]["infrastructure"] == 0
    assert "smoke: 1 task(s) skipped, not in the metrics: initials" in run["stdout"]


@pytest.mark.slow
def test_a_keyword_that_selects_some_tests_of_a_task_marks_it_incomplete() -> None:
    run = smoke_run("-k", "clamp_value and (inside or above)")
    clamp = by_task(run["doc"])["clamp_value"]
    assert (clamp["n_tests"], clamp["tests_run"], clamp["incomplete"]) == (4, 2, True)
    assert clamp["test_pass"] == pytest.approx(0.5)  # inside passes, above fails: what ran
    assert run["doc"]["subsets"]["smoke"]["incomplete_tasks"] == ["clamp_value"]
    assert "smoke: 1 task(s) ran only part of their tests" in run["stdout"]
    whole = by_task(smoke_run()["doc"])["clamp_value"]
    assert (whole["tests_run"], whole["incomplete"]) == (4, False)


# --------------------------------------------------------------------------- pass@k
@pytest.mark.slow
def test_samples_are_one_task_each_and_give_pass_at_k() -> None:
    overrides = {
        "clamp_value/1/0": CLAMP_WRONG,  # sample 1 of 3 wrong: n=3, c=2
        "customer_report_conversation/2/0": CONV_TURN2_WRONG,  # samples 1 and 2 wrong: n=3, c=1
        "customer_report_conversation/2/1": CONV_TURN2_WRONG,
    }
    run = smoke_run(
        "--plsql-samples=3",
        "--plsql-temperature=0.8",
        "-k",
        "clamp_value or customer_report_conversation",
        overrides=json.dumps(overrides),
    )
    doc = run["doc"]
    smoke = doc["subsets"]["smoke"]
    assert smoke["tasks"] == 2 and smoke["samples"] == 3  # not 6 tasks
    clamp, conv = by_task(doc)["clamp_value"], by_task(doc)["customer_report_conversation"]
    assert (clamp["n_samples"], clamp["n_passing_samples"]) == (3, 2)
    assert clamp["test_pass"] == pytest.approx((0.5 + 1 + 1) / 3)  # Pass@1 = mean over samples
    assert (conv["n_samples"], conv["n_passing_samples"]) == (3, 1)
    assert conv["episode_pass"] == pytest.approx(1 / 3)
    assert len(conv["answers"]) == 9 and {a["sample"] for a in conv["answers"]} == {0, 1, 2}
    # pass@k per task: clamp 2/3, 1, 1; conversation 1/3, 1 - C(2,2)/C(3,2) = 2/3, 1.
    assert smoke["pass_at_k"]["1"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert smoke["pass_at_k"]["2"] == pytest.approx((1 + 2 / 3) / 2)
    assert smoke["pass_at_k"]["3"] == pytest.approx(1.0)
    assert smoke["pass_at_k"]["1"] == pytest.approx(smoke["suite_pass"])
    assert "pass@2" in run["stdout"]


# --------------------------------------------------------------------------- JUnit XML
@pytest.mark.slow
def test_junit_xml_names_testcases_by_node_id_with_properties_and_short_failures() -> None:
    run = smoke_run()
    root = ET.parse(run["junit"]).getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases and all(name.startswith("smoke/") for name in cases)
    above = cases["smoke/clamp_value/above"]
    assert above.get("classname") == "smoke.clamp_value"
    props = {p.get("name"): p.get("value") for p in above.iter("property")}
    assert props == {
        "task_id": "clamp_value",
        "subset": "smoke",
        "turn": "1",
        "dialect": "postgres",
        "model": "reference",
        "failure_class": "wrong_output",
    }
    assert (above.find("failure").get("message") or "").startswith("[wrong_output]")
    totals = cases["smoke/customer_report_conversation/turn-2/totals"]
    assert {p.get("name"): p.get("value") for p in totals.iter("property")}["turn"] == "2"
    message = totals.find("failure").get("message") or ""
    assert "expected '100 SHIPPED 88.90'" in message and "got      '100 SHIPPED 88.9'" in message
    assert len(message.splitlines()) <= 8
    passed = cases["smoke/clamp_value/inside"]
    assert passed.find("failure") is None
    assert {p.get("name"): p.get("value") for p in passed.iter("property")}["failure_class"] == "passed"


@pytest.mark.slow
def test_junit_testsuite_carries_the_metrics_and_counts_that_match_the_summary() -> None:
    run = smoke_run()
    doc = run["doc"]
    suite = ET.parse(run["junit"]).getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    smoke = doc["subsets"]["smoke"]
    assert props["plsql.smoke.mean_test_pass"] == f"{100 * smoke['mean_test_pass']:.2f}"
    assert props["plsql.smoke.suite_pass"] == f"{100 * smoke['suite_pass']:.2f}"
    assert props["plsql.smoke.episode_pass"] == f"{100 * smoke['episode_pass']:.2f}"
    assert props["plsql.smoke.tasks"] == str(smoke["tasks"])
    # One story: JUnit's counts are pytest's, and the summary line says how they relate to the metrics.
    tests, failed = int(suite.get("tests")), int(suite.get("failures")) + int(suite.get("errors"))
    assert props["plsql.items.items"] == str(tests) and props["plsql.items.failed"] == str(failed)
    assert props["plsql.items.skipped"] == suite.get("skipped")
    assert props["plsql.items.judged"] == str(tests - int(suite.get("skipped")))  # nothing left out here
    line = next(x for x in run["stdout"].splitlines() if x.startswith("pytest items: "))
    assert line == (
        f"pytest items: {tests - failed} passed, {failed} failed or errors, 0 skipped; "
        f"the metrics judge {tests} ({tests - failed} passed, {failed} failed)"
    )


@pytest.mark.slow
def test_results_keep_the_answer_text_raw_reply_prompts_and_test_scripts() -> None:
    """A run can be audited from its own file: what was asked, what ran, and each test's input."""
    run = smoke_run()
    tasks = by_task(run["doc"])
    clamp = tasks["clamp_value"]
    (answer,) = clamp["answers"]
    assert answer["code"] == CLAMP_WRONG
    assert answer["raw"] == f"Here is the code:\n```sql\n{CLAMP_WRONG}\n```"
    assert len(clamp["prompts"]) == 1 and "clamp" in clamp["prompts"][0].lower()
    scripts = {t["test_id"]: t.get("script") for t in clamp["tests"]}
    assert set(scripts) == {"inside", "below", "above", "null-arg"} and all("clamp_value(" in s for s in scripts.values())
    conv = tasks["customer_report_conversation"]
    assert len(conv["prompts"]) == 3 and [a["code"] for a in conv["answers"]][1] == CONV_TURN2_WRONG
    assert run["doc"]["header"]["system_prompt"]

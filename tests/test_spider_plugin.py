"""The schema-grounded subsets end to end, run in subprocesses the way users run pytest.

Expected node ids and markers are computed here from the data files themselves, so the
tests follow the sample if it changes and catch a loader that drops or renames anything.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from pytest_plsqlbench.collect import marker_name
from pytest_plsqlbench.settings import Settings
from pytest_plsqlbench.spider import release

from spider_release import write_release

MARKS_CONFTEST = """
import json, os
def pytest_collection_finish(session):
    marks = {i.nodeid: sorted({m.name for m in i.iter_markers()}) for i in session.items}
    with open(os.environ["MARKS_OUT"], "w") as fh:
        json.dump(marks, fh)
"""


NODE = re.compile(r"^spider(2-st|2-mt)?/\S+$")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def expected_nodes(root: Path) -> dict[str, set[str]]:
    """Node id -> the metadata markers each test must carry, from the data files."""
    meta = {**release.metadata_by_id(root, release.META_ST), **release.metadata_by_id(root, release.META_MT)}

    def marks(iid: str) -> set[str]:
        m = meta.get(iid, {})
        out = {f"reasoning_{marker_name(r)}" for r in m.get("reasoning_types", [])}
        if m.get("difficulty"):
            out.add(f"difficulty_{m['difficulty']}")
        return out

    nodes: dict[str, set[str]] = {}
    for rec in release.read_jsonl(root / release.SPIDER2_ST):
        for n in range(1, len(rec.data["tests"]) + 1):
            nodes[f"spider2-st/{rec.data['instance_id']}/test-{n}"] = marks(rec.data["instance_id"])
    conversations: dict[str, list[dict]] = defaultdict(list)
    for rec in release.read_jsonl(root / release.SPIDER2_MT):
        conversations[rec.data["conversation_id"]].append(rec.data)
    for cid, turns in conversations.items():
        union = set().union(*(marks(t["instance_id"]) for t in turns))
        for t in turns:
            for n in range(1, len(t["tests"]) + 1):
                nodes[f"spider2-mt/{cid}/turn-{t['turn_index']}/test-{n}"] = union
    for rec in release.read_jsonl(root / release.SPIDER1):
        nodes[f"spider/{rec.data['instance_id']}/result"] = set()
    return nodes


def test_collect_only_lists_every_sample_test_with_markers(
    pytester: pytest.Pytester, plsqlbench_sample: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(MARKS_CONFTEST)
    out = pytester.path / "marks.json"
    monkeypatch.setenv("MARKS_OUT", str(out))
    result = run(
        pytester,
        "--subset",
        "spider2-st,spider2-mt,spider",
        "--collect-only",
        "-q",
        f"--plsql-data={plsqlbench_sample}",
    )  # no dialect named: Spider2 exists only for Oracle, so the run is Oracle
    assert result.ret == 0, result.stderr.str()
    expected = expected_nodes(plsqlbench_sample)
    listed = [line for line in result.outlines if NODE.match(line)]
    assert sorted(listed) == sorted(expected)
    assert len(listed) == 124  # 62 Spider2-ST tests, 40 Spider2-MT tests (12 turns), 22 Spider tests
    marks = json.loads(out.read_text())
    for node, want in expected.items():
        have = set(marks[node])
        assert want <= have, (node, want - have)
        assert {"plsql", "dialect_oracle"} <= have
        assert ("multiturn" if node.startswith("spider2-mt/") else "singleturn") in have
    # Constructs come from the reference answer when the metadata has none.
    assert "construct_package" in marks["spider2-st/spider2_single_turn_3/test-1"]
    assert "construct_function" in marks["spider2-st/spider2_single_turn_2/test-1"]
    assert "construct_type" in marks["spider2-mt/plsql-multiturn-0002/turn-3/test-1"]
    # Tasks whose schema is absent say so, and the report counts them -- no database was needed.
    assert "not_runnable" in marks["spider/spider_0/result"]
    assert "not_runnable" not in marks["spider2-st/spider2_single_turn_3/test-1"]
    result.stdout.fnmatch_lines(
        [
            "*PLSQLBench data report*",
            "spider2-st (oracle, data sha256:*): 15 task(s) in the data",
            "  runnable: 5 (0 with data, 5 on empty tables)",
            "spider (oracle, data sha256:*): 22 task(s) in the data",
            "  not runnable (22): schema CRE_DOC_TEMPLATE_MGT not in the data (schema/spider/spider_ddl.jsonl)*",
        ]
    )


def test_selection_by_marker_and_keyword(pytester: pytest.Pytester, plsqlbench_sample: Path) -> None:
    common = [
        "--subset",
        "spider2-st,spider2-mt",
        "--collect-only",
        "-q",
        f"--plsql-data={plsqlbench_sample}",
        "--plsql-dialect=oracle",
    ]
    advanced = run(pytester, *common, "-m", "difficulty_advanced")
    meta = {
        **release.metadata_by_id(plsqlbench_sample, release.META_ST),
        **release.metadata_by_id(plsqlbench_sample, release.META_MT),
    }
    want = {n for n, marks in expected_nodes(plsqlbench_sample).items() if "difficulty_advanced" in marks}
    assert want and {line for line in advanced.outlines if NODE.match(line)} == want
    chinook = run(pytester, *common, "-k", "chinook")
    ids = {line.split("/")[1] for line in chinook.outlines if NODE.match(line)}
    st = {
        r.data["instance_id"]
        for r in release.read_jsonl(plsqlbench_sample / release.SPIDER2_ST)
        if r.data["db_id"].lower() == "chinook"
    }
    assert ids == st and meta  # chinook tasks only


def test_spider2_with_postgres_is_one_usage_error(pytester: pytest.Pytester, plsqlbench_sample: Path) -> None:
    result = run(
        pytester,
        "--subset",
        "spider2-mt",
        "--plsql-dialect=postgres",
        "--plsql-model=reference",
        f"--plsql-data={plsqlbench_sample}",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*subset 'spider2-mt' exists only for oracle, not for --plsql-dialect=postgres*"]
    )
    assert "Traceback" not in result.stderr.str()
    # A dialect named in the ini file is named too.
    pytester.makeini("[pytest]\nplsql_dialect = postgres\n")
    result = run(pytester, "--subset", "spider2-mt", "--collect-only", f"--plsql-data={plsqlbench_sample}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*subset 'spider2-mt' exists only for oracle*"])


def test_default_dialect_stays_postgres_when_every_subset_has_it(
    pytester: pytest.Pytester, plsqlbench_sample: Path
) -> None:
    result = run(pytester, "--subset", "smoke,spider", "--collect-only", "-q", "-m", "dialect_postgres",
                 f"--plsql-data={plsqlbench_sample}")
    assert result.ret == 0, result.stderr.str()
    listed = [line for line in result.outlines if re.match(r"^(smoke|spider)/\S+$", line)]
    assert any(n.startswith("smoke/") for n in listed) and any(n.startswith("spider/") for n in listed)


def test_sample_spider_on_postgres_reports_what_cannot_run(
    pytester: pytest.Pytester, plsqlbench_sample: Path
) -> None:
    result = run(
        pytester,
        "--subset",
        "spider",
        "--plsql-dialect=postgres",
        "--plsql-model=reference",
        f"--plsql-data={plsqlbench_sample}",
        "-rs",
    )
    result.assert_outcomes(skipped=22)
    result.stdout.fnmatch_lines(
        [
            "*not runnable (22): schema CRE_DOC_TEMPLATE_MGT not in the data*",
            "*data without DDL (not loadable, 11 table(s))*",
            "*gold SQL transpiled to PostgreSQL: 22 of 22",
            "*published references translated to PL/pgSQL: 22 of 22",
            "SKIPPED [[]22] *not runnable: schema CRE_DOC_TEMPLATE_MGT not in the data*",
        ]
    )


@pytest.fixture
def spider_release(tmp_path: Path, plsqlbench_sample: Path) -> Path:
    return write_release(plsqlbench_sample, tmp_path / "release")


@pytest.mark.parametrize("workers", ["0", "2"])
def test_published_references_on_postgres(
    pytester: pytest.Pytester, spider_release: Path, workers: str
) -> None:
    """The sample's 22 tasks and references, on our own small copy of their database."""
    results = pytester.path / "results.json"
    result = run(
        pytester,
        "--subset",
        "spider",
        "--plsql-dialect=postgres",
        "--plsql-model=reference",
        f"--plsql-data={spider_release}",
        "-n",
        workers,
        "--plsql-results",
        str(results),
    )
    result.assert_outcomes(passed=15, failed=7)
    result.stdout.fnmatch_lines(
        [
            "  runnable: 22 (22 with data, 0 on empty tables); ran: 22 (22 with data, 0 on empty tables)",
            "  published references run: 22; pass the strict comparator: 15; fail it merely on formatting "
            "(lenient pass): 7 [label 4, one-line 2, whitespace 1]; fail both: 0; not evaluated: 0",
        ]
    )
    report = json.loads(results.read_text())["spider_report"]["spider"]
    assert report["references"]["lenient_tasks"] == [  # in id order
        "spider_5", "spider_8", "spider_9", "spider_11", "spider_17", "spider_19", "spider_20"
    ]
    assert report["references_translated"] == 22 and report["gold_transpiled"] == 22


def test_empty_tables_are_reported(
    pytester: pytest.Pytester, tmp_path: Path, plsqlbench_sample: Path
) -> None:
    root = write_release(plsqlbench_sample, tmp_path / "empty", with_rows=False)
    result = run(
        pytester,
        "--subset",
        "spider",
        "--plsql-dialect=postgres",
        "--plsql-model=reference",
        f"--plsql-data={root}",
    )
    result.stdout.fnmatch_lines(
        ["  runnable: 22 (0 with data, 22 on empty tables); ran: 22 (0 with data, 22 on empty tables)"]
    )


def test_validate_subset(spider_release: Path, plsqlbench_sample: Path) -> None:
    from pytest_plsqlbench.spider.validate import validate_subset

    lines, ok = validate_subset(Settings.of(subsets=(), dialect="postgres", data=spider_release), "spider")
    assert ok
    assert lines[1:] == [
        "  gold queries transpiled to PostgreSQL: 22 of 22 with their schema (22 of 22 overall)",
        "  gold queries run: 22 of 22 tried (0 return no rows); failed: 0",
    ]
    lines, ok = validate_subset(Settings.of(subsets=(), dialect="postgres", data=plsqlbench_sample), "spider")
    assert ok and "22 without their schema in the data" in lines[0]

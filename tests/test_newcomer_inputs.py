"""What a newcomer trips over with real data files: each is one clear line, never a traceback,
a silent double count or a stray file.

Found by running the README on the shared data the way a new user would: a results path that is
a folder, a source file concatenated with itself, the gzipped MBPP+ file evalplus publishes, a
BOM, a results file kept gzipped, a source named by its subset's name.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pytest_plsqlbench.cli import main

HEAD = 3  # MBPP+ tasks: converting them takes seconds


@pytest.fixture
def head(pytester: pytest.Pytester, mbppplus_file: Path) -> list[str]:
    return mbppplus_file.read_text(encoding="utf-8").splitlines()[:HEAD]


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--plsql-model=reference", f"--plsql-data-cache={pytester.path / 'cache'}", *args
    )


def test_a_results_path_that_is_a_folder_is_a_usage_error_and_leaves_no_file(pytester: pytest.Pytester) -> None:
    folder = pytester.path / "out"
    folder.mkdir()
    result = _run(pytester, "--subset", "smoke", f"--plsql-results={folder}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--plsql-results: {folder} is a folder*results.json*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert sorted(p.name for p in pytester.path.iterdir() if p.name.startswith(".")) == []
    assert list(folder.iterdir()) == []


def test_a_task_twice_in_the_source_is_a_usage_error(pytester: pytest.Pytester, head: list[str]) -> None:
    doubled = pytester.path / "doubled.jsonl"
    doubled.write_text("\n".join(head + head) + "\n", encoding="utf-8")
    result = _run(pytester, "--subset", "mbpp-plus", f"--plsql-source=mbppplus={doubled}", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*subset 'mbpp-plus': the data holds 3 task id(s) more than once (Mbpp/*"])
    assert "Traceback" not in result.stderr.str()


def test_gzipped_and_bom_sources_convert_like_the_plain_file(pytester: pytest.Pytester, head: list[str]) -> None:
    text = "\n".join(head) + "\n"
    plain = pytester.path / "plain.jsonl"
    plain.write_text(text, encoding="utf-8")
    zipped = pytester.path / "MbppPlus.jsonl.gz"
    zipped.write_bytes(gzip.compress(text.encode("utf-8")))
    bom = pytester.path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"))
    collected = {}
    for name, path in (("plain", plain), ("gz", zipped), ("bom", bom)):
        result = _run(pytester, "--subset", "mbpp-plus", f"--plsql-source=mbppplus={path}", "--collect-only", "-q")
        assert result.ret == 0, result.stderr.str()
        collected[name] = sorted(line for line in result.outlines if line.startswith("mbpp-plus/"))
    assert len(collected["plain"]) > 3 * 10
    assert collected["gz"] == collected["plain"] == collected["bom"]


def test_a_source_named_by_its_subset_is_a_usage_error_with_the_right_name(
    pytester: pytest.Pytester, mbppplus_file: Path
) -> None:
    result = _run(pytester, "--subset", "mbpp-plus", f"--plsql-source=mbpp-plus={mbppplus_file}", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no subset's manifest has a data source named 'mbpp-plus' (did you mean 'mbppplus'?)*"])


def test_a_misspelt_source_variable_is_warned_about(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLSQLBENCH_SOURCE_mbppplus", "/nowhere.jsonl")
    result = _run(pytester, "--subset", "smoke", "--collect-only", "-q")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*PLSQLBENCH_SOURCE_mbppplus names no data source*PLSQLBENCH_SOURCE_MBPPPLUS*"])


def test_reports_read_a_gzipped_results_file_and_refuse_binary_junk_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = {"format": "pytest-plsqlbench/results", "version": 1, "header": {}, "subsets": {}, "tasks": []}
    zipped = tmp_path / "old.json.gz"
    zipped.write_bytes(gzip.compress(json.dumps(doc).encode()))
    # Read through gzip: the file's own problem (its version) is what is reported.
    assert main(["report", str(zipped)]) == 2
    assert "results file is older (version 1)" in capsys.readouterr().err
    junk = tmp_path / "junk.json"
    junk.write_bytes(b"\xff\xfe\x00binary")
    assert main(["report", str(junk)]) == 2
    err = capsys.readouterr().err
    assert "not a results file" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_spider_schemas_without_their_rows_are_refused(pytester: pytest.Pytester, shared_data: Path) -> None:
    """Run on empty tables, an answer that prints nothing would match every empty gold result."""
    import shutil

    copy = pytester.path / "release"
    shutil.copytree(shared_data / "plsqlbench-spider-sample", copy, ignore=shutil.ignore_patterns("spider_dml*"))
    result = _run(pytester, "--subset", "spider", f"--plsql-data={copy}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*spider_ddl.jsonl is there but schema/spider/spider_dml.json*is missing*"])
    assert "Traceback" not in result.stderr.str()


def test_empty_answers_and_source_files_say_so(pytester: pytest.Pytester) -> None:
    empty = pytester.path / "empty.jsonl"
    empty.write_text("")
    answers = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--subset", "smoke", f"--plsql-answers={empty}")
    assert answers.ret == pytest.ExitCode.USAGE_ERROR
    answers.stderr.fnmatch_lines([f"*--plsql-answers: {empty} holds no answers (an empty file?)*"])
    source = _run(pytester, "--subset", "mbpp-plus", f"--plsql-source=mbppplus={empty}", "--collect-only")
    assert source.ret == pytest.ExitCode.USAGE_ERROR
    source.stderr.fnmatch_lines([f"*{empty}: no records (an empty file?)*"])


def test_a_misspelt_reference_model_is_suggested(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--subset", "smoke", "--plsql-model=referense")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*Did you mean reference*"])


def test_relative_paths_in_the_ini_file_are_relative_to_it(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    pytester.makeini("[pytest]\nplsql_results = out/results.json\nplsql_cache = answers-cache\n")
    sub = pytester.path / "sub"
    sub.mkdir()
    monkeypatch.chdir(sub)
    result = pytester.run(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--subset", "smoke",
                          "--plsql-model=reference", "-q", "-k", "initials")
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert (pytester.path / "out" / "results.json").is_file()
    assert not (sub / "out").exists()


def test_data_given_at_the_wrong_level_or_to_the_wrong_subset_names_the_fix(
    pytester: pytest.Pytester, shared_data: Path, mbppplus_file: Path, mbpp_sanitized_file: Path
) -> None:
    parent = pytester.path / "downloads"
    parent.mkdir()
    (parent / "plsqlbench").symlink_to(shared_data / "plsqlbench-sample")
    cases = [
        (("--subset", "mbpp", f"--plsql-data={parent}"), f"*the release root looks like {parent / 'plsqlbench'}*"),
        (("--subset", "mbpp", f"--plsql-data={shared_data / 'plsqlbench-sample' / 'datasets'}"),
         f"*the release root looks like {shared_data / 'plsqlbench-sample'}*"),
        (("--subset", "mbpp", f"--plsql-data={mbppplus_file}"), "*this looks like MBPP+ (evalplus)*--subset mbpp-plus*"),
        (("--subset", "mbpp-plus", f"--plsql-source=mbppplus={mbpp_sanitized_file}"),
         "*this looks like sanitized MBPP*--subset mbpp-sanitized*"),
    ]
    for args, line in cases:
        result = _run(pytester, *args, "--collect-only")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, args
        result.stderr.fnmatch_lines([line])
        assert "Traceback" not in result.stderr.str()

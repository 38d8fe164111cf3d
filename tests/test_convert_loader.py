"""The MBPP subset loader: manifests, resolution, conversion on first use, the disk cache."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from pytest_plsqlbench.errors import UsageError
from pytest_plsqlbench.loaders import mbpp as loader
from pytest_plsqlbench.manifests import discover
from pytest_plsqlbench.settings import Settings


def _plus_file(tmp_path: Path, n: int = 2) -> Path:
    rows = [
        {
            "task_id": f"Mbpp/{900 + i}",
            "prompt": f'"""\nWrite a function that adds {i}.\n"""',
            "entry_point": f"add_{i}",
            "canonical_solution": f"def add_{i}(x):\n    return x + {i}\n",
            "base_input": [[1], [2]],
            "plus_input": [[3.5], [True]],
            "atol": 0,
            "assertion": f"assert add_{i}(1) == {1 + i}\n",
        }
        for i in range(1, n + 1)
    ]
    path = tmp_path / "MbppPlus.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _settings(tmp_path: Path, **kw) -> Settings:
    return Settings.of(subsets=("mbpp-plus",), data_cache=tmp_path / "cache", **kw)


def test_manifests_name_loaders_sources_and_paper_metrics():
    found = discover()
    assert found["mbpp"].loader == "plsqlbench-mbpp"
    assert found["mbpp"].source.kind == "plsqlbench"
    assert found["mbpp"].source.url.startswith(
        "https://codeload.github.com/oracle-samples/plsqlbench/tar.gz/"
    )
    plus = found["mbpp-plus"]
    assert plus.loader == "mbpp-plus" and plus.source.name == "mbppplus"
    assert (
        plus.source.url
        == "https://github.com/evalplus/mbppplus_release/releases/download/v0.2.0/MbppPlus.jsonl.gz"
    )
    assert plus.source.sha256 and plus.source.file == "MbppPlus.jsonl"
    san = found["mbpp-sanitized"]
    assert san.loader == "mbpp-sanitized" and san.source.name == "mbpp-sanitized"
    assert san.source.url.endswith("/mbpp/sanitized-mbpp.json")
    for name in ("mbpp", "mbpp-plus", "mbpp-sanitized"):
        assert set(found[name].dialects) == {"postgres", "oracle"}
    assert (
        found["mbpp"].paper["comparable_metric"]
        == found["mbpp-plus"].paper["comparable_metric"]
        == "suite_pass"
    )


def test_other_loaders_are_not_ours():
    manifest = discover()["smoke"]
    assert (
        loader.pytest_plsql_load_subset(config=None, manifest=manifest, settings=Settings.of(subsets=())) is None
    )


def test_converts_on_first_use_then_reads_the_cache(tmp_path, monkeypatch):
    src = _plus_file(tmp_path)
    manifest = discover()["mbpp-plus"]
    settings = _settings(tmp_path, sources={"mbppplus": src})
    tasks = loader.pytest_plsql_load_subset(config=None, manifest=manifest, settings=settings)
    assert [t.id for t in tasks] == ["Mbpp/901", "Mbpp/902"]
    assert all(t.subset == "mbpp-plus" and t.dialect == "postgres" for t in tasks)
    assert [u.id for u in tasks[0].turns[0].tests] == ["base-001", "base-002", "plus-001", "plus-002"]
    cache = tmp_path / "cache" / "converted"
    # The conversion wrote what the run asked for (dialect, assertion mode) with its summary, and
    # the canonical solutions' results.
    assert len(list(cache.glob("*postgres-null-safe*.jsonl"))) == 1
    assert len(list(cache.glob("*.summary.json"))) == 1 and len(list(cache.glob("*.calls.jsonl"))) == 1
    summary = json.loads(next(cache.glob("*postgres-null-safe*.summary.json")).read_text())
    assert summary["summary"][0] == "converted 2 of 2"

    from pytest_plsqlbench.convert import pipeline, sandbox

    def no_solution(*a, **k):
        raise AssertionError("ran a canonical solution again instead of reading its kept result")

    # Another dialect converts again, from the kept results: no solution runs.
    monkeypatch.setattr(sandbox, "_run_pooled", no_solution)
    oracle = loader.pytest_plsql_load_subset(
        config=None,
        manifest=manifest,
        settings=_settings(tmp_path, sources={"mbppplus": src}, dialect="oracle"),
    )
    assert [t.dialect for t in oracle] == ["oracle", "oracle"]
    assert [u.id for u in oracle[0].turns[0].tests] == ["base-001", "base-002", "plus-001", "plus-002"]
    assert len(list(cache.glob("*oracle-null-safe*.jsonl"))) == 1

    def boom(*a, **k):
        raise AssertionError("converted again instead of reading the cache")

    monkeypatch.setattr(pipeline, "type_source", boom)
    again = loader.pytest_plsql_load_subset(config=None, manifest=manifest, settings=settings)
    assert again == tasks
    oracle_again = loader.pytest_plsql_load_subset(
        config=None,
        manifest=manifest,
        settings=_settings(tmp_path, sources={"mbppplus": src}, dialect="oracle"),
    )
    assert oracle_again == oracle
    # A different input is a different key: it converts (and here, fails loudly).
    src.write_text(src.read_text().replace("adds 1", "adds one"))
    with pytest.raises(AssertionError, match="converted again"):
        loader.pytest_plsql_load_subset(config=None, manifest=manifest, settings=settings)


def _constant_file(tmp_path: Path) -> Path:
    """Two tasks: one whose every case returns True (a constant passes it), one that is not."""
    rows = [
        {
            "task_id": "Mbpp/901",
            "prompt": '"""\nIs it a number?\n"""',
            "entry_point": "is_num",
            "canonical_solution": "def is_num(x):\n    return isinstance(x, (int, float))\n",
            "base_input": [[1], [2.5]],
            "plus_input": [[3], ["a"]],
            "atol": 0,
            "assertion": "assert is_num(1) == True\n",
        },
        {
            "task_id": "Mbpp/902",
            "prompt": '"""\nDouble it.\n"""',
            "entry_point": "double",
            "canonical_solution": "def double(x):\n    return 2 * x\n",
            "base_input": [[1], [2]],
            "plus_input": [],
            "atol": 0,
            "assertion": "assert double(1) == 2\n",
        },
    ]
    path = tmp_path / "MbppPlus.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_tasks_a_constant_passes_are_left_out_unless_kept(tmp_path):
    src = _constant_file(tmp_path)
    kw = {"subset": "mbpp-plus", "assertions": "null-safe", "cache_dir": tmp_path / "c"}
    tasks = loader.load_converted("mbpp-plus", src, "postgres", **kw)
    assert [t.id for t in tasks] == ["Mbpp/902"]
    kept = loader.load_converted("mbpp-plus", src, "postgres", keep_left_out=True, **kw)
    assert [t.id for t in kept] == ["Mbpp/901", "Mbpp/902"]
    assert kept[0].metadata["left_out"] == "constant-passable"
    assert kept[0].metadata["constant_answer"] == "True"
    # The string case is dropped (type-mismatch): the kept ones all expect True, the dropped one False.
    assert "1 dropped case(s) expect something else" in kept[0].metadata["left_out_detail"]
    summary = json.loads(next((tmp_path / "c").glob("*postgres-null-safe*.summary.json")).read_text())
    assert summary["summary"][0] == "converted 1 of 2"
    assert summary["left_out"][0]["task_id"] == "Mbpp/901"
    assert summary["cases_kept"] == {"Mbpp/901": [3, 4], "Mbpp/902": [2, 2]}


def test_concurrent_workers_convert_once(tmp_path, monkeypatch):
    src = _plus_file(tmp_path, n=1)
    from pytest_plsqlbench.convert import pipeline

    real = pipeline.type_source
    calls = []

    def counting(*a, **k):
        calls.append(1)
        time.sleep(0.5)  # let the other worker reach the lock
        return real(*a, **k)

    monkeypatch.setattr(pipeline, "type_source", counting)
    results: list[list] = []

    def worker() -> None:
        results.append(
            loader.load_converted(
                "mbpp-plus",
                src,
                "postgres",
                subset="mbpp-plus",
                assertions="null-safe",
                cache_dir=tmp_path / "c",
            )
        )

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(results) == 3 and results[0] == results[1] == results[2]
    assert len(calls) == 1  # MBPP+ typing is shared by both assertion modes and all workers


def test_plsqlbench_release_root_is_resolved_to_its_mbpp_file(tmp_path, plsqlbench_sample):
    manifest = discover()["mbpp"]
    settings = Settings.of(subsets=("mbpp",), data=plsqlbench_sample, data_cache=tmp_path)
    assert (
        loader.input_file(manifest, settings) == plsqlbench_sample / "datasets" / "mbpp" / "mbpp_plsql.jsonl"
    )
    tasks = loader.pytest_plsql_load_subset(config=None, manifest=manifest, settings=settings)
    assert len(tasks) == 28 and tasks[0].id == "MBPP/1"
    with pytest.raises(UsageError):
        loader.input_file(
            manifest, Settings.of(subsets=("mbpp",), data=tmp_path / "missing", data_cache=tmp_path)
        )


def test_cache_key_covers_converter_code_and_version():
    name = loader.cache_name("mbpp-plus", "ab" * 32, "postgres", "published", "mbpp-plus")
    assert loader.code_fingerprint() in name
    assert "postgres-published" in name and "abababababababab" in name

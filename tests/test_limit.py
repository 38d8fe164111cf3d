"""``--plsql-limit N`` (ini ``plsql_limit``, env ``PLSQL_LIMIT``): a seeded sample of N tasks per
subset, the same for the same ``--plsql-seed``, whatever order the loader gives the tasks in."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_plsqlbench.errors import UsageError
from pytest_plsqlbench.plugin import sample_tasks
from pytest_plsqlbench.settings import parse_limit
from pytest_plsqlbench.tasks import Task, Turn, UnitTest


def tasks(n: int, subset: str = "s") -> list[Task]:
    return [
        Task(id=f"t{i}", subset=subset, dialect="postgres",
             turns=(Turn(1, "p\n", (UnitTest(id="a", kind="assert", script="SELECT 1"),), None),))
        for i in range(n)
    ]


def ids(ts: list[Task]) -> list[str]:
    return [t.id for t in ts]


@pytest.mark.parametrize(("text", "want"), [("5", 5), (" 12 ", 12), ("0.25", 0.25), ("1", 1), (None, None), ("", None)])
def test_parse_limit(text: str | None, want: object) -> None:
    assert parse_limit(text) == want


@pytest.mark.parametrize("text", ["0", "-3", "1.5", "abc", "nan", "inf"])
def test_parse_limit_refuses_nonsense_with_one_message(text: str) -> None:
    with pytest.raises(UsageError, match="--plsql-limit: expected a number of tasks"):
        parse_limit(text)


def test_sample_is_seeded_sized_and_keeps_order() -> None:
    every = tasks(40)
    a = sample_tasks(every, 7, 1234, "s")
    assert len(a) == 7 and len(set(ids(a))) == 7
    assert ids(a) == [t for t in ids(every) if t in ids(a)]  # the loader's order
    assert ids(sample_tasks(every, 7, 1234, "s")) == ids(a)  # deterministic
    assert ids(sample_tasks(list(reversed(every)), 7, 1234, "s")) == list(reversed(ids(a)))  # order-independent
    assert {ids(sample_tasks(every, 7, seed, "s"))[0] for seed in range(20)} != {ids(a)[0]}  # the seed matters
    assert ids(sample_tasks(every, 7, 1234, "other")) != ids(a)  # per subset
    assert ids(sample_tasks(every, 100, 1234, "s")) == ids(every)  # fewer than N: all
    assert len(sample_tasks(every, 0.1, 1234, "s")) == 4 and len(sample_tasks(tasks(3), 0.01, 1, "s")) == 1


def collected_tasks(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Task ids per subset that a --collect-only run of smoke and MBPP lists."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", "--subset", "smoke",
         "--plsql-model=reference", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PLSQL_")}, **(env or {})},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out: dict[str, set[str]] = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^(?:\S*::)?([\w.-]+)/([^/\s]+)/", line)
        if m:
            out.setdefault(m.group(1), set()).add(m.group(2))
    return out


def test_limit_by_option_ini_and_environment(tmp_path: Path) -> None:
    every = collected_tasks(tmp_path)["smoke"]
    assert len(every) > 5
    three = collected_tasks(tmp_path, "--plsql-limit=3")["smoke"]
    assert len(three) == 3 and three < every
    assert collected_tasks(tmp_path, "--plsql-limit=3", "--plsql-seed=1234")["smoke"] == three  # the default seed
    others = [collected_tasks(tmp_path, "--plsql-limit=3", f"--plsql-seed={s}")["smoke"] for s in (1, 2, 3)]
    assert any(o != three for o in others)
    assert collected_tasks(tmp_path, env={"PLSQL_LIMIT": "3"})["smoke"] == three
    (tmp_path / "pytest.ini").write_text("[pytest]\nplsql_limit = 3\nplsql_seed = 1\n")
    assert collected_tasks(tmp_path)["smoke"] == others[0]
    assert len(collected_tasks(tmp_path, "--plsql-limit=4")["smoke"]) == 4  # the command line wins


def test_bad_limit_is_one_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", "--subset", "smoke",
         "--plsql-model=reference", "--plsql-limit=many"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "--plsql-limit: expected a number of tasks" in text and "Traceback" not in text


@pytest.mark.slow
def test_results_header_says_the_run_is_a_sample(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--subset", "smoke", "--plsql-model=reference",
         "--plsql-limit=2", "--plsql-seed=7", f"--plsql-results={out}", "-n", "0"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    doc = json.loads(out.read_text())
    assert doc["header"]["limit"] == 2 and doc["header"]["seed"] == 7
    assert doc["subsets"]["smoke"]["tasks"] == 2
    assert "sample of 2 task(s) per subset (seed 7)" in proc.stdout

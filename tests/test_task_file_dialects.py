"""A task's per-dialect values need a version only for the dialects its manifest names: a
postgres-only subset (``dialects: [postgres]``) with ``reference: {postgres: ...}`` loads
(issue 29, point 7); a subset naming both still needs both, with one error naming file and field."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_plsqlbench.errors import UsageError
from pytest_plsqlbench.loaders.yaml_tasks import load
from pytest_plsqlbench.manifests import load_manifest
from pytest_plsqlbench.settings import Settings

TASK = """
    id: add_one
    entry_points: {postgres: [add_one]}
    prompt: {postgres: Write add_one(n integer) returning n + 1.}
    reference: {postgres: "CREATE FUNCTION add_one(n integer) RETURNS integer LANGUAGE sql AS 'SELECT n + 1';"}
    tests:
      - id: two
        kind: output
        script: {postgres: SELECT add_one(1)}
        expected: {postgres: ['2']}
"""


def subset(tmp_path: Path, dialects: str) -> Path:
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "add_one.yaml").write_text(textwrap.dedent(TASK))
    manifest = tmp_path / "own.yaml"
    manifest.write_text(f"name: own\nloader: yaml\ndialects: {dialects}\noptions:\n  dir: own\n")
    return manifest


def test_a_postgres_only_subset_needs_no_oracle_version(tmp_path: Path) -> None:
    (task,) = load(load_manifest(subset(tmp_path, "[postgres]")), Settings.of(subsets=("own",), dialect="postgres"))
    assert task.turns[0].reference.startswith("CREATE FUNCTION add_one")
    assert task.entry_points == ("add_one",)
    assert task.turns[0].tests[0].script == "SELECT add_one(1)" and task.turns[0].tests[0].expected == ("2",)


@pytest.mark.parametrize("dialects", ["[postgres, oracle]", "[oracle, postgres]"])
def test_a_subset_of_both_dialects_still_needs_both(tmp_path: Path, dialects: str) -> None:
    with pytest.raises(UsageError, match=r"add_one\.yaml.*: missing the oracle version"):
        load(load_manifest(subset(tmp_path, dialects)), Settings.of(subsets=("own",), dialect="postgres"))

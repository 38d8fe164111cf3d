"""The ``plsqlbench`` command: subcommands answer with one clear line on bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def plsqlbench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_plsqlbench.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


def test_subsets_lists_every_manifest() -> None:
    out = plsqlbench("subsets")
    assert out.returncode == 0
    names = {line.split()[0] for line in out.stdout.splitlines() if not line.startswith(" ")}
    assert {"smoke", "mbpp", "mbpp-plus", "mbpp-sanitized", "spider", "spider2-st", "spider2-mt"} <= names
    # Descriptions in full, wrapped, never cut.
    assert "…" not in out.stdout
    assert "it is not a benchmark of models." in " ".join(out.stdout.split())
    # Each subset's family, then what the plug-ins registered.
    assert "smoke  [postgres,oracle]  family plsqlbench" in out.stdout
    assert "families: plsqlbench, procarena" in out.stdout and "dialects: oracle, postgres" in out.stdout


def test_validate_without_input_is_one_line_usage_error() -> None:
    out = plsqlbench("validate")
    assert out.returncode == 2
    assert out.stderr.strip() == "plsqlbench: error: plsqlbench validate needs FILE (from plsqlbench convert) or --subset NAME"


def test_validate_spider_reports_gold_queries(plsqlbench_sample: Path) -> None:
    out = plsqlbench("validate", "--subset", "spider", f"--plsql-data={plsqlbench_sample}")
    assert out.returncode == 0, out.stderr
    assert "spider (postgres" in out.stdout
    assert "gold queries transpiled to PostgreSQL" in out.stdout


def test_validate_takes_oracle_for_an_oracle_only_subset_unless_told_otherwise(plsqlbench_sample: Path) -> None:
    out = plsqlbench("validate", "--subset", "spider2-st", f"--plsql-data={plsqlbench_sample}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("spider2-st (oracle, data ")
    out = plsqlbench("validate", "--subset", "spider2-st", "--plsql-dialect=postgres", f"--plsql-data={plsqlbench_sample}")
    assert out.returncode == 2
    assert "subset 'spider2-st' exists only for oracle, not for --plsql-dialect=postgres" in out.stderr


def test_validate_unknown_subset_names_the_known_ones(plsqlbench_sample: Path) -> None:
    out = plsqlbench("validate", "--subset", "nope", f"--plsql-data={plsqlbench_sample}")
    assert out.returncode == 2
    assert "unknown subset 'nope'" in out.stderr and "spider" in out.stderr
    assert "Traceback" not in out.stderr

"""The README stays true: every option, every subset and the test command are documented."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pytest_plsqlbench.manifests import discover
from pytest_plsqlbench.settings import OPTIONS

README = Path(__file__).resolve().parent.parent / "README.md"
CI = Path(__file__).resolve().parent.parent / ".ci" / "run"


@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text(encoding="utf-8")


@pytest.mark.parametrize("option", ["--subset", *("--plsql-" + o.name for o in OPTIONS)])
def test_every_option_is_documented(readme: str, option: str) -> None:
    assert re.search(rf"`{re.escape(option)}[ =`]", readme), f"{option} is not documented in README.md"


@pytest.mark.parametrize("subset", sorted(discover()))
def test_every_subset_is_documented(readme: str, subset: str) -> None:
    assert f"`{subset}`" in readme, f"subset {subset} is not documented in README.md"


def test_ci_runs_the_readme_test_command(readme: str) -> None:
    match = re.search(r"<!-- test-command -->\s*```(?:bash|sh)?\n(.+?)\n```", readme, re.S)
    assert match, "README.md marks its test command with <!-- test-command -->"
    command = match.group(1).strip().splitlines()[-1]
    ci_lines = [line.strip() for line in CI.read_text().splitlines()]
    assert command in ci_lines, f"CI does not run the README's test command {command!r}"


def test_quick_start_is_install_then_smoke_run(readme: str) -> None:
    match = re.search(r"<!-- quick-start -->\s*```(?:bash|sh)?\n(.+?)\n```", readme, re.S)
    assert match, "README.md marks its quick start with <!-- quick-start -->"
    commands = [line for line in match.group(1).splitlines() if line.strip() and not line.lstrip().startswith("#")]
    install, run = shlex.split(commands[0]), shlex.split(commands[1].split("#")[0])
    assert install[:3] == ["pip", "install", "."]
    assert run[:2] == ["pytest", "--subset"]
    # CI runs the quick start literally: a non-editable install of the checkout, then the same
    # pytest arguments (in an empty folder) -- not merely some "pip install" somewhere.
    ci_lines = [line.strip() for line in CI.read_text().splitlines()]
    assert any(re.fullmatch(r'"\$QS/venv/bin/pip" install (-q )?"\$ROOT"', line) for line in ci_lines), ci_lines
    ci_runs = [shlex.split(re.sub(r'^.*"\$QS/venv/bin/pytest"', "pytest", line).rstrip(")")) for line in ci_lines
               if '"$QS/venv/bin/pytest"' in line]
    assert ci_runs, "CI does not run the quick start's pytest command"
    assert ci_runs[0][: len(run)] == run, (ci_runs[0], run)


def test_security_model_section_exists(readme: str) -> None:
    assert re.search(r"^## Security model", readme, re.M)

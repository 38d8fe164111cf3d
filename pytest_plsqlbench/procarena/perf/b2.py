"""pytest wiring of B2: the ``--plsql-b2-repeats`` option, the ``procarena-b2`` judge, and the
progress a long ``perf`` item shows on pytest's progress line."""

from __future__ import annotations

import pytest

HELP_REPEATS = ("ProcArena B2: timed runs per contender (gold, degraded input, candidate), in rotating "
                "order; default: the task's own b2.repeats (5)")


def _positive(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("plsqlbench")
    group.addoption("--plsql-b2-repeats", dest="plsql_b2_repeats", type=_positive, default=None, help=HELP_REPEATS)
    parser.addini("plsql_b2_repeats", HELP_REPEATS, default=None)


def repeats_of(config: pytest.Config) -> int | None:
    value = config.getoption("plsql_b2_repeats", None)
    if value is None:
        ini = config.getini("plsql_b2_repeats")
        if ini:
            try:
                value = _positive(str(ini))
            except Exception as exc:  # noqa: BLE001
                raise pytest.UsageError(f"ini plsql_b2_repeats: {exc}") from None
    return value


def pytest_plsql_judges(config: pytest.Config) -> list:
    from .judge import PerfJudge

    return [PerfJudge(repeats=repeats_of(config))]



def pytest_configure(config: pytest.Config) -> None:
    from . import progress

    progress.CONFIGS.append(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    from . import progress

    if config in progress.CONFIGS:
        progress.CONFIGS.remove(config)

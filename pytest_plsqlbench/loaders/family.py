"""The PLSQLBench family's plug-in (entry point ``plsqlbench-family``): its metric family and its
``plsqlbench convert``/``validate`` subcommands. Its loaders are plug-ins of their own."""

from __future__ import annotations

import argparse

import pytest

from ..families import MetricFamily, PlsqlBenchFamily


@pytest.hookimpl(trylast=True)
def pytest_plsql_families() -> list[MetricFamily]:
    return [PlsqlBenchFamily()]


@pytest.hookimpl(trylast=True)
def pytest_plsql_cli(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ..convert.cli import register  # noqa: PLC0415 - the converter's imports are for the command only

    register(subparsers)

"""The PLSQLBench family's plug-in (entry point ``plsqlbench-family``): its metric family and its
``plsqlbench convert``/``validate`` subcommands. Its loaders are plug-ins of their own."""

from __future__ import annotations

import argparse

import pytest

from ..families import CoreFamily, Leaderboard
from . import mbpp, plsqlbench, yaml_tasks


class PlsqlBenchFamily(CoreFamily):
    """PLSQLBench App. C: the core's figures (Mean Test, Suite, Turn Suite and Episode Pass@1,
    pass@k, bootstrap CIs), its loaders, its release download and its leaderboard datasets."""

    name = "plsqlbench"
    paper_dialect = ("oracle", "Oracle PL/SQL")
    loaders = frozenset({yaml_tasks.LOADER, *mbpp.LOADERS, *plsqlbench.LOADERS})
    #: The manifests' ``kind: plsqlbench``: the release root given with ``--plsql-data``.
    sources = {"plsqlbench": "release"}
    #: The plsqlbench.github.io datasets (Table 2 of the paper; the site's data/leaderboard.json).
    leaderboard = Leaderboard(
        splits={
            "dev": ("mbpp", "spider", "spider2_st_dev", "spider2_mt_dev"),
            "test": ("mbpp_plus", "spider2_st_test", "spider2_mt_test"),
        },
        published_assertions=("mbpp", "mbpp_plus"),
        assertions_reason="the paper's MBPP figures run the published assertion blocks",
        notes={
            "mbpp_plus": "mbpp_plus is pytest-plsqlbench's rebuild of MBPP+-PLSQL from evalplus MBPP+, not the "
            "authors' withheld set (task and test counts differ)",
        },
    )


@pytest.hookimpl(trylast=True)
def pytest_plsql_families() -> list[PlsqlBenchFamily]:
    return [PlsqlBenchFamily()]


@pytest.hookimpl(trylast=True)
def pytest_plsql_cli(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ..convert.cli import register  # noqa: PLC0415 - the converter's imports are for the command only

    register(subparsers)

"""Loader of the schema-grounded PLSQLBench subsets: ``spider``, ``spider2-st``, ``spider2-mt``.

The manifest's source (``kind: plsqlbench``) resolves to the release root: ``--plsql-data``
(a clone, or any partial copy in the same layout) or the pinned, checksummed download.
Tasks are built by :mod:`pytest_plsqlbench.spider.build`; metadata becomes markers
(``difficulty_advanced``, ``reasoning_data_retrieval``, ``construct_package``) and short
string metadata (``db_id`` ...) becomes ``-k`` keywords, so ``-m difficulty_advanced`` and
``-k chinook`` select sensibly. Tasks the data cannot run are collected and skipped with the
reason, and the end-of-run report (:mod:`pytest_plsqlbench.spider.report`) counts them.
"""

from __future__ import annotations

import logging

import pytest

from ..datasources import resolve
from ..errors import UsageError
from ..manifests import Manifest
from ..settings import Settings
from ..tasks import Task

log = logging.getLogger(__name__)

LOADERS = ("spider", "spider2-st", "spider2-mt")


@pytest.hookimpl(trylast=True)
def pytest_plsql_load_subset(
    config: pytest.Config, manifest: Manifest, settings: Settings
) -> list[Task] | None:
    if manifest.loader not in LOADERS:
        return None
    from ..spider.build import load
    from ..spider.report import reporter

    root = resolve(manifest, settings.data)
    if not root.is_dir():
        raise UsageError(
            f"subset {manifest.name!r}: the PLSQLBench data must be a folder (a release clone), not {root}"
        )
    tasks, notes = load(manifest, settings, root)
    runnable = sum(1 for t in tasks if t.not_runnable is None)
    log.info("subset %s: %d task(s) from %s, %d runnable", manifest.name, len(tasks), root, runnable)
    reporter(config, settings).add(manifest, tasks, notes)
    return tasks

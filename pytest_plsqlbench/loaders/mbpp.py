"""Subsets converted from MBPP data: ``mbpp`` (PLSQLBench's MBPP-PLSQL), ``mbpp-plus`` (evalplus
MBPP+, rebuilt since the authors withhold MBPP+-PLSQL) and ``mbpp-sanitized``.

The manifest's ``loader`` picks the input format; its data source is resolved like any
other (``--plsql-source``/``--plsql-data`` or a checksummed download). The input is
converted on first use and the result cached under ``<data cache>/converted``, keyed by the
input's sha256, the converter version and a fingerprint of the converter's code, the
dialect and the assertion mode. Conversion runs under a file lock so concurrent xdist
workers convert once; one conversion writes every dialect and assertion mode at once (the
expensive part, running MBPP+'s canonical solutions, is shared), each file atomically.

Every task carries the input's sha256 as ``metadata["data_revision"]`` (``sha256:`` + 16 hex
digits), so the results header names the bytes the run actually read -- not the manifest's pinned
checksum, which a ``--plsql-source`` copy need not match.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from .. import datasources
from ..errors import DataError
from ..manifests import Manifest
from ..settings import ASSERTION_MODES, Settings
from ..tasks import DIALECTS, Task, task_from_dict, task_to_dict

log = logging.getLogger(__name__)

#: Manifest ``loader`` value -> converter source name.
LOADERS = {"mbpp-plus": "mbpp-plus", "mbpp-sanitized": "mbpp", "plsqlbench-mbpp": "plsqlbench-mbpp"}


@cache
def code_fingerprint() -> str:
    """Hash of the converter's source, so a changed converter never reads a stale cache."""
    from .. import convert

    digest = hashlib.sha256()
    for path in sorted(Path(convert.__file__).parent.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def cache_name(source: str, digest: str, dialect: str, assertions: str, subset: str) -> str:
    from ..convert import CONVERTER_VERSION

    return f"{subset}-{source}-{dialect}-{assertions}-{digest[:16]}-v{CONVERTER_VERSION}-{code_fingerprint()}.jsonl"


def _write_atomic(path: Path, lines: list[str]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.writelines(line + "\n" for line in lines)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read(path: Path) -> list[Task]:
    tasks = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                tasks.append(task_from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                raise DataError(
                    f"{path}:{lineno}: corrupt cached conversion ({exc}); delete the file"
                ) from None
    return tasks


def load_converted(
    source: str,
    path: Path,
    dialect: str,
    *,
    subset: str,
    assertions: str,
    cache_dir: Path,
    timeout: float = 5.0,
) -> list[Task]:
    """The converted tasks of ``path`` in ``dialect``, converting (once, under a lock) if needed."""
    from ..convert.pipeline import emit_all, type_source

    cache_dir.mkdir(parents=True, exist_ok=True)
    digest = datasources.sha256_file(path)
    wanted = cache_dir / cache_name(source, digest, dialect, assertions, subset)
    revision = data_revision(digest)
    with FileLock(str(cache_dir / f"{subset}-{source}-{digest[:16]}.lock")):
        if wanted.exists():
            return _with_revision(_read(wanted), revision)
        log.info("converting %s (%s) for subset %s; cached in %s", path, source, subset, cache_dir)
        typed_by_mode: dict[str, Any] = {}
        for mode in ASSERTION_MODES:
            # Typing depends on the mode only for PLSQLBench (its restored set comparisons).
            if source == "plsqlbench-mbpp" or not typed_by_mode:
                typed_by_mode[mode] = type_source(source, path, assertions=mode, timeout=timeout)
            else:
                typed_by_mode[mode] = next(iter(typed_by_mode.values()))
        for mode, typed in typed_by_mode.items():
            for d in DIALECTS:
                result = emit_all(typed, source, d, subset=subset, assertions=mode)
                target = cache_dir / cache_name(source, digest, d, mode, subset)
                _write_atomic(target, [json.dumps(task_to_dict(t), ensure_ascii=False) for t in result.tasks])
                summary = target.with_suffix(".summary.json")
                _write_atomic(summary, [json.dumps(_summary(result), ensure_ascii=False, indent=1)])
                if d == dialect and mode == assertions:
                    for line in result.summary_lines():
                        log.info("%s (%s, %s): %s", subset, d, mode, line)
        return _with_revision(_read(wanted), revision)


def data_revision(digest: str) -> str:
    """The revision tasks report for an input with this sha256 (hex)."""
    return f"sha256:{digest[:16]}"


def _with_revision(tasks: list[Task], revision: str) -> list[Task]:
    return [dataclasses.replace(t, metadata={**t.metadata, "data_revision": revision}) for t in tasks]


def _summary(result: Any) -> dict[str, Any]:
    """What a report needs about a conversion: counts, rejections and dropped cases."""
    return {
        "source": result.source,
        "dialect": result.dialect,
        "summary": result.summary_lines(),
        "rejected": [{"task_id": r.task_id, "reason": r.reason, "detail": r.detail} for r in result.rejected],
        "dropped": {
            tid: [{"case": d.case_id, "reason": d.reason, "detail": d.detail} for d in cases]
            for tid, cases in result.dropped.items()
            if cases
        },
    }


def input_file(manifest: Manifest, settings: Settings) -> Path:
    """The file to convert: the resolved data source (PLSQLBench: inside the release root)."""
    from ..convert.sources import plsqlbench_file

    path = datasources.resolve(manifest, settings)
    if manifest.loader == "plsqlbench-mbpp":
        path = plsqlbench_file(path)
    if not path.is_file():
        raise DataError(f"subset {manifest.name!r}: {path} is not a file")
    return path


@pytest.hookimpl(trylast=True)
def pytest_plsql_load_subset(
    config: pytest.Config, manifest: Manifest, settings: Settings
) -> list[Task] | None:
    source = LOADERS.get(manifest.loader)
    if source is None:
        return None
    timeout = float(manifest.options.get("timeout", 5.0))
    return load_converted(
        source,
        input_file(manifest, settings),
        settings.dialect,
        subset=manifest.name,
        assertions=settings.assertions,
        cache_dir=datasources.data_cache_dir(settings) / "converted",
        timeout=timeout,
    )

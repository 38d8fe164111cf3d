"""Subsets converted from MBPP data: ``mbpp`` (PLSQLBench's MBPP-PLSQL), ``mbpp-plus`` (evalplus
MBPP+, rebuilt since the authors withhold MBPP+-PLSQL) and ``mbpp-sanitized``.

The manifest's ``loader`` picks the input format; its data source is resolved like any
other (``--plsql-source``/``--plsql-data`` or a checksummed download). The input is
converted on first use and the result cached under ``<data cache>/converted``, keyed by the
input's sha256, the converter version and a fingerprint of the converter's code, the
dialect and the assertion mode. Conversion runs under a file lock so concurrent xdist
workers convert once; it writes the dialect and assertion mode the run asks for, atomically,
and keeps the canonical solutions' results beside it (``*.calls.jsonl``), so converting the
same input into another dialect or mode later does not run them again (the expensive part).

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
import time
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from .. import datasources
from ..collect import keep_constant_tasks
from ..errors import DataError
from ..manifests import Manifest
from ..settings import ASSERTION_MODES, Settings
from ..tasks import Task, task_from_dict, task_to_dict

log = logging.getLogger(__name__)
#: What loading does and how long it takes: shown on the terminal by :mod:`..loading`.
progress = logging.getLogger("pytest_plsqlbench.progress")

KEEP_OPTION = "--plsql-keep-constant-tasks"

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
    # Line by line: the whole file as one string (plus its lines) took ~150 MB more at peak
    # than the tasks themselves on MBPP+ (one non-ASCII character widens every character).
    tasks = []
    with path.open(encoding="utf-8") as lines:
        for lineno, line in enumerate(lines, 1):
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
    keep_left_out: bool = False,
) -> list[Task]:
    """The converted tasks of ``path`` in ``dialect``, converting (once, under a lock) if needed.

    The cache holds every converted task, those left out by default (a constant passes them)
    marked with ``metadata["left_out"]``; they are returned only with ``keep_left_out``.
    What happens, how long it took and the counts go to the ``pytest_plsqlbench.progress`` log.
    """
    started = time.monotonic()
    cache_dir.mkdir(parents=True, exist_ok=True)
    digest = datasources.sha256_file(path)
    wanted = cache_dir / cache_name(source, digest, dialect, assertions, subset)
    revision = data_revision(digest)
    with FileLock(str(cache_dir / f"{subset}-{source}-{digest[:16]}.lock")):
        converted_now = not wanted.exists()
        if converted_now:
            _convert(source, path, digest, dialect, assertions, subset=subset, cache_dir=cache_dir, timeout=timeout)
        every = _read(wanted)
    tasks = [t for t in every if keep_left_out or "left_out" not in t.metadata]
    summary = _read_summary(wanted)
    verb = "converted" if converted_now else "read from the conversion cache"
    progress.info(
        "plsqlbench: %s: %s %d tasks (%d tests) in %.1fs%s",
        subset,
        verb,
        len(tasks),
        sum(t.n_tests for t in tasks),
        time.monotonic() - started,
        _counts_text(summary, every, keep_left_out),
    )
    return _with_revision(tasks, revision)


def _counts_text(summary: dict[str, Any], every: list[Task], keep_left_out: bool) -> str:
    """``; of 290 source tasks: 11 rejected, 2 left out (...), 3179 cases dropped`` for the progress line."""
    left = [t for t in every if "left_out" in t.metadata]
    parts = []
    total = summary.get("total")
    rejected = len(summary.get("rejected", []))
    if rejected:
        parts.append(f"{rejected} rejected")
    if left:
        names = ", ".join(t.id for t in left[:6]) + (", ..." if len(left) > 6 else "")
        if keep_left_out:
            parts.append(f"{len(left)} passed by a constant kept on request ({names})")
        else:
            parts.append(
                f"{len(left)} left out as a constant passes them ({names}; "
                f"{KEEP_OPTION} keeps them)"
            )
    dropped = summary.get("cases_dropped")
    if dropped:
        parts.append(f"{dropped} source cases dropped")
    few = summary.get("few_cases")
    if few:
        parts.append(few)
    head = f"; of {total} source tasks: " if total is not None else "; "
    return head + ", ".join(parts) if parts else ""


def _read_summary(cached: Path) -> dict[str, Any]:
    try:
        return json.loads(cached.with_suffix(".summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def calls_name(source: str, digest: str, subset: str) -> str:
    """The store of the reference calls' results a source's conversions share."""
    from ..convert import CONVERTER_VERSION

    return f"{subset}-{source}-{digest[:16]}-v{CONVERTER_VERSION}-{code_fingerprint()}.calls.jsonl"


#: Seconds between "converting: N/M tasks" lines while a conversion runs (a first conversion of
#: MBPP+ takes half a minute; a shorter one prints none).
PROGRESS_EVERY = 5.0


class _Counted:
    """The typed tasks of a conversion, logging now and then how many are done, the rate and the ETA."""

    def __init__(self, items: Any, subset: str, every: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.items, self.subset, self.clock = items, subset, clock
        self.every = PROGRESS_EVERY if every is None else every
        self.total = len(items)

    def __len__(self) -> int:
        return self.total

    def __iter__(self) -> Iterator[Any]:
        started = last = self.clock()
        for done, item in enumerate(self.items, 1):
            yield item
            now = self.clock()
            if now - last >= self.every and done < self.total:
                last = now
                rate = done / max(now - started, 1e-9)
                progress.info(
                    "plsqlbench: %s: converting: %d/%d tasks, %.1f tasks/s, ETA %.0fs",
                    self.subset, done, self.total, rate, (self.total - done) / rate,
                )


def _convert(
    source: str,
    path: Path,
    digest: str,
    dialect: str,
    assertions: str,
    *,
    subset: str,
    cache_dir: Path,
    timeout: float,
) -> None:
    """Convert ``path`` into ``dialect`` and ``assertions``, written atomically.

    The canonical solutions' results are kept (:class:`~..convert.sandbox.CallStore`): another
    dialect or mode later runs none of them again.
    """
    from ..convert.pipeline import emit_all, emit_streaming, type_source
    from ..convert.sandbox import call_store

    progress.info(
        "plsqlbench: %s: converting %s (%s; first use, cached in %s) ...", subset, path, source, cache_dir
    )
    target = cache_dir / cache_name(source, digest, dialect, assertions, subset)
    with call_store(cache_dir / calls_name(source, digest, subset)):
        if source == "plsqlbench-mbpp":
            # Typing depends on the assertion mode only here (PLSQLBench's restored set comparisons).
            typed = type_source(source, path, assertions=assertions, timeout=timeout)
            counted: Any = _Counted(typed, subset)  # iterated once, with len(), as emit_all needs
            result = emit_all(counted, source, dialect, subset=subset, assertions=assertions, keep_left_out=True)
            _write_atomic(target, [json.dumps(task_to_dict(t), ensure_ascii=False) for t in result.tasks])
            _write_summary(target, result)
            return
        typed = type_source(source, path, assertions=ASSERTION_MODES[0], timeout=timeout, stream=True)
        out = _AtomicLines(target)
        try:
            results = emit_streaming(
                _Counted(typed, subset),
                source,
                subset=subset,
                targets=[(dialect, assertions)],
                sink=lambda d, mode, task: out.add(json.dumps(task_to_dict(task), ensure_ascii=False)),
            )
            out.commit()
            _write_summary(target, results[(dialect, assertions)])
        finally:
            out.discard()


class _AtomicLines:
    """A file written line by line under a temporary name, renamed into place on commit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        fd, self.tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        self.out = os.fdopen(fd, "w", encoding="utf-8")

    def add(self, line: str) -> None:
        self.out.write(line + "\n")

    def commit(self) -> None:
        self.out.close()
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        if not self.out.closed:
            self.out.close()
        Path(self.tmp).unlink(missing_ok=True)


def _write_summary(target: Path, result: Any) -> None:
    """The summary next to a cached conversion; it describes the default (left-out tasks are
    not among the converted)."""
    default = dataclasses.replace(
        result, tasks=[t for t in result.tasks if "left_out" not in t.metadata], keep_left_out=False
    )
    summary = target.with_suffix(".summary.json")
    _write_atomic(summary, [json.dumps(_summary(default), ensure_ascii=False, indent=1)])


def data_revision(digest: str) -> str:
    """The revision tasks report for an input with this sha256 (hex)."""
    return f"sha256:{digest[:16]}"


def _with_revision(tasks: list[Task], revision: str) -> list[Task]:
    return [dataclasses.replace(t, metadata={**t.metadata, "data_revision": revision}) for t in tasks]


def _summary(result: Any) -> dict[str, Any]:
    """What a report needs about a conversion: counts, rejections, left-out tasks, dropped
    cases, and per task the cases kept of its source cases."""
    from ..convert.model import few_cases_line, kept_of

    return {
        "source": result.source,
        "dialect": result.dialect,
        "total": result.total,
        "summary": result.summary_lines(),
        "rejected": [{"task_id": r.task_id, "reason": r.reason, "detail": r.detail} for r in result.rejected],
        "left_out": [
            {
                "task_id": t.id,
                "reason": t.metadata["left_out"],
                "detail": t.metadata.get("left_out_detail", ""),
                "constant": t.metadata.get("constant_answer"),
            }
            for t in result.left_out
        ],
        "cases_kept": {t.id: list(kept_of(t)) for t in (*result.tasks, *result.left_out)},
        "cases_dropped": sum(result.dropped_by_reason().values()),
        "few_cases": few_cases_line(result.tasks),
        "dropped": {
            tid: [{"case": d.case_id, "reason": d.reason, "detail": d.detail} for d in cases]
            for tid, cases in result.dropped.items()
            if cases
        },
    }


def input_file(manifest: Manifest, settings: Settings) -> Path:
    """The file to convert: the resolved data source (PLSQLBench: inside the release root)."""
    from ..convert.sources import plsqlbench_file

    given = datasources.resolve(manifest, settings.data)
    path = plsqlbench_file(given) if manifest.loader == "plsqlbench-mbpp" else given
    if not path.is_file():
        raise DataError(f"subset {manifest.name!r}: {path} is not a file{_release_hint(given)}")
    return path


def _release_hint(given: Path) -> str:
    """Where the release root probably is, when a folder above or below it was given."""
    from ..convert.sources import PLSQLBENCH_FILE

    if not given.is_dir():
        return ""
    below = sorted(p.parent.parent.parent for p in given.glob(f"*/{PLSQLBENCH_FILE}"))
    if below:
        return f" (the release root looks like {below[0]}: give --plsql-data={below[0]})"
    for parent in given.parents:
        if (parent / PLSQLBENCH_FILE).is_file():
            return f" (the release root looks like {parent}: give --plsql-data={parent})"
    return " (--plsql-data names the release's root folder, the one holding datasets/)"


KEEP_HELP = (
    "keep the tasks that measure nothing: converted MBPP tasks one constant answer passes (every "
    "kept case expects the same value; marked with metadata left_out when kept) and, in every "
    "family, tasks an empty answer passes (e.g. Spider questions whose gold result is empty); "
    "left out by default and named in the run's report"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("plsqlbench", "PL/SQL benchmarks (pytest-plsqlbench)")
    group.addoption(KEEP_OPTION, dest="plsql_keep_constant_tasks", action="store_true", default=None, help=KEEP_HELP)
    parser.addini("plsql_keep_constant_tasks", KEEP_HELP, type="bool", default=False)


def keep_left_out(config: pytest.Config | None) -> bool:
    """``--plsql-keep-constant-tasks`` or ini ``plsql_keep_constant_tasks``."""
    return config is not None and keep_constant_tasks(config)


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
        settings.database.dialect,
        subset=manifest.name,
        assertions=settings.tasks.assertions,
        cache_dir=datasources.data_cache_dir(settings.data) / "converted",
        timeout=timeout,
        keep_left_out=keep_left_out(config),
    )

"""Find benchmark data: a local copy the user names, or a checksummed download in the cache.

Resolution order for a manifest's source ``NAME``: ``--plsql-source NAME=PATH`` (or ini
``plsql_source``), the environment variable ``PLSQLBENCH_SOURCE_<NAME>``, ``--plsql-data``
for a source of kind ``release`` (a release's folder tree; a family may name the kind after its
benchmark), then a download into the data cache. Downloads are verified against the manifest's
sha256; a manifest without one records the digest of the first download and refuses a later
copy that differs (trust on first use, reported as such).
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import logging
import os
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import platformdirs
from filelock import FileLock

from . import registry
from .errors import DataError, UsageError
from .manifests import SOURCE_KINDS, Manifest, Source
from .settings import DataSettings, source_from_environment

log = logging.getLogger(__name__)
#: What loading does and how long it takes (shown on the terminal by :mod:`.loading`).
progress = logging.getLogger("pytest_plsqlbench.progress")


def data_cache_dir(data: DataSettings) -> Path:
    path = data.cache or Path(platformdirs.user_cache_dir("pytest-plsqlbench"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_kind(source: Source) -> str:
    """The core kind of ``source`` (:data:`~pytest_plsqlbench.manifests.SOURCE_KINDS`): its own,
    or the one a registered family names it after (``Family.sources``)."""
    if source.kind in SOURCE_KINDS:
        return source.kind
    for family in registry.active().families.values():
        if source.kind in family.sources:
            return family.sources[source.kind]
    raise UsageError(
        f"data source {source.name!r}: unknown kind {source.kind!r} (the core's: {', '.join(SOURCE_KINDS)}; "
        "a registered family may name others)"
    )


def _is_release(source: Source) -> bool:
    return source_kind(source) == "release"


def _local_override(source: Source, data: DataSettings) -> Path | None:
    if source.name in data.sources:
        return data.sources[source.name]
    env = source_from_environment(source.name)
    if env:
        return Path(env).expanduser()
    if _is_release(source) and data.release is not None:
        return data.release
    return None


def resolve(manifest: Manifest, data: DataSettings) -> Path:
    """Local path of the manifest's data (a file, or a directory for the release)."""
    source = manifest.source
    if source is None:
        raise UsageError(f"subset {manifest.name!r}: its manifest names no data source")
    local = _local_override(source, data)
    if local is not None:
        if not _is_release(source) and local.is_dir() and source.file:
            local = local / source.file
        if not local.exists():
            raise UsageError(f"subset {manifest.name!r}: data source {source.name!r}: {local} does not exist")
        return local
    return download(source, data, manifest.name)


def _local_copy_option(source: Source) -> str:
    """The option that points the run at a local copy of ``source`` instead of a download."""
    return "--plsql-data DIR" if _is_release(source) else f"--plsql-source {source.name}=PATH"


def download(source: Source, data: DataSettings, subset: str) -> Path:
    """Download (once, under a lock) and unpack ``source`` into the data cache."""
    if not source.url:
        hint = _local_copy_option(source)
        raise UsageError(f"subset {subset!r} needs data source {source.name!r}: give a local copy with {hint}")
    root = data_cache_dir(data) / "downloads" / source.name
    root.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(source.url.encode()).hexdigest()[:16]
    target = root / key
    with FileLock(str(root / f"{key}.lock")):
        done = target / ".complete"
        if not done.exists():
            _fetch(source, target, subset, data)
        path = target / "content"
        release = _is_release(source)
        if not release and source.file and (path / source.file).exists():
            return path / source.file
        if not release and path.is_dir():
            files = [p for p in path.iterdir() if p.is_file()]
            if len(files) == 1:
                return files[0]
        if release and path.is_dir():
            # GitHub archives unpack into one top-level folder.
            subdirs = [p for p in path.iterdir() if p.is_dir()]
            return subdirs[0] if len(subdirs) == 1 else path
        return path


def _fetch(source: Source, target: Path, subset: str, data: DataSettings) -> None:
    assert source.url
    if target.exists():
        shutil.rmtree(target)
    tmp = Path(tempfile.mkdtemp(prefix=".dl-", dir=target.parent))
    raw = tmp / "raw"
    progress.info("plsqlbench: %s: downloading %s (first use; kept in %s) ...", subset, source.url, target.parent)
    started = time.monotonic()
    try:
        with urllib.request.urlopen(source.url, timeout=60) as resp, raw.open("wb") as out:
            shutil.copyfileobj(resp, out)
    except (urllib.error.URLError, http.client.HTTPException, OSError, TimeoutError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        hint = _local_copy_option(source)
        reason = getattr(exc, "reason", exc)
        raise UsageError(
            f"subset {subset!r}: cannot download {source.url} ({reason}); "
            f"point {hint} at a local copy"
        ) from None
    digest = sha256_file(raw)
    size = raw.stat().st_size
    pinned = source.sha256
    tofu = target.parent / f"{target.name}.sha256"
    if pinned is None and tofu.exists():
        pinned = tofu.read_text().strip()
    if pinned is not None and digest != pinned:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DataError(
            f"subset {subset!r}: checksum mismatch for {source.url}: expected sha256 {pinned}, got {digest}"
        )
    if source.sha256 is None and not tofu.exists():
        tofu.write_text(digest + "\n")
        log.warning("no pinned checksum for %s; recorded sha256 %s for later runs", source.url, digest)
    content = tmp / "content"
    content.mkdir()
    name = source.url.rsplit("/", 1)[-1].split("?")[0]
    if tarfile.is_tarfile(raw):
        with tarfile.open(raw) as tar:
            tar.extractall(content, filter="data")
    elif name.endswith(".gz"):
        with gzip.open(raw, "rb") as src, (content / (source.file or name[:-3])).open("wb") as dst:
            shutil.copyfileobj(src, dst)
    else:
        shutil.move(str(raw), content / (source.file or name))
    (tmp / ".complete").write_text(digest + "\n")
    raw.unlink(missing_ok=True)
    os.replace(tmp, target)
    progress.info(
        "plsqlbench: %s: downloaded %s (%.1f MB, sha256 %s) in %.1fs",
        subset,
        source.url,
        size / 1e6,
        digest[:16],
        time.monotonic() - started,
    )

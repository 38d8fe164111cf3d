"""Reading the official PLSQLBench release layout (oracle-samples/plsqlbench).

Every reader names file and line when something is wrong, and recognises a Git LFS pointer
(a clone without ``git lfs``) instead of failing on it as broken JSON. A partial copy of
the release works for what it holds: optional files that are absent read as empty.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DataError

log = logging.getLogger(__name__)

SPIDER1 = "datasets/spider/spider1.jsonl"
SPIDER2_ST = "datasets/spider2_st/spider2_st.jsonl"
SPIDER2_MT = "datasets/spider2_mt/spider2_mt.jsonl"
META_ST = "metadata/spider2_st_metadata.jsonl"
META_MT = "metadata/spider2_mt_metadata.jsonl"
SPIDER_DDL = "schema/spider/spider_ddl.jsonl"
#: The release's name first; the shared sample names its excerpt ``spider_dml.sample.json``.
SPIDER_DML = ("schema/spider/spider_dml.json", "schema/spider/spider_dml.sample.json")
SPIDER2_SCHEMA_DIRS = ("schema/spider2_plsql/bigquery", "schema/spider2_plsql/snowflake_sqlite")
SPIDER2_DDL = "OUTPUT_DDL_dev.jsonl"
SPIDER2_DML = "OUTPUT_DML_dev.jsonl"

_LFS = "version https://git-lfs.github.com/spec/"


@dataclass(frozen=True)
class Record:
    """One JSON object of a data file, with where it came from."""

    data: dict[str, Any]
    path: Path
    line: int

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def _check_lfs(path: Path, head: str) -> None:
    if head.startswith(_LFS):
        raise DataError(
            f"{path} is a Git LFS pointer, not the data: fetch it with 'git lfs pull' in the clone, "
            "or let the plugin download the release (no --plsql-data)"
        )


def read_jsonl(path: Path) -> list[Record]:
    """All objects of a JSON Lines file; a bad line is a :class:`DataError` naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from None
    _check_lfs(path, text[:100])
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
        if not isinstance(data, dict):
            raise DataError(f"{path}:{n}: expected a JSON object")
        out.append(Record(data, path, n))
    return out


def read_json_pairs(path: Path) -> Any:
    """A JSON document whose objects keep duplicate keys (as lists of pairs).

    ``spider_dml.json`` keys its tables by source table name; names repeat across
    databases, and a plain ``json.load`` would silently keep only the last one.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from None
    _check_lfs(path, text[:100])
    try:
        return json.loads(text, object_pairs_hook=lambda pairs: _Pairs(pairs))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None


class _Pairs(list):
    """An object's (key, value) pairs, duplicates kept, with dict-style lookups of the first."""

    def get(self, key: str, default: Any = None) -> Any:
        for k, v in self:
            if k == key:
                return v
        return default


def first_existing(root: Path, candidates: tuple[str, ...] | str) -> Path | None:
    for rel in (candidates,) if isinstance(candidates, str) else candidates:
        path = root / rel
        if path.is_file():
            return path
    return None


def require(root: Path, rel: str, subset: str) -> Path:
    path = root / rel
    if not path.is_file():
        raise DataError(
            f"subset {subset!r}: {rel} is not in the data at {root} "
            "(point --plsql-data at a clone of oracle-samples/plsqlbench)"
        )
    return path


def spider2_schema_files(root: Path, kind: str) -> list[Path]:
    """The Spider2 ``OUTPUT_DDL_dev.jsonl`` (``kind='ddl'``) or DML files that exist."""
    name = SPIDER2_DDL if kind == "ddl" else SPIDER2_DML
    return [root / d / name for d in SPIDER2_SCHEMA_DIRS if (root / d / name).is_file()]


def data_revision(root: Path, files: Iterable[Path] = ()) -> str:
    """The release commit when it can be told (a git clone, a GitHub archive of a pinned commit);
    else a digest of the ``files`` read (:func:`files_digest`), so two copies with different
    content never share a revision, whatever their folders are called."""
    head = root / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
        if ref.startswith("ref:"):
            ref_path = root / ".git" / ref.split(None, 1)[1]
            if ref_path.is_file():
                return ref_path.read_text().strip()[:12]
            packed = root / ".git" / "packed-refs"
            for line in packed.read_text().splitlines() if packed.is_file() else ():
                if line.endswith(ref.split(None, 1)[1]):
                    return line.split()[0][:12]
        elif re.fullmatch(r"[0-9a-f]{40}", ref):
            return ref[:12]
    except OSError:
        pass
    m = re.search(r"plsqlbench-([0-9a-f]{40})$", root.name)
    if m:
        return m.group(1)[:12]
    return files_digest(root, files)


def files_digest(root: Path, files: Iterable[Path]) -> str:
    """``sha256:`` + 16 hex digits over the files' paths (relative to ``root``) and contents."""
    digest = hashlib.sha256()
    for path in sorted(set(files)):
        try:
            name = path.relative_to(root).as_posix()
        except ValueError:
            name = path.name
        digest.update(f"{name}\0{path.stat().st_size}\0".encode())
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return "sha256:" + digest.hexdigest()[:16]


def metadata_by_id(root: Path, rel: str) -> dict[str, dict[str, Any]]:
    """Optional annotations (``metadata/*.jsonl``) by ``instance_id``; empty when absent."""
    path = root / rel
    if not path.is_file():
        log.info("%s not found; tasks get no difficulty/reasoning markers", path)
        return {}
    out: dict[str, dict[str, Any]] = {}
    for rec in read_jsonl(path):
        iid = rec.data.get("instance_id")
        if isinstance(iid, str):
            out[iid] = rec.data
    return out


def iter_strings(value: Any) -> Iterator[str]:
    """The strings of a field that may be one string or a list of them."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, str):
                yield item

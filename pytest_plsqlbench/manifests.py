"""Subset manifests: one YAML file per subset under ``tasks/``, naming loader and data.

A manifest looks like::

    name: mbpp-plus
    description: MBPP+-PLSQL rebuilt from evalplus MBPP+ (paper App. B.5)
    loader: mbpp-plus            # which pytest_plsql_load_subset implementation reads it
    dialects: [postgres, oracle]
    source:                      # optional: where the data comes from
      name: mbppplus             # --plsql-source mbppplus=PATH overrides
      url: https://...           # downloaded into the data cache when no local copy is given
      sha256: ...                # checked after download (null: recorded on first download)
      file: MbppPlus.jsonl       # file inside the download (archives) or the local directory
    options: {...}               # loader-specific
    metrics: NAME                # optional: the metric family scoring it (see families.py); by
                                 # default the registered family whose loaders hold `loader:`
    paper:                       # optional: how the subset maps onto the paper / leaderboard
      leaderboard: mbpp_plus     # key in plsqlbench.github.io data/leaderboard.json `scores`
      split: test                # dev | test (for the site's overall means)
      comparable_metric: suite_pass   # which of our metrics equals the paper's figure
      note: ...                  # optional: shown after it (e.g. "the tasks are ours")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import registry
from .errors import UsageError
from .resources import tasks_dir

#: libyaml's safe loader when available (much faster on big task folders).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: The core's source kinds (a family may name others after them: ``Family.sources``).
#: ``file``: a file (or a folder holding ``file``); ``release``: a folder tree, the release root
#: given with ``--plsql-data``.
SOURCE_KINDS = ("file", "release")


@dataclass(frozen=True)
class Source:
    name: str
    url: str | None = None
    sha256: str | None = None
    file: str | None = None
    #: One of :data:`SOURCE_KINDS`, or a kind a registered family names after one of them
    #: (resolved by :func:`pytest_plsqlbench.datasources.source_kind`).
    kind: str = "file"


@dataclass(frozen=True)
class Manifest:
    name: str
    loader: str
    dialects: tuple[str, ...]
    path: Path
    description: str = ""
    source: Source | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    paper: Mapping[str, Any] = field(default_factory=dict)
    #: The metric family that scores the subset: ``metrics:``, else the registered family whose
    #: ``loaders`` hold ``loader``; None when neither (refused when a run chooses the subset).
    metrics: str | None = None

    @property
    def directory(self) -> Path:
        """Where files a manifest names relatively live (its own folder)."""
        return self.path.parent


def yaml_error(path: Path, exc: yaml.YAMLError) -> UsageError:
    """One line naming the file and the line of a YAML syntax error."""
    mark = getattr(exc, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark else str(path)
    return UsageError(f"{where}: not valid YAML ({getattr(exc, 'problem', None) or exc})")


def _fail(path: Path, msg: str) -> UsageError:
    return UsageError(f"{path}: {msg}")


def load_manifest(path: Path) -> Manifest:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise yaml_error(path, exc) from None
    except OSError as exc:
        raise _fail(path, f"cannot read ({exc.strerror})") from None
    if not isinstance(data, dict):
        raise _fail(path, "a manifest must be a mapping")
    for key in ("name", "loader"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise _fail(path, f"missing string field {key!r}")
    registered = tuple(registry.active().dialects)
    dialects = tuple(data.get("dialects") or registered)
    bad = [d for d in dialects if d not in registered]
    if bad:
        raise _fail(path, f"unknown dialect(s) {bad}; registered: {list(registered)}")
    source = None
    if data.get("source") is not None:
        src = data["source"]
        if not isinstance(src, dict) or not isinstance(src.get("name"), str):
            raise _fail(path, "'source' must be a mapping with a string 'name'")
        unknown = set(src) - {"name", "url", "sha256", "file", "kind"}
        if unknown:
            raise _fail(path, f"unknown source field(s) {sorted(unknown)}")
        source = Source(**src)
    options = data.get("options") or {}
    if not isinstance(options, dict):
        raise _fail(path, "'options' must be a mapping")
    paper = data.get("paper") or {}
    if not isinstance(paper, dict):
        raise _fail(path, "'paper' must be a mapping")
    metrics = data.get("metrics")
    if metrics is not None and (not isinstance(metrics, str) or not metrics.strip()):
        raise _fail(path, "'metrics' must name a metric family")
    loader = data["loader"].strip()
    return Manifest(
        name=data["name"].strip(),
        loader=loader,
        dialects=dialects,
        path=path,
        description=str(data.get("description") or "").strip(),
        source=source,
        options=options,
        paper=paper,
        metrics=metrics.strip() if metrics is not None else _claimant(loader),
    )


def _claimant(loader: str) -> str | None:
    """The registered family whose ``loaders`` hold ``loader`` (the last registered, as a later
    registration of a name wins), None if none does."""
    claims = [name for name, family in registry.active().families.items() if loader in family.loaders]
    return claims[-1] if claims else None


def discover(extra_dirs: tuple[Path, ...] = ()) -> dict[str, Manifest]:
    """All manifests: the built-in ``tasks/`` folder, then ``extra_dirs`` (later wins)."""
    found: dict[str, Manifest] = {}
    for folder in extra_dirs:
        if not folder.is_dir():
            raise UsageError(f"--plsql-tasks: {folder} is not a folder")
    for folder in (tasks_dir(), *extra_dirs):
        for path in sorted(folder.glob("*.yaml")):
            manifest = load_manifest(path)
            found[manifest.name] = manifest
    return found


def run_dialect(manifests: Sequence[Manifest], preferred: str) -> str:
    """The dialect a run takes when the user named none: ``preferred`` if every chosen subset
    has it, else the first dialect they all have (Spider2 exists only for Oracle); ``preferred``
    when they share none, so the caller's "exists only for" error names it."""
    if all(preferred in m.dialects for m in manifests):
        return preferred
    common = [d for d in manifests[0].dialects if all(d in m.dialects for m in manifests)] if manifests else []
    return common[0] if common else preferred

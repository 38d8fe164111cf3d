"""Whole episodes cached like answers (generation/cache.py): one JSON file per finished episode.

Layout: ``<cache>/episodes/<solver>/<subset>/<task>.s<sample>.<key16>.json``. The key hashes
everything an episode depends on: the task (id, subset, the Solver's prompt, ledger, behaviour),
the Solver (model, temperature, max tokens), the Simulator (kind, model), the protocol (budget
rule, prices, step cap, output limit) and the sample. Only finished episodes are written, and
atomically (temporary file + ``os.replace``): a run interrupted mid-episode leaves nothing, so
the next run plays that episode again from its start. Episodes that ended in a provider error
are not cached (they are asked again). A record that cannot be read counts as missing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from ...generation.cache import slug, write_json_atomic

log = logging.getLogger(__name__)

FORMAT = 1


def episode_key(payload: Mapping[str, Any]) -> str:
    blob = json.dumps({"format": FORMAT, **payload}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class EpisodeCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root) / "episodes"

    def path(self, key: str, *, solver: str, subset: str, task_id: str, sample: int) -> Path:
        return self.root / slug(solver) / slug(subset or "_") / f"{slug(task_id)}.s{sample}.{key[:16]}.json"

    def read(self, path: Path, key: str) -> dict[str, Any] | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("episode cache: cannot read %s (%s); playing the episode again", path, exc)
            return None
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key \
                or not isinstance(data.get("episode"), dict):
            log.warning("episode cache: %s is not an episode record for this key; playing the episode again", path)
            return None
        return data["episode"]

    def write(self, path: Path, key: str, episode: Mapping[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"format": FORMAT, "key": key, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "episode": dict(episode)}
        write_json_atomic(path, doc, indent=1)

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """One process plays an episode while another waiting for the same key then reads it."""
        locks = self.root / ".locks"
        try:
            locks.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(locks / f"{key}.lock"), thread_local=False)
            lock.acquire()
        except OSError as exc:
            log.warning("episode cache: cannot lock (%s); playing without a lock", exc)
            yield
            return
        try:
            yield
        finally:
            lock.release()


@dataclass(frozen=True)
class Stored:
    """One episode's place in the cache: what :class:`~.episode.InteractiveEpisode` reads and writes."""

    cache: EpisodeCache
    path: Path
    key: str
    #: ``--plsql-cache-only``: a missing episode is not played.
    cache_only: bool = False

    def read(self) -> dict[str, Any] | None:
        return self.cache.read(self.path, self.key)

    def write(self, episode: Mapping[str, Any]) -> None:
        try:
            self.cache.write(self.path, self.key, episode)
        except (OSError, ValueError) as exc:  # ValueError: text JSON cannot write (a lone surrogate)
            log.warning("episode cache: cannot write %s (%s); kept for this run only", self.path, exc)

    def lock(self) -> contextlib.AbstractContextManager[None]:
        return self.cache.lock(self.key)

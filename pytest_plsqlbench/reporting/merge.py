"""Combining the results of shards (``--plsql-shard I/N``, ``-k`` splits by task, CI matrix jobs) into one.

The merged document is scored from the parts' task results with the same function that scores a
run's own document (:func:`pytest_plsqlbench.results.score`), so its aggregates --
means, confidence intervals, pass@k, failure counts -- equal those of the unsharded run.

Parts must come from one run configuration: the same plugin version, model (and the model an
alias resolved to, or the digest of the answers file), dialect, database, generation and scoring
settings, subsets and data revisions, and no task may appear twice -- so a ``-k`` split must cut
between tasks; one that splits a task's tests between parts is refused as an overlap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..results import RUN_IDENTITY, ResultsFile, read_document, score
from ..results.record import ScoredDocument, task_results
from ..summary import shown_ids


class MergeError(UsageError):
    """The parts cannot be one run; the message says which files differ in what."""


def _differences(parts: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    problems = []
    headers = [(name, doc["header"]) for name, doc in parts]
    for key in (*RUN_IDENTITY, "subsets"):
        values = {name: h.get(key) for name, h in headers}
        if len({repr(v) for v in values.values()}) > 1:
            problems.append(f"{key}: " + "; ".join(f"{n} has {v!r}" for n, v in values.items()))
    versions = {name: h.get("database_version") for name, h in headers if h.get("database_version")}
    if len(set(versions.values())) > 1:
        problems.append("database_version: " + "; ".join(f"{n} has {v!r}" for n, v in versions.items()))
    for subset in sorted({k for _, h in headers for k in h.get("data_revisions") or {}}):
        revs = _revisions(parts, subset)
        if len(set(revs.values())) > 1:
            problems.append(
                f"data revision of {subset}: " + "; ".join(f"{n} has {v}" for n, v in revs.items())
            )
    return problems


def _revisions(parts: Sequence[tuple[str, Mapping[str, Any]]], subset: str) -> dict[str, str]:
    """part -> its data revision of ``subset``, from the parts that scored tasks of it.

    A part without tasks of the subset (a ``-k`` split by subset) never had a loader report what
    it read; its header holds the manifest digest instead, so it is compared only when no part
    scored the subset.
    """
    revs: dict[str, str] = {}
    scored: dict[str, str] = {}
    for name, doc in parts:
        rev = (doc["header"].get("data_revisions") or {}).get(subset)
        if not rev:
            continue
        revs[name] = str(rev)
        if any(t.subset == subset for t in task_results(doc)):
            scored[name] = str(rev)
    return scored or revs


def _shards(parts: Sequence[tuple[str, Mapping[str, Any]]], allow_partial: bool) -> list[str]:
    problems = []
    seen: dict[tuple[int, int], str] = {}
    counts = set()
    for name, doc in parts:
        shard = doc["header"].get("shard")
        if not shard:
            continue
        index, count = (int(x) for x in str(shard).split("/"))
        counts.add(count)
        if (index, count) in seen:
            problems.append(f"shard {shard} given twice: {seen[(index, count)]} and {name}")
        seen[(index, count)] = name
    if len(counts) > 1:
        problems.append(
            "shards of different splits: " + ", ".join(f"{n} is {d['header'].get('shard')}" for n, d in parts)
        )
    elif counts and not allow_partial:
        count = counts.pop()
        missing = [f"{i}/{count}" for i in range(1, count + 1) if (i, count) not in seen]
        if missing and len(seen) == len(parts):
            problems.append(f"shard(s) {', '.join(missing)} missing (--allow-partial merges what is there)")
    return problems


def merge_documents(
    parts: Sequence[tuple[str, Mapping[str, Any]]], allow_partial: bool = False
) -> ScoredDocument:
    """Merge ``(name, document)`` parts of one run; raise :class:`MergeError` if they are not."""
    if len(parts) < 2:
        raise MergeError("merge needs at least two results files")
    problems = _differences(parts)
    if problems:
        raise MergeError("these results are not parts of one run:\n  " + "\n  ".join(problems))
    owner: dict[tuple[str, str], str] = {}
    overlap = []
    for name, doc in parts:
        for task in task_results(doc):
            key = (task.subset, task.task_id)
            if key in owner:
                overlap.append(f"{key[0]}/{key[1]} ({owner[key]} and {name})")
            owner.setdefault(key, name)
    if overlap:
        raise MergeError(
            f"the parts overlap: {len(overlap)} task(s) appear twice: {shown_ids(overlap, 5)}"
        )
    problems = _shards(parts, allow_partial)
    if problems:
        raise MergeError("cannot merge: " + "; ".join(problems))
    headers = [doc["header"] for _, doc in parts]
    header = dict(headers[0])
    header.update(
        shard=None,
        keyword=None,
        markexpr=None,
        database_version=next(
            (h.get("database_version") for h in headers if h.get("database_version")), None
        ),
        # Checked above to agree among the parts that read the data (never "the last part's").
        data_revisions={
            subset: next(iter(_revisions(parts, subset).values()))
            for subset in dict.fromkeys(k for h in headers for k in h.get("data_revisions") or {})
        },
        # One interrupted part makes the whole interrupted (and collected items unknown).
        interrupted="; ".join(f"{n}: {d['header']['interrupted']}" for n, d in parts if d["header"].get("interrupted"))
        or None,
        items_collected=sum(h["items_collected"] for h in headers)
        if all(isinstance(h.get("items_collected"), int) for h in headers)
        else None,
        started=min(str(h.get("started") or "") for h in headers) or None,
        finished=max(str(h.get("finished") or "") for h in headers) or None,
        merged_from=[
            {
                "file": name,
                "shard": doc["header"].get("shard"),
                "keyword": doc["header"].get("keyword"),
                "markexpr": doc["header"].get("markexpr"),
                "tasks": len(task_results(doc)),
                "started": doc["header"].get("started"),
                "finished": doc["header"].get("finished"),
            }
            for name, doc in parts
        ],
    )
    info: dict[str, dict[str, Any]] = {}
    for _, doc in parts:
        for subset, m in (doc.get("subsets") or {}).items():
            info.setdefault(subset, {"paper": m.get("paper") or {}, "metric_family": m.get("metric_family")})
    # Their figures are left behind: the merged run's are scored again, as any run's are.
    tasks = tuple(replace(task, figures={}) for _, doc in parts for task in task_results(doc))
    return score(ResultsFile(header, info, tasks))


def merge_files(paths: Sequence[Path], allow_partial: bool = False) -> ScoredDocument:
    return merge_documents([(str(p), read_document(Path(p))) for p in paths], allow_partial)

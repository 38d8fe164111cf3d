"""``plsqlbench answers export``: the exact answers of a run (or of the answer cache) as an
answers file, so ``pytest --plsql-answers FILE`` scores them again anywhere.

From a results file the answers are each answer's ``code``: what ran, exact when the header says
``"answer_code": "exact"`` (files of this version; an older file clipped long answers at 20,000
characters, and exporting one that was clipped is refused, naming the tasks, rather than
writing a broken answer). From the cache (``--cache DIR``) they are the cached records' ``code``.
A line is ``{"subset", "task_id", "turn", "answer"}`` (the answers-file format, see README); one
sample per task turn (``--sample``, default the first), as an answers file holds one.
Task turns without an answer (not generated, a provider error) are left out and counted: scoring
the file gives them ``not generated``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UsageError
from .generation.models import resolve_model
from .results import read_document

#: Header value saying every answer's ``code`` in a results file is the exact answer.
EXACT = "exact"
#: How :func:`~.results.record.clip_text` ends a clipped text (results files of older versions).
_CLIPPED = re.compile(r"\n\.\.\. \[\d+ more characters not kept\]\Z")


@dataclass(frozen=True)
class Exported:
    subset: str
    task_id: str
    turn: int
    answer: str

    def line(self) -> str:
        # ASCII JSON: an answer's lone surrogate (valid JSON, not UTF-8) survives as its escape.
        return json.dumps({"subset": self.subset, "task_id": self.task_id, "turn": self.turn, "answer": self.answer})


def _clipped(code: str) -> bool:
    """Whether ``code`` ends as :func:`~.results.record.clip_text` leaves a clipped text."""
    return _CLIPPED.search(code) is not None


def from_results(doc: Mapping[str, Any], sample: int = 0) -> tuple[list[Exported], list[str]]:
    """The answers of a results document, and the task turns left out (and why)."""
    exact = (doc.get("header") or {}).get("answer_code") == EXACT
    out: list[Exported] = []
    left_out: list[str] = []
    clipped: list[str] = []
    for task in doc.get("tasks") or ():
        subset, task_id = str(task.get("subset")), str(task.get("task_id"))
        for ans in task.get("answers") or ():
            if int(ans.get("sample") or 0) != sample:
                continue
            turn = int(ans.get("turn") or 1)
            where = f"{subset}/{task_id} turn {turn}"
            code = ans.get("code")
            if ans.get("status") != "ok" or not isinstance(code, str):
                left_out.append(f"{where} ({ans.get('status') or 'no answer'})")
                continue
            if not exact and _clipped(code):
                clipped.append(where)
                continue
            out.append(Exported(subset, task_id, turn, code))
    if clipped:
        raise UsageError(
            f"{len(clipped)} answer(s) in this results file were clipped when it was written (an older "
            f"pytest-plsqlbench): {', '.join(clipped[:5])}{' ...' if len(clipped) > 5 else ''}; export them from the "
            "answer cache instead (plsqlbench answers export --cache DIR)"
        )
    return out, left_out


def _cache_records(root: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in sorted(root.rglob("*.json")):
        rel = path.relative_to(root).parts
        if any(part.startswith(".") for part in rel) or rel[0] == "episodes":
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a corrupt entry is not an answer (the run regenerates it)
        if isinstance(data, dict) and "key" in data and "status" in data and "task_id" in data:
            yield path, data


def from_cache(root: Path, model: str | None = None, sample: int = 0) -> tuple[list[Exported], list[str]]:
    """The cached answers of one model (the newest record of each task turn), and what was left out."""
    if not root.is_dir():
        raise UsageError(f"--cache: {root} is not a folder")
    records = [(p, d) for p, d in _cache_records(root) if int(d.get("sample") or 0) == sample]
    models = sorted({str(d.get("model")) for _, d in records})
    if model is None:
        if len(models) > 1:
            raise UsageError(f"--cache {root} holds answers of {len(models)} models; choose one with --model: "
                             + ", ".join(models))
    else:
        wanted = {model, resolve_model(model)}
        records = [(p, d) for p, d in records if d.get("model") in wanted]
        if not records:
            raise UsageError(f"--cache {root} holds no answer of model {model!r}; "
                             f"it has: {', '.join(models) or 'none'}")
    newest: dict[tuple[str, str, int], dict[str, Any]] = {}
    for _, data in records:
        key = (str(data.get("subset") or ""), str(data["task_id"]), int(data.get("turn") or 1))
        if key not in newest or str(data.get("created") or "") >= str(newest[key].get("created") or ""):
            newest[key] = data
    out: list[Exported] = []
    left_out: list[str] = []
    for (subset, task_id, turn), data in sorted(newest.items()):
        code = data.get("code")
        if data.get("status") != "ok" or not isinstance(code, str):
            left_out.append(f"{subset}/{task_id} turn {turn} ({data.get('status')})")
            continue
        out.append(Exported(subset, task_id, turn, code))
    return out, left_out


def cmd_export(args: argparse.Namespace) -> int:
    if (args.results is None) == (args.cache is None):
        raise UsageError("answers export: give a results file (RUN.json) or --cache DIR, not both")
    if args.results is not None:
        if args.model is not None:
            raise UsageError("answers export: --model selects answers of the cache; a results file holds one run's")
        answers, left_out = from_results(read_document(args.results), args.sample)
        source = str(args.results)
    else:
        answers, left_out = from_cache(args.cache, args.model, args.sample)
        source = f"the cache {args.cache}"
    if not answers:
        raise UsageError(f"answers export: {source} holds no answer to export"
                         + (f" ({len(left_out)} task turn(s) without one)" if left_out else ""))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("w", encoding="utf-8") as fh:
        for answer in answers:
            fh.write(answer.line() + "\n")
    print(f"wrote {len(answers)} answer(s) from {source} to {args.output}", file=sys.stderr)
    if left_out:
        shown = ", ".join(left_out[:10]) + (" ..." if len(left_out) > 10 else "")
        print(f"left out {len(left_out)} task turn(s) without an answer (scored as not generated): {shown}",
              file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("answers", help="answers files: export the answers of a run or of the answer cache")
    inner = p.add_subparsers(dest="answers_command", metavar="ACTION", required=True)
    e = inner.add_parser(
        "export",
        help="write the exact answers of a run (RUN.json) or of the cache (--cache DIR) as an answers file",
        description="Write an answers file (JSON Lines: subset, task_id, turn, answer) that "
                    "pytest --plsql-answers FILE scores again.",
    )
    e.add_argument("results", nargs="?", type=Path, help="a results file written by --plsql-results")
    e.add_argument("--cache", type=Path, help="an answer cache folder (--plsql-cache; default .plsql_cache)")
    e.add_argument("--model",
                   help="with --cache: the model whose answers to export (a litellm model string or an alias)")
    e.add_argument("--sample", type=int, default=0, help="which sample of each task turn (0-based; default 0)")
    e.add_argument("-o", "--output", type=Path, required=True, help="the answers file to write (.jsonl)")
    e.set_defaults(func=cmd_export)

"""What the generation hook returns, and the two built-in answer sources.

``reference`` answers come from the task itself; ``--plsql-answers FILE`` reads
``{"task_id", "turn", "answer"}`` lines so anyone can score answers produced elsewhere.
Real model calls live in :mod:`pytest_plsqlbench.generation`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .errors import UsageError

#: ``ok``            -- ``code`` holds the answer to evaluate (possibly empty: a model failure).
#: ``not_generated`` -- no answer exists (cache-only run, answers file without the task).
#: ``error``         -- the provider failed after retries: an infrastructure error.
AnswerStatus = Literal["ok", "not_generated", "error"]


@dataclass(frozen=True)
class Exchange:
    """One earlier turn of a conversation: the user's request and the answer given."""

    prompt: str
    answer: str


@dataclass(frozen=True)
class Answer:
    """An answer for one task turn, with where it came from and what it cost."""

    code: str | None
    status: AnswerStatus = "ok"
    #: The model's reply before code extraction (kept for audits).
    raw: str | None = None
    #: Why there is no usable answer (``not_generated``/``error``).
    error: str | None = None
    #: ``reference``, ``answers-file``, ``model``, ``cache`` ...
    source: str = ""
    cache_key: str | None = None
    #: ``prompt_tokens``, ``completion_tokens``, ``cost_usd``, ``latency_s`` where known.
    usage: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def missing(cls, why: str, source: str = "") -> Answer:
        return cls(code=None, status="not_generated", error=why, source=source)


class AnswersFile:
    """Answers read from JSON Lines ``{"task_id", "turn", "answer"}``.

    ``turn`` is optional for single-turn tasks (defaults to 1). An optional ``subset`` field
    disambiguates ids that occur in several subsets. Lines are validated up front so a bad
    file fails the run once, naming file and line, instead of failing tasks one by one.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._by_key: dict[tuple[str | None, str, int], str] = {}
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise UsageError(f"--plsql-answers: cannot read {path}: {exc.strerror}") from exc
        first_line: dict[tuple[str | None, str, int], int] = {}
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{where}: not valid JSON ({exc.msg})") from exc
            if not isinstance(rec, dict) or not isinstance(rec.get("task_id"), str):
                raise UsageError(f"{where}: expected an object with a string 'task_id'")
            answer = rec.get("answer")
            if not isinstance(answer, str):
                raise UsageError(f"{where}: 'answer' must be a string")
            turn = rec.get("turn", 1)
            if type(turn) is not int or turn < 1:  # bool is an int subclass: not a turn
                raise UsageError(f"{where}: 'turn' must be a positive integer")
            subset = rec.get("subset")
            key = (subset, rec["task_id"], turn)
            if key in first_line:
                raise UsageError(f"{where}: a second answer for {rec['task_id']} turn {turn} (first at line {first_line[key]})")
            first_line[key] = lineno
            self._by_key[key] = answer  # NUL bytes are kept: the runner scores them
        if not self._by_key:
            # Every task would be scored "not generated": a run of zeros, not the intent.
            raise UsageError(f"--plsql-answers: {path} holds no answers (an empty file?)")

    def get(self, subset: str, task_id: str, turn: int) -> str | None:
        for key in ((subset, task_id, turn), (None, task_id, turn)):
            if key in self._by_key:
                return self._by_key[key]
        return None

    def keys(self) -> list[tuple[str | None, str, int]]:
        """``(subset or None, task id, turn)`` of every entry, in file order."""
        return list(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

"""The Solver's nine actions (ProcArena Table 2): one JSON tool schema, and their execution.

The schema is OpenAI's function-calling shape; litellm translates it for each provider.
Environment tools run as the candidate role against a scratch copy of the task's initial state:
the episode opens a task scope of its own (PostgreSQL: on a server started from a pristine copy of
the task's database, a new one at ``reset_scratch``; Oracle: the ProcArena restore), so nothing the Solver does
outlives the episode, and gold, the calls and the judge are never in reach -- gold's states
are computed in another scope, after the episode. Results are cut to ``limit`` characters
(``--plsql-tool-output``, default :data:`OUTPUT_LIMIT`). A malformed or unknown action is
charged and answered with an error message, never run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ... import outcomes
from ...dialects.base import Backend
from ...tasks import Task
from ..describe import Table, describe, tables_of
from ..dialects import adapter_for
from ..judge import access_for
from ..spec import HOLDERS

OUTPUT_LIMIT = 4000
SAMPLE_DEFAULT = 5
SAMPLE_MAX = 50

ENVIRONMENT = ("get_schema", "describe_table", "sample_rows", "execute_scratch", "compile_plsql", "reset_scratch")
USER = ("ask_user", "ask_selector")
NAMES = (*ENVIRONMENT, *USER, "submit")


def _fn(name: str, description: str, properties: Mapping[str, Any] | None = None,
        required: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": dict(properties or {}), "required": list(required)},
    }}


_STR = {"type": "string"}
SCHEMA: tuple[dict[str, Any], ...] = (
    _fn("get_schema", "The database description: tables, columns, types, keys, a few values."),
    _fn("describe_table", "One table's columns, types, keys and a few values.",
        {"table": {**_STR, "description": "table name"}}, ["table"]),
    _fn("sample_rows", "Some rows of a table from the scratch copy.",
        {"table": _STR, "limit": {"type": "integer", "description": f"rows, 1-{SAMPLE_MAX} (default {SAMPLE_DEFAULT})"}},
        ["table"]),
    _fn("execute_scratch", "Run SQL or PL/SQL against a private scratch copy of the database; its effects stay "
        "until reset_scratch. Returns rows or the error.", {"sql": _STR}, ["sql"]),
    _fn("compile_plsql", "Compile code (e.g. CREATE OR REPLACE PROCEDURE ...) in the scratch copy and undo it; "
        "returns 'compiled' or the error.", {"code": _STR}, ["code"]),
    _fn("reset_scratch", "Restore the scratch copy to the task's initial state."),
    _fn("ask_user", "Ask the user a question about the requirement.", {"question": _STR}, ["question"]),
    _fn("ask_selector", "Ask the user which of several interpretations is meant; returns the 0-based index of "
        "the option the user confirms, or -1. 'holder' chooses who answers: 'requirement' (what the request "
        "left out or contradicts) or 'knowledge' (what its domain terms mean); without it, both.",
        {"question": _STR, "options": {"type": "array", "items": _STR},
         "holder": {**_STR, "enum": list(HOLDERS)}}, ["question", "options"]),
    _fn("submit", "Submit the final stored procedure (CREATE OR REPLACE PROCEDURE ...). Ends the episode; "
        "there is no feedback.", {"answer": _STR}, ["answer"]),
)
SUBMIT_ONLY = tuple(t for t in SCHEMA if t["function"]["name"] == "submit")


class Malformed(Exception):
    """An action the protocol cannot run (unknown name, bad arguments): charged, answered."""


def parse_arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if raw in (None, ""):
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as exc:
        raise Malformed(f"arguments are not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise Malformed("arguments must be a JSON object")
    if _has_lone_surrogate(value):
        # JSON's \ud800 escapes decode to text no database or file can take.
        raise Malformed("arguments hold text that is not valid Unicode (a lone surrogate)")
    return value


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    return False


def check(name: str, args: Mapping[str, Any]) -> None:
    """Raise :class:`Malformed` unless ``name(args)`` fits the schema."""
    spec = next((t["function"] for t in SCHEMA if t["function"]["name"] == name), None)
    if spec is None:
        raise Malformed(f"unknown action {name!r}; the actions are {', '.join(NAMES)}")
    params = spec["parameters"]
    for key in params["required"]:
        if key not in args:
            raise Malformed(f"{name} needs argument {key!r}")
    for key, value in args.items():
        want = params["properties"].get(key)
        if want is None:
            raise Malformed(f"{name} has no argument {key!r}")
        kind = want["type"]
        if "enum" in want and value not in want["enum"]:
            raise Malformed(f"{name}: argument {key!r} must be one of {', '.join(want['enum'])}")
        ok = (isinstance(value, str) and bool(value.strip()) if kind == "string" else
              isinstance(value, int) and not isinstance(value, bool) if kind == "integer" else
              isinstance(value, list) and len(value) >= 2 and all(isinstance(v, str) for v in value))
        if not ok:
            what = {"string": "a non-empty string", "integer": "an integer", "array": "a list of at least two strings"}
            raise Malformed(f"{name}: argument {key!r} must be {what[kind]}")


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... [truncated: {len(text) - limit} more characters]"


@dataclass
class Environment:
    """The database side of an episode: a scratch copy of the task's initial state.

    Wall time: the episode's actions share ``time_budget`` seconds (``--plsql-task-timeout``;
    0: none); an action gets ``share`` seconds of it (set by the episode from the action's price)
    and is stopped there, its result an error -- the Solver's failure, as a test past its time is
    the answer's. Statements also keep their own ``--plsql-timeout``.
    """

    backend: Backend
    task: Task
    limit: int = OUTPUT_LIMIT
    time_budget: float = 0.0

    def __post_init__(self) -> None:
        fixture = self.task.fixtures[0]
        self.tables: list[Table] = tables_of(fixture.script, self.task.dialect)
        self.access = access_for(self.backend, self.task)
        self.open = False
        #: Seconds the Solver's actions have run in the database, and the current action's share.
        self.spent_s = 0.0
        self.share: float | None = None

    def time_left(self) -> float | None:
        """Seconds left of the episode's time budget (None: no budget)."""
        return self.time_budget - self.spent_s if self.time_budget > 0 else None

    # ------------------------------------------------------------------ scope
    def start(self) -> None:
        self.backend.ensure_fixtures(self.task.fixtures)
        self.access.prepare()
        self.access.hold()
        self.access.restore()
        self._begin()

    def _begin(self) -> None:
        # PostgreSQL: a fresh copy of the task's pristine database (reset_scratch too), on a
        # server no other run touched; Oracle: the restored schema.
        self.access.fresh_scope()
        self.backend.session().begin_task()
        self.access.begin()
        self.open = True

    def _end(self) -> None:
        if self.open:
            self.open = False
            try:
                self.backend.session().end_task()
            finally:
                self.access.restore()

    def close(self) -> None:
        try:
            self._end()
        finally:
            self.access.release()

    # ------------------------------------------------------------------ tools
    def table(self, name: str) -> Table:
        want = name.strip().strip('"').lower()
        for t in self.tables:
            full = t.name.lower().replace('"', "")
            if want in (full, full.rsplit(".", 1)[-1]):
                return t
        known = ", ".join(t.name.rsplit(".", 1)[-1] for t in self.tables)
        raise Malformed(f"no table {name!r} in this database (tables: {known})")

    def call(self, name: str, arguments: dict[str, Any], share: float | None = None) -> str:
        """The observation of one environment action (the core's ``EpisodeTools``); raises only
        :class:`Malformed` for the Solver's mistakes. ``share``: the action's seconds at most."""
        self.share = share
        try:
            text = getattr(self, "_" + name)(**arguments)
        finally:
            self.share = None
        return clip(text, self.limit)

    def _run(self, script: str, *, isolated: bool, phase: Any) -> tuple[Any, str | None]:
        """Run the Solver's script within its share of the time budget (the session's deadline
        stops the statement running at it and starts no later one); the execution, and the
        error the Solver reads if the script ran past its share."""
        session = self.backend.session()
        allowed = [t for t in (self.share, self.time_left()) if t is not None]
        limit = max(min(allowed), 0.0) if allowed else None
        t0 = time.monotonic()
        session.deadline = t0 + limit if limit is not None else None
        try:
            done = session.run(script, isolated=isolated, phase=phase)
        finally:
            session.deadline = None
            took = time.monotonic() - t0
            self.spent_s += took
        if limit is not None and done.error is not None and done.error.failure_class == outcomes.TIMEOUT \
                and took >= limit - 1.5:
            return done, (f"error: the action ran past its share of the episode's time ({limit:.1f}s of "
                          "--plsql-task-timeout) and was stopped")
        return done, None

    def _get_schema(self) -> str:
        return describe(self.tables, self.task.dialect)

    def _describe_table(self, table: str) -> str:
        return describe([self.table(table)], self.task.dialect)

    def _sample_rows(self, table: str, limit: int = SAMPLE_DEFAULT) -> str:
        t = self.table(table)
        n = max(1, min(int(limit), SAMPLE_MAX))
        tail = adapter_for(self.task.dialect).row_limit(n)
        done, overran = self._run(f"SELECT * FROM {t.name} ORDER BY 1 {tail}", isolated=True, phase="test")
        if done.error is not None:
            return overran or f"error: {done.error.short()}"
        head = " | ".join(c.name for c in t.columns)
        return "\n".join([head, *done.lines]) if head else "\n".join(done.lines)

    def _execute_scratch(self, sql: str) -> str:
        done, overran = self._run(sql, isolated=False, phase="test")
        lines = list(done.lines)
        if done.notes:
            lines += [f"note: {n}" for n in done.notes]
        if done.error is not None:
            lines.append(overran or f"error: {done.error.short()}")
        return "\n".join(lines) or "ok"

    def _compile_plsql(self, code: str) -> str:
        done, overran = self._run(code, isolated=True, phase="install")
        if done.error is not None:
            return overran or f"error: {done.error.short()}"
        return "compiled"

    def _reset_scratch(self) -> str:
        self._end()
        self._begin()
        return "the scratch copy is back to the task's initial state"

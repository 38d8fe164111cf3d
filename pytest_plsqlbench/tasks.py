"""The task model every loader produces and every other part consumes.

A task is dialect-specific: the smoke subset ships each task in both dialects and the
loader picks the one asked for, the MBPP converter emits one task per dialect, and so on.
Everything here is immutable and made of plain values, so tasks can be cached as JSON,
compared, and shipped between processes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from .kinds import check_builtin

#: How a unit test is decided: the name of a judge (:mod:`pytest_plsqlbench.judges`). Built in:
#: ``assert``    -- the script runs without raising (MBPP assertion blocks).
#: ``output``    -- captured output lines equal ``expected``.
#: ``rows``      -- captured output lines equal the gold result rows, up to a bounded set of
#:                  column permutations (Spider-PLSQL); the rows are ``expected``, or the
#:                  result of ``options["gold_sql"]`` run in the worker's database first.
#: ``reference`` -- captured output equals the output the reference answer produced for the
#:                  same script in a clean state (Spider2-ST/MT); ``expected`` is filled in at
#:                  run time.
#: Plugins add kinds with the ``pytest_plsql_judges`` hook; a kind no judge knows is refused
#: when the run collects its items.
TestKind = str

#: ``install`` -- the answer creates program units once per turn; tests call them.
#: ``execute`` -- the answer *is* the program (an anonymous block); a test with
#:                ``script=None`` runs it and captures what it prints (Spider-PLSQL).
AnswerMode = Literal["install", "execute"]

_SAFE_ID = re.compile(r"[^A-Za-z0-9_.+\-]+")


@functools.lru_cache(maxsize=4096)  # every item's record asks for its task's
def safe_id(text: str) -> str:
    """A node-id-safe spelling of a dataset id (``Mbpp/2`` -> ``Mbpp-2``)."""
    return _SAFE_ID.sub("-", text).strip("-") or "_"


@dataclass(frozen=True)
class Fixture:
    """Database state a task needs, loaded once per worker and shared read-only.

    ``key`` identifies the state (two tasks naming the same key get one load); ``script`` is
    the dialect script that creates it, run by the harness's owner role, never by an answer.
    """

    key: str
    script: str
    description: str = ""
    #: The file the script was read from (empty when built in memory): a load error names it.
    source: str = ""

    def load_error(self, line: int | None, message: str) -> str:
        """A load error as a user fixes it: ``file:line`` of the script (or the fixture's name
        and script line when built in memory) and the database's message, not the hashed key."""
        name = self.description or self.key
        if self.source:
            return f"{self.source}:{line or 1}: fixture {name!r} failed to load: {message}"
        at = f" at script line {line}" if line else ""
        return f"fixture {name!r} failed to load{at}: {message}"


@dataclass(frozen=True)
class UnitTest:
    """One executable check of one turn; each becomes one pytest item."""

    id: str
    kind: TestKind
    #: Dialect script to run; ``None`` runs the answer itself (``answer_mode="execute"``).
    script: str | None
    #: Expected output lines (``output``/``rows``); ``None`` for ``assert``/``reference``.
    expected: tuple[str, ...] | None = None
    #: Comparator options, e.g. ``{"ordered": False}`` for unordered gold rows.
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind.strip():
            raise ValueError(f"unit test {self.id!r}: kind must be a non-empty name, not {self.kind!r}")
        check_builtin(self)  # other kinds are checked against the run's judges at collection
        if self.expected is not None and not isinstance(self.expected, tuple):
            object.__setattr__(self, "expected", tuple(self.expected))


@dataclass(frozen=True)
class Turn:
    """One user request of a task; single-turn tasks have exactly one."""

    index: int  # 1-based
    prompt: str
    tests: tuple[UnitTest, ...]
    reference: str | None = None
    #: The dataset's own id for this turn (Spider2-MT ``instance_id``), for reports.
    source_id: str | None = None


@dataclass(frozen=True)
class Task:
    """A benchmark task in one dialect: prompts, reference answers and unit tests."""

    id: str
    subset: str
    #: A registered dialect's name (``Dialect.name``; checked where the run chooses it, not here).
    dialect: str
    turns: tuple[Turn, ...]
    entry_points: tuple[str, ...] = ()
    #: State loaded once per worker before the task runs (schemas, collection types).
    fixtures: tuple[Fixture, ...] = ()
    #: Schema DDL shown to the model for schema-grounded tasks.
    schema_ddl: str | None = None
    answer_mode: AnswerMode = "install"
    #: Extra pytest markers (``difficulty_advanced``, ``reasoning_aggregation`` ...).
    markers: tuple[str, ...] = ()
    #: Free-form facts for reports (difficulty, db_id, reasoning types, source ids ...).
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: Why the data at hand cannot run the task (None: it can). Its items are collected, then
    #: skipped with that reason (never asked for an answer, never scored); the results file
    #: keeps it as ``metadata.not_runnable``.
    not_runnable: str | None = None
    #: Whether the answers can be generated before the run, away from the database (False: the
    #: worker plays them against its database between turns, e.g. with tools, so they are
    #: never prefetched).
    prefetch: bool = True

    def __post_init__(self) -> None:
        if not self.dialect:
            raise ValueError(f"task {self.id!r}: has no dialect")
        if not self.turns:
            raise ValueError(f"task {self.id!r}: has no turns")
        if self.answer_mode not in ("install", "execute"):
            raise ValueError(f"task {self.id!r}: answer_mode must be 'install' or 'execute', not {self.answer_mode!r}")
        for want, turn in enumerate(self.turns, 1):
            if turn.index != want:
                raise ValueError(f"task {self.id!r}: turn {turn.index} out of order")
            if not turn.tests:
                raise ValueError(f"task {self.id!r}: turn {turn.index} has no unit tests")
            ids = [t.id for t in turn.tests]
            if len(set(ids)) != len(ids):
                raise ValueError(f"task {self.id!r}: duplicate unit test ids in turn {turn.index}")

    @property
    def multi_turn(self) -> bool:
        return len(self.turns) > 1

    @property
    def node_name(self) -> str:
        return safe_id(self.id)

    @property
    def n_tests(self) -> int:
        return sum(len(t.tests) for t in self.turns)


# --------------------------------------------------------------------------- JSON round trip
# Loaders that convert data (MBPP, MBPP+) cache their output as JSON Lines of these dicts.


def task_to_dict(task: Task) -> dict[str, Any]:
    """The task as JSON values; ``not_runnable`` and ``prefetch`` only when not their defaults,
    so a converted file written before they were fields reads the same."""

    def conv(obj: Any) -> Any:
        if hasattr(obj, "__dataclass_fields__"):
            return {f.name: conv(getattr(obj, f.name)) for f in fields(obj)}
        if isinstance(obj, (tuple, list)):
            return [conv(x) for x in obj]
        if isinstance(obj, Mapping):
            return {k: conv(v) for k, v in obj.items()}
        return obj

    data: dict[str, Any] = conv(task)
    for name, default in (("not_runnable", None), ("prefetch", True)):
        if data[name] == default:
            del data[name]
    return data


def task_from_dict(data: Mapping[str, Any]) -> Task:
    """Inverse of :func:`task_to_dict`; raises ``ValueError``/``KeyError`` on bad input."""
    turns = tuple(
        Turn(
            index=t["index"],
            prompt=t["prompt"],
            reference=t.get("reference"),
            source_id=t.get("source_id"),
            tests=tuple(
                UnitTest(
                    id=u["id"],
                    kind=u["kind"],
                    script=u.get("script"),
                    expected=None if u.get("expected") is None else tuple(u["expected"]),
                    options=dict(u.get("options") or {}),
                )
                for u in t["tests"]
            ),
        )
        for t in data["turns"]
    )
    return Task(
        id=data["id"],
        subset=data["subset"],
        dialect=data["dialect"],
        turns=turns,
        entry_points=tuple(data.get("entry_points") or ()),
        fixtures=tuple(Fixture(**f) for f in data.get("fixtures") or ()),
        schema_ddl=data.get("schema_ddl"),
        answer_mode=data.get("answer_mode", "install"),
        markers=tuple(data.get("markers") or ()),
        metadata=dict(data.get("metadata") or {}),
        not_runnable=data.get("not_runnable"),
        prefetch=bool(data.get("prefetch", True)),
    )

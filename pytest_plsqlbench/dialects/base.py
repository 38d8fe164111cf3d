"""The one interface both dialects implement.

A :class:`Backend` owns a database for one worker (an embedded server, a container, or a
schema/database inside a server given by DSN) and loads the fixtures tasks need. Its
:class:`Session` is the candidate's connection: an unprivileged role that installs answers
and runs tests inside the isolation scope the session guarantees.
"""

from __future__ import annotations

import abc
import threading
from dataclasses import dataclass, field
from typing import Literal, Sequence

from ..tasks import Fixture

Phase = Literal["install", "test", "reference"]


@dataclass(frozen=True)
class DbError:
    """A database error, already classified into a failure class (see outcomes)."""

    message: str
    code: str | None
    failure_class: str
    #: Line of the script where the failing statement starts.
    line: int | None = None

    def short(self) -> str:
        code = f"[{self.code}] " if self.code else ""
        where = f" (script line {self.line})" if self.line else ""
        first = self.message.strip().splitlines()[0] if self.message.strip() else "error"
        return f"{code}{first}{where}"


@dataclass
class Execution:
    """What running one script produced: output lines in order, and the first error."""

    lines: list[str] = field(default_factory=list)
    error: DbError | None = None
    truncated: bool = False
    duration_s: float = 0.0
    #: Harness notes (skipped client commands, neutralised transaction control ...).
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


class OutputCapture:
    """What one script printed, capped at ``limit`` characters: the rest is dropped, marked once.

    Both dialects capture through it, so a flood of output costs the harness the cap, not memory.
    """

    def __init__(self, limit: int, lines: list[str] | None = None) -> None:
        self.limit = limit
        self.lines: list[str] = lines if lines is not None else []
        self.chars = 0
        self.truncated = False

    def append(self, line: str) -> None:
        if self.truncated:
            return
        if self.chars + len(line) > self.limit:
            self.lines.append(line[: max(0, self.limit - self.chars)])
            self.lines.append(f"<output truncated at {self.limit} characters>")
            self.truncated = True
            return
        self.chars += len(line) + 1
        self.lines.append(line)


class Session(abc.ABC):
    """The candidate's connection.

    Guarantee: between :meth:`begin_task` and :meth:`end_task` everything an answer or a test
    does is invisible to the next task (rolled back, or found and dropped where DDL commits);
    a script run with ``isolated=True`` leaves nothing for the next script either.
    """

    #: Bumped whenever the session had to start its task scope over (its connection died under
    #: an answer), losing what was installed; the runner then installs the answers again.
    scope_epoch: int = 0

    @abc.abstractmethod
    def begin_task(self) -> None: ...

    @abc.abstractmethod
    def end_task(self) -> None: ...

    @abc.abstractmethod
    def run(self, script: str, *, isolated: bool, phase: Phase) -> Execution:
        """Run ``script`` statement by statement, stopping at the first error.

        ``isolated=False`` keeps the effects until :meth:`end_task` (installing an answer;
        if it fails, its partial effects are undone). Raises
        :class:`~pytest_plsqlbench.errors.InfrastructureError` when the database itself fails.
        """


class Backend(abc.ABC):
    """A database for one worker."""

    dialect: str = ""

    def __init__(self) -> None:
        self._loaded: list[Fixture] = []
        self._lock = threading.Lock()

    @abc.abstractmethod
    def start(self) -> None: ...

    @abc.abstractmethod
    def stop(self) -> None: ...

    @property
    @abc.abstractmethod
    def version(self) -> str:
        """Server version for the report header (e.g. ``PostgreSQL 18.6``)."""

    def ensure_fixtures(self, fixtures: Sequence[Fixture]) -> None:
        """Load each fixture once for this worker (in order); raise InfrastructureError on failure."""
        with self._lock:
            loaded = {f.key for f in self._loaded}
            for fixture in fixtures:
                if fixture.key in loaded:
                    continue
                self._load(fixture)
                self._loaded.append(fixture)
                loaded.add(fixture.key)

    @abc.abstractmethod
    def _load(self, fixture: Fixture) -> None:
        """Load one fixture into this worker's database (called once per fixture key)."""

    def allow_writes(self, schemas: Sequence[str]) -> None:
        """Let the candidate change rows of these fixture schemas' tables (ProcArena procedures
        write). The caller undoes the writes: rollback (PostgreSQL) or a restore (Oracle)."""
        raise NotImplementedError(f"the {self.dialect or type(self).__name__} backend cannot grant writes")

    @abc.abstractmethod
    def session(self) -> Session:
        """The candidate session (created on first use, reused afterwards)."""

    @abc.abstractmethod
    def recover(self) -> None:
        """After an infrastructure error: bring the database and the session back, or raise."""

    def __enter__(self) -> "Backend":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

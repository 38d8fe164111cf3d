"""The contracts between the core and its plug-ins: what a dialect, its backend and session, a
judge and a benchmark family must offer, as typed Protocols (docs/redesign.md section 3).

The core types against the Protocols, so a plug-in may implement them from scratch; the values
that cross the boundary (:class:`Execution`, :class:`DbError` ...) and the abstract bases with
their defaults (:class:`BackendBase`, :class:`SessionBase`: what the built-in dialects subclass)
live here too. :mod:`pytest_plsqlbench.dialects.base` re-exports the old names for one release.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from .errors import FixtureError
from .lexicon import Lexicon, SafetyRules
from .tasks import Fixture

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from .families import Column, Leaderboard, SubsetInput
    from .judges import JudgeContext
    from .metrics import TaskScores
    from .outcomes import Verdict
    from .results.record import TaskResult
    from .settings import DatabaseSettings, Settings
    from .tasks import Turn, UnitTest

Phase = Literal["install", "test", "reference"]
#: Bind parameters of a harness statement: positional, or by name.
Params = Sequence[Any] | Mapping[str, Any]


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
    #: Indexes into ``lines`` of the rows a query returned (the rest was printed: DBMS_OUTPUT,
    #: RAISE NOTICE, or a harness marker). A printed value is not a returned one: judges that
    #: must tell them apart read this. None: the session does not say (a dialect plugin's), and
    #: judges compare all lines alike.
    row_lines: list[int] | None = None
    error: DbError | None = None
    truncated: bool = False
    duration_s: float = 0.0
    #: Harness notes (skipped client commands, neutralised transaction control ...).
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class BatchResult:
    """One test's result from :meth:`Session.run_batch`: its error (None: it passed)."""

    error: DbError | None
    duration_s: float = 0.0


class OutputCapture:
    """What one script printed, capped at ``limit`` characters: the rest is dropped, marked once.

    Both dialects capture through it, so a flood of output costs the harness the cap, not memory.
    """

    def __init__(self, limit: int, lines: list[str] | None = None, rows: list[int] | None = None) -> None:
        self.limit = limit
        self.lines: list[str] = lines if lines is not None else []
        #: Indexes of the lines that are rows of a query result (:meth:`append_row`).
        self.rows: list[int] = rows if rows is not None else []
        self.chars = 0
        self.truncated = False

    @classmethod
    def into(cls, execution: Execution, limit: int) -> OutputCapture:
        """A capture writing into ``execution``: its lines, and which of them are rows."""
        execution.row_lines = []
        return cls(limit, execution.lines, execution.row_lines)

    def append_row(self, line: str) -> None:
        """A row of a query's result (not something printed)."""
        if not self.truncated:
            self.rows.append(len(self.lines))
        self.append(line)

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

    def cut(self, marker: str) -> None:
        """Stop capturing for another cap (a row count), saying so once."""
        if not self.truncated:
            self.lines.append(marker)
            self.truncated = True


class SharedStep:
    """One step workers sharing a database do once (shadow tables, a fixture load), held by
    :meth:`Backend.shared_once` for the duration of its block."""

    def __init__(self, done: bool = False, mark: Callable[[], None] | None = None) -> None:
        #: Another worker (or an earlier run) already did it.
        self.done = done
        self._mark = mark

    def mark_done(self) -> None:
        """Record the step as done for every worker sharing the database."""
        if self._mark is not None:
            self._mark()
        self.done = True


class SessionBase(abc.ABC):
    """The candidate's connection.

    Guarantee: between :meth:`begin_task` and :meth:`end_task` everything an answer or a test
    does is invisible to the next task (rolled back, or found and dropped where DDL commits);
    a script run with ``isolated=True`` leaves nothing for the next script either.
    """

    #: Bumped whenever the session had to start its task scope over (its connection died under
    #: an answer), losing what was installed; the runner then installs the answers again.
    scope_epoch: int = 0
    #: ``time.monotonic()`` by which the current task's answer must be done (its time budget,
    #: set by the runner around each test); a statement is not started past it and is cut at it.
    deadline: float | None = None

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

    def before_assert_tests(self) -> DbError | None:
        """After an answer installed, before ``assert`` tests run against it: keep the database
        from running the answer where it could read the test that calls it (expected values and
        all). An error: the answer cannot be tested fairly (the runner fails its turn). The
        default: nothing (a dialect where running code cannot read the statement calling it).
        """
        return None

    def run_batch(self, scripts: Sequence[str]) -> list[BatchResult | None] | None:
        """Optionally run several isolated ``assert`` test scripts in one round trip.

        Returns one entry per script: its :class:`BatchResult`, or None where the result is not
        certain to be what :meth:`run` (``isolated=True``, phase ``test``) would give -- the
        caller then runs that script through :meth:`run`. None for the whole batch when it was
        discarded (nothing it did remains). The default: no batches.
        """
        return None

    # ----------------------------------------------------------------- harness statements
    # What a family's judges run on the candidate's connection besides the answer's scripts
    # (ProcArena's search path and synonyms, B2's session settings, state snapshots). A dialect
    # that runs no such family may leave them unimplemented.
    def harness_sql(self, text: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """A judge's own statement (not the answer's) in this session and scope: rows; errors InfrastructureError."""
        raise NotImplementedError(f"{type(self).__name__} runs no harness statements")

    def pin_setting(self, statement: str) -> None:
        """A judge's setting (a search path): run now and after each reset of pinned settings until end_task."""
        raise NotImplementedError(f"{type(self).__name__} cannot pin a setting")

    def reconnect(self) -> None:
        """A fresh connection for the same role: a measured run must not inherit session state."""
        raise NotImplementedError(f"{type(self).__name__} cannot reconnect")

    @property
    def server_session_id(self) -> int:
        """The server's id of this session: to read its statistics from the admin's connection."""
        raise NotImplementedError(f"{type(self).__name__} has no server session id")

    @property
    def connection(self) -> Any:
        """The DB-API connection, for a family's per-dialect adapter reading state in bulk; never core's."""
        raise NotImplementedError(f"{type(self).__name__} exposes no connection")


class BackendBase(abc.ABC):
    """A database for one worker.

    Besides the abstract lifecycle, a backend offers a family's judges the harness members below
    (``admin_sql`` ...), and its session the call-backs after them; each has a harmless default or
    raises ``NotImplementedError``, so a dialect implements those its families and its own session
    use (Oracle: ``serial_of``, ``kill_session``, ``rebuild_candidate``, ``baseline_snapshot``;
    PostgreSQL: ``reset_scratch``, plus its ``candidate_dsn`` and ``limit_reset`` attributes).
    """

    dialect: str = ""
    #: The run's settings: sessions read the statement timeout and the output cap from them.
    settings: Settings

    def __init__(self) -> None:
        self._loaded: list[Fixture] = []
        self._failed: dict[str, FixtureError] = {}
        self._lock = threading.Lock()

    @abc.abstractmethod
    def start(self) -> None: ...

    @abc.abstractmethod
    def stop(self) -> None: ...

    @property
    @abc.abstractmethod
    def version(self) -> str:
        """Server version for the report header (e.g. ``PostgreSQL 18.6``)."""

    @property
    def judge_cache(self) -> dict[str, Any]:
        """A memo judges share across the tasks this worker runs (e.g. gold procedure states)."""
        cache = self.__dict__.get("_judge_cache")
        if cache is None:
            cache = self.__dict__["_judge_cache"] = {}
        return cache

    def ensure_fixtures(self, fixtures: Sequence[Fixture]) -> None:
        """Load each fixture once for this worker (in order); raise InfrastructureError on failure.

        A :class:`FixtureError` (the fixture's own statements fail) is remembered and raised
        again for every later task needing that fixture, without loading it again.
        """
        with self._lock:
            loaded = {f.key for f in self._loaded}
            for fixture in fixtures:
                if fixture.key in loaded:
                    continue
                if fixture.key in self._failed:
                    raise self._failed[fixture.key]
                try:
                    self._load(fixture)
                except FixtureError as exc:
                    log.warning("%s; the tasks needing it are errors", exc)
                    self._failed[fixture.key] = exc
                    raise
                self._loaded.append(fixture)
                loaded.add(fixture.key)

    @abc.abstractmethod
    def _load(self, fixture: Fixture) -> None:
        """Load one fixture into this worker's database (called once per fixture key)."""

    @property
    def loaded_fixtures(self) -> Sequence[str]:
        """Keys of the fixtures loaded so far, in order: a once-per-content step (shadows) keys on them."""
        return [f.key for f in self._loaded]

    def allow_writes(self, schemas: Sequence[str]) -> None:
        """Let the candidate change rows of these fixture schemas' tables (ProcArena procedures
        write). The caller undoes the writes: rollback (PostgreSQL) or a restore (Oracle)."""
        raise NotImplementedError(f"the {self.dialect or type(self).__name__} backend cannot grant writes")

    @abc.abstractmethod
    def session(self) -> SessionBase:
        """The candidate session (created on first use, reused afterwards)."""

    @abc.abstractmethod
    def recover(self) -> None:
        """After an infrastructure error: bring the database and the session back, or raise."""

    # ----------------------------------------------------------------- harness members
    # What a family's judges need beyond the lifecycle (ProcArena: shadow tables, restores, B2's
    # scaling); each raises NotImplementedError but ``shared_once``, whose default fits a backend
    # whose workers never share a database.
    @property
    def candidate_schema(self) -> str:
        """Where the answer's objects live: a judge tells them from the task's own tables."""
        raise NotImplementedError(f"{type(self).__name__} names no candidate schema")

    @property
    def candidate_role(self) -> str:
        """The unprivileged role the answer runs as: what a judge grants its helpers to."""
        raise NotImplementedError(f"{type(self).__name__} names no candidate role")

    def admin_sql(self, text: str, params: Params = (), *, ignore: Iterable[str] = ()) -> list[tuple[Any, ...]]:
        """A judge's statement as the owner, never in the candidate's session: rows; codes in ``ignore`` give []."""
        raise NotImplementedError(f"{type(self).__name__} runs no admin statements")

    def admin_commit(self) -> None:
        """Commit the owner connection's work: a restore must outlast the candidate's scope."""
        raise NotImplementedError(f"{type(self).__name__} runs no admin statements")

    @contextlib.contextmanager
    def shared_once(self, key: str) -> Iterator[SharedStep]:
        """Serialise step ``key`` across workers sharing the database; default: never done, locks nothing."""
        yield SharedStep()

    # ----------------------------------------------------------------- session call-backs
    def serial_of(self, sid: int) -> int:
        """The server's serial number of session ``sid`` (with the sid it names one session); 0 if unknown."""
        return 0

    def kill_session(self, sid: int, serial: int) -> None:
        """End a candidate session that ran past the timeout, from the harness's own connection."""
        raise NotImplementedError(f"{type(self).__name__} cannot end sessions")

    def rebuild_candidate(self) -> None:
        """Janitor of last resort: return the candidate's schema to the state fixtures left it in."""
        raise NotImplementedError(f"{type(self).__name__} cannot rebuild the candidate schema")

    def reset_scratch(self) -> None:
        """Janitor of last resort where the candidate works in a scratch schema: empty it."""
        raise NotImplementedError(f"{type(self).__name__} has no scratch schema")

    def baseline_snapshot(self, session: SessionBase) -> Any:
        """What the candidate's schema holds after the fixtures (the janitor restores to it)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no baseline snapshot")

    def __enter__(self) -> BackendBase:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --------------------------------------------------------------------------- the protocols


@runtime_checkable
class Session(Protocol):
    """The candidate's connection (what :class:`SessionBase` documents member by member).

    Guarantee: between ``begin_task`` and ``end_task`` everything an answer or a test does is
    invisible to the next task; a script run with ``isolated=True`` leaves nothing for the next
    script either.
    """

    #: Bumped when the session had to start its task scope over (the runner reinstalls).
    scope_epoch: int
    #: ``time.monotonic()`` by which the current task's answer must be done, or None.
    deadline: float | None

    def begin_task(self) -> None: ...

    def end_task(self) -> None: ...

    def run(self, script: str, *, isolated: bool, phase: Phase) -> Execution: ...

    def run_batch(self, scripts: Sequence[str]) -> list[BatchResult | None] | None: ...

    def before_assert_tests(self) -> DbError | None: ...

    def harness_sql(self, text: str, params: Params = ()) -> list[tuple[Any, ...]]: ...

    def pin_setting(self, statement: str) -> None: ...

    def reconnect(self) -> None: ...

    @property
    def server_session_id(self) -> int: ...

    @property
    def connection(self) -> Any: ...


class Backend(Protocol):
    """A database for one worker (what :class:`BackendBase` documents member by member).

    Guarantee: the candidate never owns the benchmark schemas. Not ``runtime_checkable``: on
    Python 3.11 ``isinstance`` reads every property, and a harness member a dialect leaves out
    raises NotImplementedError.
    """

    #: The registered Dialect's name (results header, ``Task.dialect``).
    dialect: str
    settings: Settings

    @property
    def version(self) -> str: ...

    @property
    def judge_cache(self) -> MutableMapping[str, Any]: ...

    @property
    def loaded_fixtures(self) -> Sequence[str]: ...

    @property
    def candidate_schema(self) -> str: ...

    @property
    def candidate_role(self) -> str: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def ensure_fixtures(self, fixtures: Sequence[Fixture]) -> None: ...

    def session(self) -> Session: ...

    def recover(self) -> None: ...

    def allow_writes(self, schemas: Sequence[str]) -> None: ...

    def admin_sql(self, text: str, params: Params = (), *, ignore: Iterable[str] = ()) -> list[tuple[Any, ...]]: ...

    def admin_commit(self) -> None: ...

    def shared_once(self, key: str) -> AbstractContextManager[SharedStep]: ...


@runtime_checkable
class Dialect(Protocol):
    """A SQL dialect the harness can run tasks in, registered through ``pytest_plsql_dialects``."""

    #: The ``--plsql-dialect`` value and ``Task.dialect`` ("postgres", "oracle").
    name: str
    #: Shown to people and models: "PostgreSQL (PL/pgSQL)".
    label: str
    #: ``--plsql-db`` values it supports; the first is the default when no DSN is given.
    kinds: tuple[str, ...]
    #: It runs right after ``pip install``: its first kind needs no server, Docker or DSN from the
    #: user (PostgreSQL's embedded server). The default dialect, when the user names none, is the
    #: first registered one that does (:meth:`Registry.default_dialect
    #: <pytest_plsqlbench.registry.Registry.default_dialect>`): a run works out of the box, and
    #: installing a dialect that needs a server does not move it there.
    runs_without_setup: bool
    #: The dialect's part of the generation system prompt.
    system_prompt: str
    #: How its client tool reads a script (the splitter, the safety check's lexer, extraction).
    lexicon: Lexicon
    #: What the safety pre-check must know of its namespaces.
    safety: SafetyRules

    def resolve_database(self, kind: str | None, dsn: str | None) -> tuple[str, str | None]:
        """``--plsql-db``/``--plsql-dsn`` as given (None: not given) -> the kind and DSN to use:
        the default kind, environment fallbacks, the DSN's syntax; UsageError when they cannot work."""
        ...

    def preflight(self, database: DatabaseSettings) -> None:
        """On the controller before any worker starts: UsageError when this database cannot be
        had here (driver missing, Docker not answering, DSN refused)."""
        ...

    def make_backend(self, settings: Settings, worker: str) -> BackendBase:
        """This worker's backend, not started. (A :class:`BackendBase` until the core and the
        families type against :class:`Backend`: ProcArena's adapters take the base today.)"""
        ...


class Judge(Protocol):
    """How a unit test of one ``kind`` is decided (:class:`pytest_plsqlbench.judges.Judge` is the
    base with the defaults)."""

    kind: ClassVar[str]
    mode: ClassVar[Literal["isolated", "cumulative"]]
    #: Order of :meth:`prepare` among the task's judges, lowest first (the base: 100; the
    #: reference capture 0, gold rows 10).
    prepare_order: ClassVar[int]
    #: The verdict depends only on whether the script raised: such tests may be batched, run
    #: ahead on a thread, and get ``Session.before_assert_tests`` after the install.
    error_only: ClassVar[bool]

    def validate(self, test: UnitTest) -> None: ...

    def needs_expectation(self, test: UnitTest) -> bool: ...

    def prepare(self, ctx: JudgeContext, tests: list[tuple[Turn, UnitTest]]) -> None: ...

    def execute(self, ctx: JudgeContext, turn: int, test: UnitTest, answer: str) -> Execution: ...

    def judge(self, ctx: JudgeContext, turn: int, test: UnitTest, execution: Execution) -> Verdict: ...

    def empty_answer_passes(self, ctx: JudgeContext, turn: int, test: UnitTest) -> bool | None: ...

    def finish(self, ctx: JudgeContext) -> None: ...


@runtime_checkable
class Family(Protocol):
    """A benchmark family: how its subsets are scored and shown, registered through
    ``pytest_plsql_families`` (:class:`pytest_plsqlbench.families.MetricFamily` is the base with
    the defaults)."""

    #: The manifest's ``metrics:`` value and the document's ``metric_family``.
    name: ClassVar[str]
    columns: ClassVar[tuple[Column, ...]]
    #: The paper's dialect and its label in the leaderboard's reasons (None: no paper figures).
    paper_dialect: ClassVar[tuple[str, str] | None]
    #: Figure keys computed from more than one results file: kept as stated by a reader.
    external_figures: ClassVar[frozenset[str]]
    #: The ``loader:`` names of its manifests: one without ``metrics:`` is this family's subset.
    loaders: ClassVar[frozenset[str]]
    #: Source kinds it names -> the core's kind each is (``manifests.SOURCE_KINDS``).
    sources: ClassVar[Mapping[str, str]]
    #: Its datasets on the leaderboard (splits, notes); None: its subsets are not ranked.
    leaderboard: ClassVar[Leaderboard | None]
    #: Titles of its own HTML charts by ``Column.chart`` key (the core titles ``scores``).
    charts: ClassVar[Mapping[str, str]]

    def task_figures(self, scores: TaskScores, task: TaskResult) -> dict[str, Any]: ...

    def subset_figures(self, data: SubsetInput) -> dict[str, Any]: ...

    def summary_lines(self, subsets: Mapping[str, Mapping[str, Any]], verbose: int = 0) -> list[str]: ...

    def document_figures(self, subsets: dict[str, dict[str, Any]], tasks: Sequence[Mapping[str, Any]]) -> None: ...

    def html_sections(self, document: Mapping[str, Any], subsets: Mapping[str, Mapping[str, Any]]) -> list[str]: ...

"""Command-line options, their ini twins, and the frozen settings they resolve to.

Every option ``--plsql-x`` has an ini key ``plsql_x`` with the same help text; the command
line wins over the ini file, which wins over the environment variable named in the table.
Options are resolved once, in ``pytest_configure``, into :class:`Settings`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pluggy
import pytest

from .errors import UsageError
from .registry import Registry, active, default_dialect_of

if TYPE_CHECKING:
    from .protocols import Dialect

DB_KINDS = ("embedded", "container", "dsn")
SAFETY_MODES = ("off", "warn", "block")
ASSERTION_MODES = ("null-safe", "published")


@dataclass(frozen=True)
class Opt:
    name: str  # without the leading "--plsql-"
    help: str
    default: Any = None
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    flag: bool = False
    env: str | None = None
    metavar: str | None = None
    many: bool = False  # repeatable option / linelist ini

    @property
    def dest(self) -> str:
        return "plsql_" + self.name.replace("-", "_")


OPTIONS: tuple[Opt, ...] = (
    # --- what to run and where
    Opt(
        "dialect",
        "Database dialect the tasks run in, one of the registered ones ('plsqlbench subsets' "
        "lists them). Default: the first registered dialect that runs without setup{default}, or "
        "the first dialect the chosen subsets share when they do not exist in that one.",
    ),
    Opt(
        "db",
        "How to get a database: an embedded PostgreSQL per worker (postgres default), a "
        "testcontainers container per worker (oracle default), or --plsql-dsn; a dialect plug-in "
        "names its own (checked against the dialect's kinds, not here).",
        None,
    ),
    Opt(
        "dsn",
        "Connection string of an existing server (postgresql://... or user/pass@host/service "
        "for Oracle); implies --plsql-db=dsn. The harness creates one schema/database per "
        "worker and drops it at the end.",
        env="PLSQL_DSN",
        metavar="URL",
    ),
    Opt(
        "timeout",
        "Seconds one statement of an answer or a test may run before it counts as a timeout.",
        10.0,
        type=float,
        metavar="SECONDS",
    ),
    Opt(
        "task-timeout",
        "Seconds one task's answer may spend in the database in all: its installs (and any "
        "reinstall after a lost session) and all of its tests. Once used up, the task's "
        "remaining tests fail as timeout without running. 0: no budget.",
        300.0,
        type=float,
        metavar="SECONDS",
    ),
    Opt(
        "no-lookahead",
        "Without xdist, run each task in the database only when pytest reaches it, instead of "
        "running the next task on a thread while this one's items report (same outcomes, slower; "
        "log lines then appear under the item that caused them).",
        flag=True,
    ),
    Opt(
        "missing",
        "Tasks an answers file (or, with --plsql-cache-only, the cache) has no answer for: "
        "'fail' scores them as failed (class not_generated); 'exclude' leaves them out of the "
        "metrics, and the run is marked not comparable.",
        "fail",
        choices=("fail", "exclude"),
    ),
    Opt(
        "max-output",
        "Characters of output (DBMS_OUTPUT / RAISE NOTICE / rows) kept per test; the rest is "
        "dropped and the test sees a truncation marker.",
        1_000_000,
        type=int,
        metavar="CHARS",
    ),
    Opt(
        "data",
        "Local copy of the PLSQLBench release (a clone of oracle-samples/plsqlbench). Without "
        "it the release is downloaded into the data cache on first use.",
        env="PLSQLBENCH_DATA",
        metavar="DIR",
    ),
    Opt(
        "source",
        "Local copy of another data source named in a subset manifest, as NAME=PATH "
        "(e.g. mbppplus=MbppPlus.jsonl). Repeatable.",
        many=True,
        metavar="NAME=PATH",
    ),
    Opt(
        "tasks",
        "Extra folder of subset manifests (YAML), e.g. your own tasks written like tasks/smoke. "
        "Repeatable.",
        many=True,
        metavar="DIR",
    ),
    Opt(
        "data-cache",
        "Where downloaded and converted benchmark data is cached.",
        env="PLSQLBENCH_CACHE",
        metavar="DIR",
    ),
    Opt(
        "assertions",
        "MBPP assertion style: null-safe comparisons (default) or the published PLSQLBench "
        "blocks as they are ('published', for comparability with the paper).",
        "null-safe",
        choices=ASSERTION_MODES,
    ),
    Opt("shard", "Run only shard I of N (deterministic split by task), e.g. 1/4.", metavar="I/N"),
    Opt(
        "limit",
        "Run a seeded random sample of N tasks per subset (all when a subset has fewer; a fraction "
        "0 < N < 1 takes that share, at least one), for a quick estimate; the same N and "
        "--plsql-seed give the same tasks. The run is marked as sampled.",
        env="PLSQL_LIMIT",
        metavar="N",
    ),
    Opt(
        "seed",
        "Seed of the --plsql-limit sample (default 1234).",
        1234,
        type=int,
        env="PLSQL_SEED",
        metavar="SEED",
    ),
    Opt(
        "task",
        "Run only these tasks, by exact id (Mbpp/2 or its node name Mbpp-2; unlike -k, Mbpp-2 does "
        "not also select Mbpp-20). Comma-separated, repeatable.",
        many=True,
        metavar="ID[,ID...]",
    ),
    # --- answers
    Opt(
        "model",
        "Where answers come from: 'reference' (the tasks' reference answers) or a litellm "
        "model string or alias (anthropic/..., openai/..., claude, gpt ...).",
        env="PLSQL_MODEL",
        metavar="NAME",
    ),
    Opt(
        "answers",
        "Score the answers in this JSON Lines file ({task_id, turn, answer} per line) "
        "instead of generating them.",
        metavar="FILE",
    ),
    Opt("api-base", "Base URL of the model API (passed to litellm).", env="PLSQL_API_BASE", metavar="URL"),
    Opt("temperature", "Sampling temperature (paper: 0.0).", 0.0, type=float),
    Opt("max-tokens", "Maximum output tokens per answer (paper: 8192).", 8192, type=int),
    Opt("samples", "Answers generated per task turn; pass@k is reported for k <= N.", 1, type=int, metavar="N"),
    Opt(
        "concurrency",
        "Model requests in flight per worker while answers are prefetched.",
        4,
        type=int,
        metavar="N",
    ),
    Opt(
        "price",
        "Price of the model's tokens in USD per million, as INPUT,OUTPUT (e.g. 0.15,0.60): for a "
        "custom endpoint or a model litellm has no price for (cost would be 'unknown'); when "
        "given it prices every answer of the run instead of litellm's cost map.",
        env="PLSQL_PRICE",
        metavar="IN,OUT",
    ),
    Opt("request-timeout", "Seconds before one model request is abandoned and retried.", 300.0, type=float),
    Opt("retries", "Retries of a model request after 429/5xx/timeouts (with backoff).", 5, type=int),
    Opt("cache", "Directory of the answer cache (one JSON file per answer).", ".plsql_cache", metavar="DIR"),
    Opt("cache-only", "Never call a model: use cached answers; report the others as not generated.", flag=True),
    Opt("regenerate", "Ignore cached answers and ask the model again.", flag=True),
    Opt("show-prompt", "Print the exact messages sent to the model for TASK_ID and exit.", metavar="TASK_ID"),
    # --- output
    Opt("results", "Write the results JSON (per-task outcomes and aggregates) here.", metavar="PATH"),
    Opt(
        "progress",
        "Seconds between progress lines while the tests run: items done, rate, ETA and the item "
        "running longest (a sign of life for long items); none in a shorter run; 0: never.",
        30.0,
        type=float,
        metavar="SECONDS",
    ),
    # --- containment
    Opt(
        "safety",
        "Safety pre-check of answers: 'block' refuses statements outside the task's allowed "
        "set (scored as a safety failure), 'warn' only reports them, 'off' skips the check.",
        "block",
        choices=SAFETY_MODES,
    ),
)

OPTION_BY_NAME = {o.name: o for o in OPTIONS}


def add_options(parser: pytest.Parser, pluginmanager: pluggy.PluginManager) -> None:
    """The options and their ini keys; ``--plsql-dialect``'s help names the default dialect of the
    plug-ins registered so far (a conftest's dialect is not asked: it is registered later)."""
    default = default_dialect_of(pluginmanager)
    group = parser.getgroup("plsqlbench", "PL/SQL benchmarks (pytest-plsqlbench)")
    group.addoption(
        "--subset",
        dest="plsql_subset",
        default=None,
        metavar="NAME[,NAME...]",
        help="Run these benchmark subsets (see 'plsqlbench subsets'). Without it the plugin "
        "does nothing.",
    )
    for opt in OPTIONS:
        text = opt.help.replace("{default}", f" ({default})" if default else "")
        kwargs: dict[str, Any] = {"dest": opt.dest, "help": text}
        if opt.flag:
            kwargs.update(action="store_true", default=None)
        else:
            kwargs.update(default=None, metavar=opt.metavar)
            if opt.many:
                kwargs["action"] = "append"
            if opt.choices:
                kwargs["choices"] = opt.choices
        group.addoption("--plsql-" + opt.name, **kwargs)
        kind: Literal["bool", "linelist", "string"] = "bool" if opt.flag else ("linelist" if opt.many else "string")
        parser.addini(opt.dest, text, type=kind, default=None)
    parser.addini(
        "plsql_model_aliases",
        "Model aliases, one 'alias = litellm/model-string' per line; extends and overrides "
        "the built-in aliases.",
        type="linelist",
        default=[],
    )


#: Options whose values are paths (``source``: ``NAME=PATH``).
PATH_OPTIONS = frozenset({"data", "source", "tasks", "data-cache", "answers", "cache", "results"})


def _from_ini_file(config: pytest.Config, opt: Opt, value: Any) -> Any:
    """A relative path in the ini file is relative to that file (as pytest's own ``paths`` keys
    are), not to wherever pytest is started: the same file then works from a subfolder."""
    inipath = getattr(config, "inipath", None)
    if opt.name not in PATH_OPTIONS or inipath is None:
        return value
    base = Path(inipath).parent

    def anchored(text: str) -> str:
        if opt.name == "source" and "=" in text:
            name, _, where = text.partition("=")
            return f"{name}={anchored(where.strip())}" if where.strip() else text
        path = Path(text.strip()).expanduser()
        return str(path if path.is_absolute() else base / path)

    return [anchored(v) for v in value] if isinstance(value, list) else anchored(str(value))


def _raw(config: pytest.Config, opt: Opt) -> Any:
    value = config.getoption(opt.dest, None)
    if value is None or value == []:
        ini = config.getini(opt.dest)
        value = _from_ini_file(config, opt, ini) if ini not in (None, "", []) else None
    if value is None and opt.env:
        value = os.environ.get(opt.env) or None
    if value is None:
        return opt.default
    if opt.flag and isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    if opt.type is not None and not isinstance(value, (list, bool)):
        try:
            value = opt.type(value)
        except (TypeError, ValueError):
            raise UsageError(f"--plsql-{opt.name}: invalid value {value!r}") from None
    if opt.choices and value not in opt.choices:
        raise UsageError(f"--plsql-{opt.name}: {value!r} is not one of {', '.join(opt.choices)}")
    return value


def parse_limit(value: Any) -> int | float | None:
    """``--plsql-limit``: a whole number of tasks (>= 1), or a share 0 < x < 1; None when not given."""
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        number = float("nan")
    if math.isfinite(number) and number >= 1 and number == int(number):
        return int(number)
    if 0 < number < 1:
        return number
    raise UsageError(f"--plsql-limit: expected a number of tasks (1, 2, ...) or a share between 0 and 1, got {text!r}")


def parse_price(value: Any) -> tuple[float, float] | None:
    """``--plsql-price IN,OUT``: USD per million input and output tokens (finite, not negative)."""
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip()
    parts = [p.strip().lstrip("$") for p in text.split(",")]
    try:
        numbers = tuple(float(p) for p in parts)
    except ValueError:
        numbers = ()
    if len(numbers) != 2 or not all(math.isfinite(n) and n >= 0 for n in numbers):
        raise UsageError(
            f"--plsql-price: expected INPUT,OUTPUT in USD per million tokens (e.g. 0.15,0.60), got {text!r}"
        )
    return numbers[0], numbers[1]


def resolve_database(dialect: Dialect, kind: str | None, dsn: str | None) -> tuple[str, str | None]:
    """``--plsql-db``/``--plsql-dsn`` as given -> the database kind and DSN of ``dialect``: its
    default, its environment and its checks, then the two every dialect shares."""
    kind, dsn = dialect.resolve_database(kind, dsn)
    if kind == "dsn" and not dsn:
        raise UsageError("--plsql-db=dsn needs --plsql-dsn URL (or PLSQL_DSN)")
    if kind not in dialect.kinds:
        raise UsageError(f"--plsql-db={kind}: {dialect.name} has no such database (it has: {', '.join(dialect.kinds)})")
    return kind, dsn


def dialect_given(config: pytest.Config) -> bool:
    """Whether the user chose a dialect (command line or ini file) rather than taking the default."""
    return config.getoption("plsql_dialect", None) is not None or config.getini("plsql_dialect") not in (None, "")


_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class TaskSettings:
    """Which tasks run: the subsets, extra manifest folders, and the selection within them."""

    subsets: tuple[str, ...] = ()
    #: ``--plsql-tasks``: extra folders of subset manifests.
    dirs: tuple[Path, ...] = ()
    #: ``--plsql-task``: exact task ids (or node names) to run; empty runs every task.
    ids: tuple[str, ...] = ()
    #: ``--plsql-shard``: (I, N) -- run only shard I of N.
    shard: tuple[int, int] | None = None
    #: ``--plsql-assertions``: how MBPP assertion blocks are written (null-safe or as published).
    assertions: str = "null-safe"
    #: ``--plsql-limit``: tasks sampled per subset -- a count (int) or a share (0 < float < 1); None: all.
    limit: int | float | None = None
    #: ``--plsql-seed``: seed of the ``limit`` sample.
    seed: int = 1234


@dataclass(frozen=True)
class DataSettings:
    """Where benchmark data comes from: local copies, or downloads into a cache."""

    #: ``--plsql-data``: a local copy of the PLSQLBench release.
    release: Path | None = None
    #: ``--plsql-source NAME=PATH``: local copies of other data sources named in manifests.
    sources: Mapping[str, Path] = field(default_factory=dict)
    #: ``--plsql-data-cache``: where downloads and conversions are cached (None: the default).
    cache: Path | None = None


@dataclass(frozen=True)
class DatabaseSettings:
    """Where tests run and what bounds an answer there."""

    #: A registered dialect's name; by default the registry's default (:meth:`Registry.default_dialect`).
    dialect: str = field(default_factory=lambda: active().default_dialect().name)
    #: ``--plsql-db``: embedded, container or dsn.
    kind: str = "embedded"
    dsn: str | None = None
    #: ``--plsql-timeout``: seconds per statement.
    timeout: float = 10.0
    #: ``--plsql-task-timeout``: seconds per task answer in all (0: no budget).
    task_timeout: float = 300.0
    #: ``--plsql-max-output``: characters of output kept per test.
    max_output: int = 1_000_000
    #: ``--plsql-safety``: off, warn or block.
    safety: str = "block"
    #: ``--plsql-no-lookahead``: without xdist, run each task only when pytest reaches it.
    no_lookahead: bool = False


@dataclass(frozen=True)
class ModelSettings:
    """Which model answers and how it is asked."""

    #: ``--plsql-model``: 'reference' or a litellm model string/alias.
    name: str | None = None
    api_base: str | None = None
    temperature: float = 0.0
    max_tokens: int = 8192
    #: ``--plsql-samples``: answers per task turn (pass@k for k <= samples).
    samples: int = 1
    #: ``--plsql-concurrency``: model requests in flight per worker.
    concurrency: int = 4
    request_timeout: float = 300.0
    retries: int = 5
    #: ``plsql_model_aliases`` (ini): alias -> litellm model string.
    aliases: Mapping[str, str] = field(default_factory=dict)
    #: ``--plsql-price``: USD per million (input, output) tokens; None: litellm's cost map.
    price: tuple[float, float] | None = None


@dataclass(frozen=True)
class AnswerSettings:
    """Where answers are kept or read, and what a missing one means for the score."""

    #: ``--plsql-answers``: a JSON Lines file of answers to score instead of a model.
    file: Path | None = None
    #: ``--plsql-cache``: the answer cache folder.
    cache: Path = Path(".plsql_cache")
    cache_only: bool = False
    regenerate: bool = False
    #: ``--plsql-missing``: 'fail' scores a missing answer as failed; 'exclude' leaves it out.
    missing: str = "fail"
    #: ``--plsql-show-prompt``: print this task's prompt and exit.
    show_prompt: str | None = None


@dataclass(frozen=True)
class ReportSettings:
    """What the run writes besides pytest's own reports."""

    #: ``--plsql-results``: the results JSON.
    results: Path | None = None
    #: ``--plsql-progress``: seconds between test progress lines (0: none).
    progress: float = 30.0


#: Where each setting lives in :class:`Settings`: its flat name (the option's, ``plsql_`` and the
#: plural aside) -> (group, field). :meth:`Settings.of` routes values through it.
FIELDS: Mapping[str, tuple[str, str]] = {
    "subsets": ("tasks", "subsets"),
    "task_dirs": ("tasks", "dirs"),
    "task_ids": ("tasks", "ids"),
    "shard": ("tasks", "shard"),
    "assertions": ("tasks", "assertions"),
    "limit": ("tasks", "limit"),
    "seed": ("tasks", "seed"),
    "data": ("data", "release"),
    "sources": ("data", "sources"),
    "data_cache": ("data", "cache"),
    "dialect": ("database", "dialect"),
    "db": ("database", "kind"),
    "dsn": ("database", "dsn"),
    "timeout": ("database", "timeout"),
    "task_timeout": ("database", "task_timeout"),
    "max_output": ("database", "max_output"),
    "safety": ("database", "safety"),
    "no_lookahead": ("database", "no_lookahead"),
    "model": ("model", "name"),
    "api_base": ("model", "api_base"),
    "temperature": ("model", "temperature"),
    "max_tokens": ("model", "max_tokens"),
    "samples": ("model", "samples"),
    "concurrency": ("model", "concurrency"),
    "request_timeout": ("model", "request_timeout"),
    "retries": ("model", "retries"),
    "model_aliases": ("model", "aliases"),
    "price": ("model", "price"),
    "answers": ("answers", "file"),
    "cache": ("answers", "cache"),
    "cache_only": ("answers", "cache_only"),
    "regenerate": ("answers", "regenerate"),
    "missing": ("answers", "missing"),
    "show_prompt": ("answers", "show_prompt"),
    "results": ("report", "results"),
    "progress": ("report", "progress"),
}

_GROUPS: Mapping[str, type] = {
    "tasks": TaskSettings,
    "data": DataSettings,
    "database": DatabaseSettings,
    "model": ModelSettings,
    "answers": AnswerSettings,
    "report": ReportSettings,
}


@dataclass(frozen=True)
class Settings:
    """Everything a run needs to know, resolved once from options, ini and environment,
    grouped by concern so that each part of the harness takes only the group it needs."""

    tasks: TaskSettings = field(default_factory=TaskSettings)
    data: DataSettings = field(default_factory=DataSettings)
    database: DatabaseSettings = field(default_factory=DatabaseSettings)
    model: ModelSettings = field(default_factory=ModelSettings)
    answers: AnswerSettings = field(default_factory=AnswerSettings)
    report: ReportSettings = field(default_factory=ReportSettings)

    @property
    def answer_source(self) -> str:
        """A short label of where answers come from, for reports."""
        if self.answers.file is not None:
            return f"answers:{self.answers.file.name}"
        return self.model.name or "?"

    @classmethod
    def of(cls, **values: Any) -> Settings:
        """Settings from flat values named as in :data:`FIELDS` (``timeout=2``, ``data=...``,
        ``model=...``): how code that is not a pytest run (the ``plsqlbench`` commands, tests) makes them."""
        grouped: dict[str, dict[str, Any]] = {g: {} for g in _GROUPS}
        for name, value in values.items():
            try:
                group, attr = FIELDS[name]
            except KeyError:
                raise TypeError(f"Settings.of(): unknown setting {name!r}") from None
            grouped[group][attr] = value
        return cls(**{g: _GROUPS[g](**kw) for g, kw in grouped.items()})

    @classmethod
    def from_config(cls, config: pytest.Config, registry: Registry, dialect: str | None = None) -> Settings:
        """``registry``: what the plug-ins registered (the dialect must be one of them);
        ``dialect``: the run's dialect when the user named none (see :func:`dialect_given`)."""
        raw_subsets = config.getoption("plsql_subset", None) or ""
        subsets = tuple(dict.fromkeys(s.strip() for s in raw_subsets.split(",") if s.strip()))
        v = {o.name: _raw(config, o) for o in OPTIONS}
        if dialect is None or dialect_given(config):
            dialect = registry.default_dialect().name if v["dialect"] is None else v["dialect"]
        db, dsn = resolve_database(registry.dialect(dialect), v["db"], v["dsn"])
        if v["timeout"] <= 0:
            raise UsageError("--plsql-timeout must be positive")
        if v["task-timeout"] < 0:
            raise UsageError("--plsql-task-timeout must not be negative (0: no budget)")
        for name in ("samples", "concurrency", "max-tokens", "max-output"):
            if v[name] < 1:
                raise UsageError(f"--plsql-{name} must be at least 1")
        if v["retries"] < 0:
            raise UsageError("--plsql-retries must not be negative")
        if not v["progress"] >= 0 or not math.isfinite(v["progress"]):
            raise UsageError("--plsql-progress must be 0 (none) or a number of seconds")
        shard = None
        if v["shard"]:
            m = _SHARD.match(str(v["shard"]))
            if not m or not (1 <= int(m.group(1)) <= int(m.group(2))):
                raise UsageError(f"--plsql-shard: expected I/N with 1 <= I <= N, got {v['shard']!r}")
            shard = (int(m.group(1)), int(m.group(2)))
        limit = parse_limit(v["limit"])
        price = parse_price(v["price"])
        sources: dict[str, Path] = {}
        for item in v["source"] or []:
            name, sep, path = str(item).partition("=")
            if not sep or not name.strip() or not path.strip():
                raise UsageError(f"--plsql-source: expected NAME=PATH, got {item!r}")
            sources[name.strip()] = Path(path.strip()).expanduser()
        aliases: dict[str, str] = {}
        for line in config.getini("plsql_model_aliases") or []:
            alias, sep, target = line.partition("=")
            if not sep or not alias.strip() or not target.strip():
                raise UsageError(f"plsql_model_aliases: expected 'alias = model', got {line!r}")
            aliases[alias.strip()] = target.strip()
        model = v["model"]
        answers = Path(v["answers"]).expanduser() if v["answers"] else None
        if model and answers:
            # The command line wins over the ini file and the environment: one given there
            # replaces the other from elsewhere; both on the same level is a contradiction.
            on_cli = {n: config.getoption(OPTION_BY_NAME[n].dest, None) is not None for n in ("model", "answers")}
            if on_cli["answers"] and not on_cli["model"]:
                model = None
            elif on_cli["model"] and not on_cli["answers"]:
                answers = None
            else:
                raise UsageError("choose one of --plsql-model and --plsql-answers, not both")
        if v["cache-only"] and v["regenerate"]:
            raise UsageError("--plsql-cache-only and --plsql-regenerate contradict each other")
        as_path = lambda x: Path(x).expanduser() if x else None  # noqa: E731
        results = as_path(v["results"])
        if results is not None and results.is_dir():
            raise UsageError(f"--plsql-results: {results} is a folder; give the file to write, "
                             f"e.g. --plsql-results={results / 'results.json'}")
        return cls(
            tasks=TaskSettings(
                subsets=subsets,
                dirs=tuple(Path(d).expanduser() for d in v["tasks"] or ()),
                ids=tuple(
                    dict.fromkeys(p.strip() for item in v["task"] or () for p in str(item).split(",") if p.strip())
                ),
                shard=shard,
                assertions=v["assertions"],
                limit=limit,
                seed=v["seed"],
            ),
            data=DataSettings(release=as_path(v["data"]), sources=sources, cache=as_path(v["data-cache"])),
            database=DatabaseSettings(
                dialect=dialect,
                kind=db,
                dsn=dsn,
                timeout=v["timeout"],
                task_timeout=v["task-timeout"],
                max_output=v["max-output"],
                safety=v["safety"],
                no_lookahead=bool(v["no-lookahead"]),
            ),
            model=ModelSettings(
                name=model,
                api_base=v["api-base"],
                temperature=v["temperature"],
                max_tokens=v["max-tokens"],
                samples=v["samples"],
                concurrency=v["concurrency"],
                request_timeout=v["request-timeout"],
                retries=v["retries"],
                aliases=aliases,
                price=price,
            ),
            answers=AnswerSettings(
                file=answers,
                cache=Path(v["cache"]).expanduser(),
                cache_only=bool(v["cache-only"]),
                regenerate=bool(v["regenerate"]),
                missing=v["missing"],
                show_prompt=v["show-prompt"],
            ),
            report=ReportSettings(results=results, progress=v["progress"]),
        )


# --------------------------------------------------------------------------- environment
# Every environment variable the plugin reads is read in this module: the options' fallbacks
# above, and these for the parts that are not options.


@dataclass(frozen=True)
class OracleEnvironment:
    """Oracle connection facts from the environment (not options: they name a site's setup)."""

    #: ``PLSQL_ORACLE_DSN``, else ``PLSQL_DSN``: the DSN when ``--plsql-dsn`` is not given.
    dsn: str | None = None
    #: ``PLSQL_ORACLE_IMAGE``: the container image for ``--plsql-db=container``.
    image: str | None = None
    #: ``TNS_ADMIN``: the wallet/tnsnames folder (python-oracledb's ``config_dir``).
    tns_admin: str | None = None


def oracle_environment(environ: Mapping[str, str] | None = None) -> OracleEnvironment:
    env = os.environ if environ is None else environ
    return OracleEnvironment(
        dsn=env.get("PLSQL_ORACLE_DSN") or env.get("PLSQL_DSN") or None,
        image=env.get("PLSQL_ORACLE_IMAGE") or None,
        tns_admin=env.get("TNS_ADMIN") or None,
    )


def source_from_environment(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """``PLSQLBENCH_SOURCE_<NAME>``: a local copy of the data source ``name`` of a manifest."""
    env = os.environ if environ is None else environ
    return env.get(source_variable(name)) or None


def source_variable(name: str) -> str:
    """The environment variable for data source ``name``: upper case, ``-`` as ``_``."""
    return "PLSQLBENCH_SOURCE_" + name.upper().replace("-", "_")


@dataclass(frozen=True)
class LitellmEnvironment:
    """The litellm variables the harness honours rather than overrides (litellm reads them too)."""

    #: ``LITELLM_LOCAL_MODEL_COST_MAP``: price from the bundled cost map (default) or fetch it.
    local_cost_map: bool = True
    #: ``LITELLM_LOG``: set by a user who wants litellm's own log lines.
    log: str | None = None


def litellm_environment(environ: Mapping[str, str] | None = None) -> LitellmEnvironment:
    env = os.environ if environ is None else environ
    return LitellmEnvironment(
        local_cost_map=env.get("LITELLM_LOCAL_MODEL_COST_MAP", "True").lower() == "true",
        log=env.get("LITELLM_LOG") or None,
    )

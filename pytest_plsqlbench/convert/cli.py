"""``plsqlbench convert`` and ``plsqlbench validate`` (registered by the main CLI).

``convert`` writes one ``task_to_dict`` JSON object per line and prints ``converted A of N``
plus rejected counts by reason. ``validate`` installs each task's replay function on a real
database of the file's dialect through the core runner, runs every unit test against it and
prints ``replay-valid V of A``; it exits non-zero when V < A and names the failures.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .. import registry
from ..errors import DataError, UsageError
from ..manifests import discover, run_dialect
from ..settings import DB_KINDS, Settings, resolve_database
from ..tasks import Task, task_from_dict, task_to_dict
from .emitter import ASSERTION_MODES
from .pipeline import EMITTERS
from .sources import SOURCES

#: Subset name written into converted tasks, per source (matches tasks/*.yaml).
DEFAULT_SUBSETS = {"mbpp-plus": "mbpp-plus", "mbpp": "mbpp-sanitized", "plsqlbench-mbpp": "mbpp"}


def register(subparsers: Any) -> None:
    """Add the ``convert`` and ``validate`` subcommands to the main parser's subparsers."""
    conv = subparsers.add_parser(
        "convert",
        help="convert MBPP / MBPP+ into PL/SQL or PL/pgSQL tasks",
        description="Rule-based Python-to-PL/SQL conversion of MBPP-style data (PLSQLBench App. B.5).",
    )
    conv.add_argument("--from", dest="source", required=True, choices=SOURCES, help="input format")
    conv.add_argument("input", type=Path, help="input file (PLSQLBench: the release root or the jsonl)")
    conv.add_argument("--dialect", required=True, choices=tuple(EMITTERS), help="the dialect to write (one the converter has an emitter for)")
    conv.add_argument(
        "--assertions",
        default="null-safe",
        choices=ASSERTION_MODES,
        help="NULL-safe comparisons (default) or the published blocks' != style",
    )
    conv.add_argument("-o", "--output", required=True, type=Path, help="converted tasks (JSON Lines)")
    conv.add_argument(
        "--explain", metavar="TASK_ID", action="append", default=[], help="explain one task (repeatable)"
    )
    conv.add_argument("--subset", help="subset name written into the tasks (default: by source)")
    conv.add_argument(
        "--timeout", type=float, default=5.0, help="seconds per canonical-solution call (MBPP+)"
    )
    conv.add_argument(
        "--keep-constant-tasks",
        action="store_true",
        help="also write tasks that one constant answer passes (left out by default; marked with "
        "metadata left_out)",
    )
    conv.set_defaults(func=run_convert)

    val = subparsers.add_parser(
        "validate",
        help="replay-validate converted tasks, or check a Spider subset's gold SQL, on a real database",
        description="With FILE (from plsqlbench convert): install each task's replay function and run "
        "its unit tests against it. With --subset spider (or spider2-st / spider2-mt): report how many "
        "gold queries transpile to the dialect and run on the data given with --plsql-data. With a "
        "ProcArena subset (procarena-sample ...): check each task's gold and calls.",
    )
    val.add_argument("file", type=Path, nargs="?", help="output of plsqlbench convert")
    val.add_argument("--subset", help="a subset to check instead of FILE: spider, spider2-st, spider2-mt, or a ProcArena subset "
                     "(procarena-sample, procarena-sample-interactive)")
    val.add_argument(
        "--plsql-dialect",
        help="a registered dialect for --subset (default: the default dialect, postgres out of the box; the "
        "subset's first dialect when it does not exist in that one)",
    )
    val.add_argument("--plsql-data", type=Path, help="local PLSQLBench release for --subset (else downloaded)")
    val.add_argument("--plsql-tasks", type=Path, action="append", help="extra folder of subset manifests (repeatable)")
    val.add_argument("--plsql-data-cache", type=Path, help="where downloaded data is cached")
    val.add_argument("--plsql-db", choices=DB_KINDS, help="embedded (postgres default), container or dsn")
    val.add_argument("--plsql-dsn", help="connection string of an existing server")
    val.add_argument("--plsql-timeout", type=float, default=10.0, help="seconds per statement")
    val.add_argument("--jobs", type=int, default=1, help="backends validating in parallel (default 1)")
    val.add_argument("--show", type=int, default=20, help="failures to list (default 20)")
    val.add_argument("--mutants", action="store_true",
                     help="ProcArena subsets: also run the standard mutants of each gold procedure through the call "
                     "suite and report each task's mutation score and survivors (docs/procarena.md)")
    val.add_argument("--mutants-limit", type=int, metavar="N",
                     help="quick mode: at most N mutants per task, spread over the operators (default: all)")
    val.add_argument("--mutants-min", type=float, default=0.95, metavar="SCORE",
                     help="mutation score each task must reach, 0-1 (default 0.95)")
    val.add_argument("--mutants-operators", metavar="LIST",
                     help="comma-separated operators to use (default: all; see docs/procarena.md)")
    val.add_argument("--no-diffs", action="store_true", help="list survivors by id only, without their diffs")
    val.add_argument("--task", action="append", metavar="ID",
                     help="ProcArena subsets: check only this task (its id, e.g. postgres_a1_000; repeatable)")
    val.set_defaults(func=run_validate)


def write_tasks(path: Path, tasks: list[Task]) -> None:
    """Write tasks as JSON Lines atomically (a temporary file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for task in tasks:
                out.write(json.dumps(task_to_dict(task), ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_tasks(path: Path) -> list[Task]:
    """Tasks from a JSON Lines file; a bad line is a DataError naming file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from None
    tasks = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            tasks.append(task_from_dict(json.loads(line)))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{path}:{lineno}: not a converted task ({exc})") from None
    return tasks


def run_convert(args: argparse.Namespace) -> int:
    from .pipeline import convert_file

    subset = args.subset or DEFAULT_SUBSETS[args.source]
    result = convert_file(
        args.source,
        args.input,
        args.dialect,
        subset=subset,
        assertions=args.assertions,
        timeout=args.timeout,
        keep_left_out=args.keep_constant_tasks,
    )
    write_tasks(args.output, result.tasks)
    for line in result.summary_lines():
        print(line)
    print(f"wrote {args.output}")
    for task_id in args.explain:
        print()
        print(result.explain(task_id))
    return 0


def run_validate(args: argparse.Namespace) -> int:
    from .validate import case_report, replay_validate

    if args.subset:
        return _validate_subset(args)
    if args.mutants or args.task:
        raise UsageError("--mutants and --task check a ProcArena subset: give --subset NAME (e.g. procarena-sample)")
    if args.file is None:
        raise UsageError("plsqlbench validate needs FILE (from plsqlbench convert) or --subset NAME")
    tasks = read_tasks(args.file)
    dialects = {t.dialect for t in tasks}
    if len(dialects) > 1:
        raise UsageError(f"{args.file}: mixes dialects {sorted(dialects)}")
    dialect = dialects.pop() if dialects else registry.active().default_dialect().name
    db, dsn = resolve_database(registry.active().dialect(dialect, "the file's dialect"), args.plsql_db, args.plsql_dsn)
    settings = Settings.of(subsets=(), dialect=dialect, db=db, dsn=dsn, timeout=args.plsql_timeout)
    report = replay_validate(tasks, settings, jobs=args.jobs)
    print(report.summary())
    print(f"({dialect}, {report.tests} unit tests, {report.seconds:.0f}s)")
    for line in case_report(tasks):
        print(line)
    for line in report.failures[: args.show]:
        print(f"  FAILED {line}")
    if len(report.failures) > args.show:
        print(f"  ... and {len(report.failures) - args.show} more")
    return 0 if report.ok else 1


def _mutation_options(args: argparse.Namespace):  # noqa: ANN202 - MutationOptions | None
    """``--mutants`` and its settings, checked (one clear message for a bad value)."""
    from ..procarena.mutate import OPERATORS
    from ..procarena.validate import MutationOptions

    given = args.mutants_limit is not None or args.mutants_operators or args.no_diffs or args.mutants_min != 0.95
    if not args.mutants:
        if given:
            raise UsageError("--mutants-limit, --mutants-min, --mutants-operators and --no-diffs need --mutants")
        return None
    if args.mutants_limit is not None and args.mutants_limit < 1:
        raise UsageError(f"--mutants-limit must be a positive number of mutants, not {args.mutants_limit}")
    if not 0 <= args.mutants_min <= 1:
        raise UsageError(f"--mutants-min is a score between 0 and 1, not {args.mutants_min:g}")
    operators = OPERATORS
    if args.mutants_operators:
        operators = tuple(o.strip() for o in args.mutants_operators.split(",") if o.strip())
        unknown = [o for o in operators if o not in OPERATORS]
        if unknown or not operators:
            raise UsageError(f"--mutants-operators: unknown operator(s) {unknown}; known: {', '.join(OPERATORS)}")
    return MutationOptions(threshold=args.mutants_min, limit=args.mutants_limit, operators=operators,
                           diffs=not args.no_diffs)


def _validate_subset(args: argparse.Namespace) -> int:
    """Gold-SQL check of a schema-grounded subset (``validate --subset spider``)."""
    from ..spider.validate import validate_subset

    known = discover(tuple(args.plsql_tasks or ()))
    default = registry.active().default_dialect().name
    dialect = args.plsql_dialect or run_dialect([known[args.subset]] if args.subset in known else [], default)
    db, dsn = resolve_database(registry.active().dialect(dialect), args.plsql_db, args.plsql_dsn)
    settings = Settings.of(
        subsets=(args.subset,),
        dialect=dialect,
        db=db,
        dsn=dsn,
        timeout=args.plsql_timeout,
        data=args.plsql_data,
        data_cache=args.plsql_data_cache,
    )
    if args.subset in known and known[args.subset].loader == "procarena":
        from ..procarena.validate import validate_subset as validate_procarena

        lines, ok = validate_procarena(known[args.subset], settings, _mutation_options(args),
                                       tuple(args.task or ()))
    elif args.task:
        raise UsageError(f"--task selects tasks of a ProcArena subset; {args.subset!r} is not one")
    elif args.mutants:
        raise UsageError(f"--mutants checks ProcArena subsets (their gold procedures); {args.subset!r} is not one")
    else:
        lines, ok = validate_subset(settings, args.subset)
    print("\n".join(lines))
    return 0 if ok else 1

"""``plsqlbench report``, ``leaderboard``, ``merge`` and ``compare``.

All four read results files written by ``--plsql-results``; none needs pytest, a database or the
benchmark data, so they run anywhere a results file was copied to (a CI artifact, a laptop).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..results import read_document, write_document
from ..summary import summary_lines

log = logging.getLogger(__name__)


def _emit(text: str, output: Path | None) -> None:
    # An answer's text can hold a lone surrogate (valid JSON, not UTF-8): shown as its escape.
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if output is None:
        sys.stdout.write(text)
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    print(f"wrote {output}", file=sys.stderr)


def cmd_report(args: argparse.Namespace) -> int:
    document = read_document(args.results)
    if args.format == "text":
        verbosity = -1 if args.quiet else (1 if args.detailed else 0)
        _emit("\n".join(summary_lines(document, verbosity)) + "\n", args.output)
        return 0
    from .render import render

    _emit(render(document, args.format), args.output)
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from .leaderboard import entry

    document = read_document(args.results)
    result, notes = entry(
        document,
        method=args.method,
        organization=args.organization,
        category=args.category,
        date=args.date,
        link=args.link,
        setting=args.setting,
        partial_overall=args.partial_overall,
        allow_noncomparable=args.allow_noncomparable,
    )
    for note in notes:
        print(f"plsqlbench leaderboard: {note}", file=sys.stderr)
    _emit(json.dumps(result, indent=2) + "\n", args.output)
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from .merge import merge_files

    merged = merge_files(args.results, allow_partial=args.allow_partial)
    write_document(merged, args.output)
    print(f"merged {len(args.results)} results files into {args.output}", file=sys.stderr)
    if not args.quiet:
        print("\n".join(summary_lines(merged, 0)))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from .compare import compare, label_of, render

    if len(args.results) < 2:
        raise UsageError("compare needs at least two results files: the baseline first, then the others")
    documents = [read_document(path) for path in args.results]
    labels = [label_of(doc, path.stem) for doc, path in zip(documents, args.results)]
    if len(set(labels)) < len(labels):  # two runs of one model: tell them apart by file
        labels = [f"{label} ({path.name})" for label, path in zip(labels, args.results)]
    comparisons = [
        compare(documents[0], doc, (labels[0], label), force=args.force)
        for doc, label in zip(documents[1:], labels[1:])
    ]
    _emit(render(comparisons, args.format), args.output)
    return 0


def register(subparsers: Any) -> None:
    """Add the reporting subcommands to the ``plsqlbench`` parser."""
    p = subparsers.add_parser(
        "report",
        help="print or render the summary of a results file",
        description="Re-print a run's summary from its --plsql-results file, or write a self-contained "
        "Markdown/HTML report with breakdowns and a chart.",
    )
    p.add_argument("results", type=Path, metavar="RESULTS.json")
    p.add_argument("--format", choices=("text", "markdown", "html"), default="text")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here instead of standard output")
    p.add_argument("-q", "--quiet", action="store_true", help="text: just the table (like pytest -q)")
    p.add_argument(
        "--detailed", action="store_true", help="text: also per-test failure counts (like pytest -v)"
    )
    p.set_defaults(func=cmd_report)

    p = subparsers.add_parser(
        "leaderboard",
        help="emit a plsqlbench.github.io leaderboard entry for a results file",
        description="Print an entry for the site's data/leaderboard.json: scores per dataset in percent, "
        "plus development/test overall means where the run covers the whole split.",
    )
    p.add_argument("results", type=Path, metavar="RESULTS.json")
    p.add_argument("--method", required=True, help="model or system name shown on the leaderboard")
    p.add_argument("--organization", default="", help="e.g. 'Direct generation' or the lab's name")
    p.add_argument("--category", default="", help="Open-weight or Proprietary")
    p.add_argument("--date", default=None, help="YYYY-MM-DD (default: today)")
    p.add_argument("--link", default="", help="URL of the model or the submission")
    p.add_argument(
        "--setting", default="Direct generation", help="how answers were produced (default: %(default)s)"
    )
    p.add_argument(
        "--partial-overall",
        action="store_true",
        help="emit split overall means even when the run lacks some of the split's datasets",
    )
    p.add_argument(
        "--allow-noncomparable",
        action="store_true",
        help="emit an entry even for a run that does not compare with the paper's figures (another "
        "dialect than oracle, MBPP without --plsql-assertions=published, partial tasks); its note says why",
    )
    p.add_argument(
        "-o", "--output", type=Path, metavar="FILE", help="write the entry here instead of standard output"
    )
    p.set_defaults(func=cmd_leaderboard)

    p = subparsers.add_parser(
        "merge",
        help="combine results files of shards of one run",
        description="Merge the results of --plsql-shard I/N parts of one run (or -k/-m parts that split it "
        "between tasks) into one results file whose aggregates equal an unsharded run's. Refuses parts of "
        "different runs and tasks that occur in two parts (a split that cuts a task's tests).",
    )
    p.add_argument("results", type=Path, nargs="+", metavar="PART.json")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="ALL.json")
    p.add_argument(
        "--allow-partial", action="store_true", help="merge even if some shards of I/N are missing"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="do not print the merged summary")
    p.set_defaults(func=cmd_merge)

    p = subparsers.add_parser(
        "compare",
        help="compare models on the same tasks: deltas, paired CIs, McNemar, flipped tasks",
        description="Compare each further results file with the first (the baseline), per subset and metric: "
        "the difference over tasks judged in both runs with a paired bootstrap 95%% CI, an exact McNemar test "
        "on Suite Pass@1, and the tasks that flipped. Refuses runs that differ in subsets, data revision, "
        "dialect or scoring settings, or that were interrupted, and says why.",
    )
    p.add_argument("results", type=Path, nargs="+", metavar="RESULTS.json", help="baseline first, then one or more")
    p.add_argument("--format", choices=("text", "markdown", "html"), default="text")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here instead of standard output")
    p.add_argument(
        "--force", action="store_true", help="compare even runs that are not comparable (the output names why not)"
    )
    p.set_defaults(func=cmd_compare)

"""The ``plsqlbench`` command: data conversion, validation and reports outside pytest.

Each area registers its own subcommands (``register(subparsers)``); a handler returns the
exit code. Errors the user can fix print one line, not a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import shutil
import sys
import textwrap
from collections.abc import Sequence

from . import __version__
from .errors import PlsqlBenchError

#: Modules contributing subcommands.
COMMAND_MODULES = (
    "pytest_plsqlbench.convert.cli",
    "pytest_plsqlbench.reporting.cli",
    "pytest_plsqlbench.export",
)


def _cmd_subsets(args: argparse.Namespace) -> int:
    from .manifests import discover

    width = max(60, min(120, shutil.get_terminal_size((100, 24)).columns))
    for name, manifest in sorted(discover().items()):
        dialects = ",".join(manifest.dialects)
        print(f"{name}  [{dialects}]")
        # The whole description, wrapped: a cut one hid what a subset is for.
        for line in textwrap.wrap(" ".join(manifest.description.split()), width - 4):
            print(f"    {line}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plsqlbench",
        description="PL/SQL benchmark tools (the benchmark itself runs with: pytest --subset NAME).",
    )
    parser.add_argument("--version", action="version", version=f"pytest-plsqlbench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("subsets", help="list the known benchmark subsets")
    p.set_defaults(func=_cmd_subsets)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except PlsqlBenchError as exc:
        print(f"plsqlbench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("plsqlbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

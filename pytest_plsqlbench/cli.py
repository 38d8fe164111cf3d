"""The ``plsqlbench`` command: data conversion, validation and reports outside pytest.

Each core area registers its own subcommands (``register(subparsers)``), and each plug-in its
own through the ``pytest_plsql_cli`` hook (the entry points of :mod:`pytest_plsqlbench.registry`);
a handler returns the exit code. Errors the user can fix print one line, not a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import shutil
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .errors import PlsqlBenchError
from .registry import outside_pytest, plugin_manager

#: Core modules contributing subcommands.
COMMAND_MODULES = (
    "pytest_plsqlbench.reporting.cli",
    "pytest_plsqlbench.export",
)


def _cmd_subsets(args: argparse.Namespace) -> int:
    from .manifests import discover

    registry = outside_pytest()
    width = max(60, min(120, shutil.get_terminal_size((100, 24)).columns))
    for name, manifest in sorted(discover(tuple(args.tasks)).items()):
        dialects = ",".join(manifest.dialects)
        if manifest.metrics is None:
            family = f"none (no registered family reads loader {manifest.loader!r})"
        else:
            family = manifest.metrics if manifest.metrics in registry.families else f"{manifest.metrics} (not registered)"
        print(f"{name}  [{dialects}]  family {family}")
        # The whole description, wrapped: a cut one hid what a subset is for.
        for line in textwrap.wrap(" ".join(manifest.description.split()), width - 4):
            print(f"    {line}")
    # What is registered, whether or not a manifest uses it (a plug-in's family before its subsets).
    print(f"families: {', '.join(sorted(registry.families)) or 'none'}")
    print(f"dialects: {', '.join(sorted(registry.dialects)) or 'none'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plsqlbench",
        description="PL/SQL benchmark tools (the benchmark itself runs with: pytest --subset NAME).",
    )
    parser.add_argument("--version", action="version", version=f"pytest-plsqlbench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("subsets", help="list the known benchmark subsets, and the registered families and dialects")
    p.add_argument("--tasks", metavar="DIR", type=Path, action="append", default=[],
                   help="a folder of more subset manifests (as --plsql-tasks; repeatable)")
    p.set_defaults(func=_cmd_subsets)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    plugin_manager().hook.pytest_plsql_cli(subparsers=sub)
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

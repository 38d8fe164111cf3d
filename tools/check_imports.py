#!/usr/bin/env python3
"""Fail when a package's modules import each other in a circle (stdlib only, so CI runs it first).

usage: check_imports.py PACKAGE_DIR [--allow FILE] [--layers FILE]

An edge is any import of a module of the package, at module level or inside a function (an
import moved into a function still ties the two modules together); imports under
``if TYPE_CHECKING:`` are left out (they never run). A package and one of its own submodules
importing each other (``__init__`` re-exports) is not reported. Exit 1 lists each circle with one
import path through it. ``--allow FILE`` names circles that exist today, one per line (modules
separated by commas or spaces, ``#`` comments): a circle inside an allowed one passes, so the list
only ever shrinks; an allowed line no circle is left in is reported stale (exit 1: delete it).

``--layers FILE`` (docs/layers.txt) also checks the same edges against the layer rule: the core
imports no plug-in package, and plug-in packages import only the units their line names. Its lines:
``unit NAME PREFIX...`` (a module belongs to the unit of its longest matching prefix),
``NAME -> NAME...`` (the units NAME may import besides itself; one line per unit), and
``allow MODULE -> MODULE`` (one import that breaks the rule today; a line whose import is gone or
no longer breaks it is stale, exit 1: the exceptions only shrink). Exit 1 lists each forbidden
import on one line with the file and line of the import.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under the package ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def import_graph(root: Path, where: dict[tuple[str, str], str] | None = None) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (outside ``if TYPE_CHECKING:``); ``where`` gets
    each edge's first import as ``path:line``, for the layer check's messages."""
    mods = module_files(root)
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skip = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
        here = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(
                    [
                        *(here[: len(here) - node.level + 1] if node.level else []),
                        *([node.module] if node.module else []),
                    ]
                )
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != mod:
                    graph[mod].add(target)
                    if where is not None:
                        where.setdefault((mod, target), f"{path.relative_to(root.parent)}:{node.lineno}")
    return {m: graph.get(m, set()) for m in mods}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), parent/child pairs left out."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while (w := stack.pop()) != v:
                comp.append(w)
            comp.append(v)
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [c for c in found if not (len(c) == 2 and c[1].startswith(c[0] + "."))]


def path_through(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """One import path from the circle's first module back to itself (breadth first, inside it)."""
    start, members = comp[0], set(comp)
    prev: dict[str, str] = {}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & members):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp  # pragma: no cover - a strongly connected component always has one


def read_allowed(path: Path) -> list[frozenset[str]]:
    lines = (line.split("#", 1)[0].replace(",", " ").split() for line in path.read_text().splitlines())
    return [frozenset(mods) for mods in lines if mods]


class Layers:
    """The layer rule of a ``--layers`` file: units of modules, what each may import, exceptions."""

    def __init__(self, path: Path) -> None:
        self.prefixes: dict[str, str] = {}  # module prefix -> unit
        self.may: dict[str, set[str]] = {}  # unit -> units it may import besides itself
        self.allowed: set[tuple[str, str]] = set()
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            words = raw.split("#", 1)[0].split()
            if not words:
                continue
            if words[0] == "unit" and len(words) > 2:
                self.prefixes.update(dict.fromkeys(words[2:], words[1]))
            elif words[0] == "allow" and len(words) == 4 and words[2] == "->":
                self.allowed.add((words[1], words[3]))
            elif len(words) > 1 and words[1] == "->" and words[0] not in self.may:
                self.may[words[0]] = set(words[2:])
            else:
                raise ValueError(f"{path}:{number}: not a unit, rule or allow line: {raw.strip()}")
        units = set(self.prefixes.values())
        for unit in sorted(units | set(self.may)):
            if unit not in self.may or not self.may[unit] <= units | {unit} or unit not in units:
                raise ValueError(f"{path}: unit {unit!r} needs one 'unit' line and one '->' line naming known units")

    def unit(self, module: str) -> str | None:
        """The unit of ``module``: its longest prefix's (a prefix matches itself and its submodules)."""
        parts = module.split(".")
        for n in range(len(parts), 0, -1):
            if (unit := self.prefixes.get(".".join(parts[:n]))) is not None:
                return unit
        return None

    def check(self, graph: dict[str, set[str]], where: dict[tuple[str, str], str]) -> tuple[list[str], list[str]]:
        """One line per forbidden import and one per stale exception."""
        bad, used = [], set()
        for mod in sorted(graph):
            src = self.unit(mod)
            if src is None:
                bad.append(f"module in no unit of the layers file: {mod}")
                continue
            for target in sorted(graph[mod]):
                dst = self.unit(target)
                if dst is None or dst == src or dst in self.may[src]:
                    continue
                if (mod, target) in self.allowed:
                    used.add((mod, target))
                    continue
                bad.append(
                    f"layer violation: {mod} -> {target} ({src} -> {dst}; {src} may import "
                    f"{', '.join(sorted(self.may[src])) or 'nothing else'}) at {where[mod, target]}"
                )
        stale = [
            f"stale layer exception (import gone or allowed; delete the line): allow {a} -> {b}"
            for a, b in sorted(self.allowed - used)
        ]
        return bad, stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", type=Path)
    parser.add_argument("--allow", type=Path, help="circles that exist today (one per line)")
    parser.add_argument("--layers", type=Path, help="the layer rule (units, what each may import)")
    args = parser.parse_args(argv)
    if not (args.package / "__init__.py").is_file():
        print(f"check_imports: {args.package} is not a package (no __init__.py)", file=sys.stderr)
        return 2
    try:
        allowed = read_allowed(args.allow) if args.allow else []
        layers = Layers(args.layers) if args.layers else None
        where: dict[tuple[str, str], str] = {}
        graph = import_graph(args.package.resolve(), where)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError) as exc:
        print(f"check_imports: {exc}", file=sys.stderr)
        return 2
    found = circles(graph)
    new = [c for c in found if not any(set(c) <= a for a in allowed)]
    stale = [a for a in allowed if not any(set(c) <= a for c in found)]
    for comp in new:
        print(f"import circle ({len(comp)} modules): {' -> '.join(path_through(graph, comp))}")
    for entry in stale:
        print(f"stale allow-list entry (no circle left in it; delete the line): {', '.join(sorted(entry))}")
    bad, stale_layers = layers.check(graph, where) if layers else ([], [])
    for line in bad + stale_layers:
        print(line)
    print(
        f"check_imports: {len(graph)} modules, {len(found)} circle(s), {len(found) - len(new)} allowed, "
        f"{len(new)} not allowed, {len(stale)} stale allow-list entr{'y' if len(stale) == 1 else 'ies'}"
        + (f"; layers: {len(bad)} violation(s), {len(stale_layers)} stale exception(s)" if layers else "")
    )
    return 1 if new or stale or bad or stale_layers else 0


if __name__ == "__main__":
    sys.exit(main())

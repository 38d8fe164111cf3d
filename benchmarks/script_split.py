"""How much faster large data scripts split with the regex tokenizer than with sqlparse's lexer.

Both paths run here, side by side, on the same generated script (INSERTs with semicolons and
commas inside strings, like the Spider DML files); they must produce the same statements.

Usage: ``python benchmarks/script_split.py [--rows 500] [--statements 40] [--dialect oracle]``
"""

from __future__ import annotations

import argparse
import time

import pytest_plsqlbench.scripts as sc


def make_script(rows: int, statements: int) -> str:
    row = "(1, 'text; with a semicolon', 'a, b', NULL, -3.14)"
    stmt = 'INSERT INTO OWNER_X.T ("A", "B", "C", "D", "E") VALUES ' + ", ".join([row] * rows) + ";\n"
    return 'CREATE TABLE OWNER_X.T ("A" NUMBER);\n' + stmt * statements


def timed(script: str, dialect: str, fast_from: int) -> tuple[float, list[sc.Statement]]:
    saved = sc.FAST_TOKENIZER_FROM
    sc.FAST_TOKENIZER_FROM = fast_from
    try:
        started = time.perf_counter()
        out = sc.split(script, dialect)
        return time.perf_counter() - started, out
    finally:
        sc.FAST_TOKENIZER_FROM = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--statements", type=int, default=40)
    ap.add_argument("--dialect", choices=("oracle", "postgres"), default="oracle")
    args = ap.parse_args()
    script = make_script(args.rows, args.statements)
    slow_s, slow = timed(script, args.dialect, len(script) + 1)
    fast_s, fast = timed(script, args.dialect, 0)
    assert fast == slow, "the two tokenizers disagree"
    kb = len(script) / 1024
    print(f"script: {kb:.0f} KB, {len(slow)} statements, dialect {args.dialect}")
    print(f"sqlparse lexer: {slow_s:.2f} s ({kb / slow_s:.0f} KB/s)")
    print(f"regex tokenizer: {fast_s:.3f} s ({kb / fast_s:.0f} KB/s)")
    print(f"ratio sqlparse / regex: {slow_s / fast_s:.1f}x")


if __name__ == "__main__":
    main()

"""Tiny hand-made subsets for end-to-end tests (PostgreSQL versions only matter here).

Tests write them into their temporary directory and point ``--plsql-tasks`` at it, the way
a user adds their own tasks, so the plugin is exercised without depending on the content
of the shipped ``smoke`` subset.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path


def _assert_pg(expr: str, want: str, label: str) -> str:
    return f"DO $$ BEGIN IF {expr} IS DISTINCT FROM {want} THEN RAISE EXCEPTION '{label} failed'; END IF; END $$;"


DOUBLE_REF_PG = "CREATE FUNCTION double_it(x integer) RETURNS integer LANGUAGE sql AS 'SELECT x * 2';"
DOUBLE_REF_ORA = "CREATE OR REPLACE FUNCTION double_it(x IN NUMBER) RETURN NUMBER IS BEGIN RETURN x * 2; END;\n/"


def double_task(task_id: str) -> str:
    """A scalar task with three assertion tests: double_it(1..3)."""
    tests = "\n".join(
        f"""  - id: case-{n}
    postgres: "{_assert_pg(f'double_it({n})', str(2 * n), f'case-{n}')}"
    oracle: "BEGIN IF double_it({n}) <> {2 * n} THEN RAISE_APPLICATION_ERROR(-20001, 'case-{n}'); END IF; END;" """
        for n in (1, 2, 3)
    )
    oracle_ref = DOUBLE_REF_ORA.replace("\n", "\\n")
    return textwrap.dedent(
        f"""\
        id: {task_id}
        entry_points: [double_it]
        markers: [construct_function]
        metadata: {{difficulty: simple, db_id: arith}}
        prompt: Write double_it(x) returning twice x.
        reference:
          postgres: "{DOUBLE_REF_PG}"
          oracle: "{oracle_ref}"
        tests:
        """
    ) + tests + "\n"


def conversation_task(task_id: str = "conv") -> str:
    """Three turns, two tests each: greet() must print 'hello 1', then 'hello 2', then 'hello 3'."""
    turns = []
    for t in (1, 2, 3):
        ref = f"CREATE OR REPLACE PROCEDURE greet(n integer) LANGUAGE plpgsql AS $$ BEGIN RAISE NOTICE 'hello % %', {t}, n; END $$;"
        turns.append(
            f"""  - prompt: Make greet(n) print 'hello {t} <n>'.
    reference:
      postgres: "{ref}"
      oracle: "BEGIN NULL; END;"
    tests:
      - id: a
        kind: output
        postgres: "CALL greet(1);"
        oracle: "EXEC greet(1);"
        expected: ["hello {t} 1"]
      - id: b
        kind: output
        postgres: "CALL greet(2);"
        oracle: "EXEC greet(2);"
        expected: ["hello {t} 2"]
"""
        )
    return f"id: {task_id}\nentry_points: [greet]\nturns:\n" + "".join(turns)


def write_subset(root: Path, name: str, tasks: dict[str, str]) -> Path:
    """Write manifest + task files under ``root``; return the folder for ``--plsql-tasks``."""
    folder = root / "mytasks"
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.yaml").write_text(
        f"name: {name}\nloader: yaml\ndialects: [postgres, oracle]\noptions: {{dir: {name}}}\n"
    )
    for file_name, text in tasks.items():
        (folder / name / f"{file_name}.yaml").write_text(text)
    return folder


def write_answers(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path

"""A task's ``assert`` tests run in one server call give each test the outcome it gets on its own.

Issue 12: the batch runner (``PostgresSession.run_batch``) must not move a score. Here the same
answers run through both paths on one embedded server -- the reference and wrong answers made
the ways ``tests/test_pinned_outcomes.py`` and ``benchmarks/wrong_answers.py`` make them, on smoke,
the sample's MBPP and the head of MBPP+ -- and every test's outcome (passed, class, message,
error code, expected and actual lines, extras, score) must be identical. The batch must also
really have decided most tests (otherwise this proves nothing).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_plsqlbench.dialects.postgres import PostgresBackend
from pytest_plsqlbench.runner import TaskRun
from pytest_plsqlbench.tasks import Task

from embedded import started_backend

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from plugin_overhead import _tasks as load_tasks  # noqa: E402 - the benchmarks' own task loading
from wrong_answers import WRONG  # noqa: E402

pytestmark = pytest.mark.slow

#: MBPP+ tasks from the head of the shared file (converting the whole file takes minutes).
MBPPPLUS_TASKS = 12
SWAP = {"+": "-", "-": "+", "<": ">", ">": "<"}


def flipped(code: str) -> str:
    """The reference with its first arithmetic or comparison operator after BEGIN flipped
    (tests/test_pinned_outcomes.py's mutation)."""
    body = code.upper().find("BEGIN")
    for i in range(max(body, 0), len(code) - 1):
        if code[i] in SWAP and code[i - 1] not in "-<>" and code[i + 1 : i + 2] not in ("-", ">", "<", "="):
            return code[:i] + SWAP[code[i]] + code[i + 1 :]
    return code


#: Answer makers: the reference, and wrong answers of several kinds.
VARIANTS = {
    "reference": lambda code, key: code,
    "flipped": lambda code, key: flipped(code),
    "broken-tail": lambda code, key: code + "\nSELEC broken;\n",
    "defines-nothing": lambda code, key: WRONG,
    "empty": lambda code, key: "",
    # Wrong by raising on some calls: what the batch reports as the error of one test.
    "raises-sometimes": lambda code, key: code.replace(
        "BEGIN", f"BEGIN IF {int(hashlib.sha256(key.encode()).hexdigest(), 16) % 2} = 1 THEN "
        "RAISE EXCEPTION 'wrong on purpose' USING ERRCODE = '22023'; END IF;", 1)
    if "LANGUAGE plpgsql" in code else code,
}


@pytest.fixture(scope="module")
def backend() -> Iterator[PostgresBackend]:
    with started_backend("batch-outcomes", timeout=5.0) as b:
        yield b


@pytest.fixture(scope="module")
def subsets(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Task]]:
    folder = tmp_path_factory.mktemp("batch-data")
    head = folder / "MbppPlus-head.jsonl"
    lines = (shared_data / "mbppplus" / "MbppPlus.jsonl").read_text(encoding="utf-8").splitlines()
    head.write_text("\n".join(lines[:MBPPPLUS_TASKS]) + "\n", encoding="utf-8")
    cache = [f"--plsql-data-cache={folder / 'cache'}"]
    return {
        "smoke": load_tasks("smoke", cache),
        "mbpp": load_tasks("mbpp", [f"--plsql-data={shared_data / 'plsqlbench-sample'}", *cache]),
        "mbpp-plus": load_tasks("mbpp-plus", [f"--plsql-source=mbppplus={head}", *cache]),
    }


def outcomes_of(backend: PostgresBackend, task: Task, answers: Sequence[str], *, batch: bool) -> list[tuple[Any, ...]]:
    run = TaskRun(backend, task, list(answers), batch=batch)
    run.start()
    got = []
    try:
        for turn in task.turns:
            for test in turn.tests:
                o = run.run_test(turn.index, test)
                got.append((turn.index, test.id, o.passed, o.failure_class, o.message, o.error_code,
                            o.expected, o.actual, dict(o.extra), o.score))
    finally:
        run.finish()
    return got


@pytest.mark.parametrize("subset", ["smoke", "mbpp", "mbpp-plus"])
def test_every_outcome_is_the_one_the_test_gets_on_its_own(
    subset: str, subsets: dict[str, list[Task]], backend: PostgresBackend
) -> None:
    tasks = subsets[subset]
    assert tasks, f"no {subset} task loaded"
    session = backend.session()
    decided_before = session.batch_counts["decided"]
    classes: set[str] = set()
    compared = 0
    for task in tasks:
        for name, make in VARIANTS.items():
            answers = [make(turn.reference or "", f"{task.id}/{turn.index}") for turn in task.turns]
            alone = outcomes_of(backend, task, answers, batch=False)
            batched = outcomes_of(backend, task, answers, batch=True)
            assert batched == alone, f"{subset} {task.id} {name}"
            classes.update(str(o[3]) for o in alone)
            compared += len(alone)
    decided = session.batch_counts["decided"] - decided_before
    # The answers are right and wrong in several ways, and the batch decided most tests.
    assert {"passed", "wrong_output", "interface"} <= classes or subset == "smoke", classes
    if subset != "smoke":
        assert decided > compared / 4, (decided, compared)

"""What the converter reads, decides and reports, as plain dataclasses.

A source reader turns one dataset record into a :class:`SourceTask` (Python values, no SQL);
the pipeline infers a signature, drops cases that do not fit it and emits one
:class:`~pytest_plsqlbench.tasks.Task` per dialect. Every case that does not make it into a
task is a :class:`DroppedCase`, every task that does not make it is a :class:`Rejection`:
both carry a reason code and a human-readable detail, so nothing disappears silently.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..tasks import Task

# --------------------------------------------------------------------------- reason codes
#: Task-level reasons (a rejected task produces no :class:`Task`).
TASK_REASONS = {
    "malformed-record": "the record lacks a field the converter needs, or its code does not parse",
    "no-entry-point": "the function under test could not be identified",
    "no-oracle": "the reference evaluation accepts any output, so there is nothing to test",
    "inconsistent-types": "no argument/return types fit all base test cases",
    "unsupported-type": "a base case uses a value PL/SQL cannot represent (complex, objects ...)",
    "no-return-value": "the function returns None in every base case",
    "no-cases": "no test case survived conversion",
}
#: Reasons a converted task is left out by default (``--keep-constant-tasks`` /
#: ``--plsql-keep-constant-tasks`` keep it, marked with ``metadata["left_out"]``).
LEFT_OUT_REASONS = {
    "constant-passable": "one constant (true, 0, '', an empty list, NULL ...) passes every kept case",
}
#: A task that keeps fewer of its source cases than this is named in the summary.
FEW_CASES = 10
#: Case-level reasons (a dropped case produces no unit test; its task may survive).
CASE_REASONS = {
    "unsupported-assertion": "the assertion is not of a supported form",
    "non-literal": "an argument or the expected value is not a Python literal",
    "arity-mismatch": "the call has a different number of arguments than the function",
    "unsupported-value": "a value PL/SQL cannot represent (complex, objects, nested sets ...)",
    "type-mismatch": "the values do not fit the task's inferred signature",
    "out-of-range": "a number the SQL types cannot hold exactly (NaN, infinity, > 38 digits)",
    "unrepresentable-text": "a string the database cannot hold (NUL characters, lone surrogates)",
    "reference-error": "the canonical solution raised on this input (or outgrew the sandbox's memory limit)",
    "reference-timeout": "the canonical solution did not finish within the timeout",
    "lossy-encoding": "the SQL encoding of the input changes the Python result (e.g. True -> 1)",
    "ambiguous-input": "another case has the same SQL input but a different expected output",
    "too-large": "inputs and expected output exceed the size limit for one test's literals",
}


@dataclass(frozen=True)
class Tolerance:
    """How numbers compare: ``allclose`` is evalplus/numpy, ``isclose`` is ``math.isclose``.

    ``allclose``: ``|a - b| <= atol + rtol * |b|`` (b is the expected value);
    ``isclose``:  ``|a - b| <= max(rtol * max(|a|, |b|), atol)``.
    ``Tolerance()`` (both zero) is exact comparison.
    """

    atol: float = 0.0
    rtol: float = 0.0
    kind: str = "allclose"

    @property
    def exact(self) -> bool:
        return self.atol == 0 and self.rtol == 0


EXACT = Tolerance()


@dataclass(frozen=True, eq=False)
class Oversized:
    """Stands for an expected value whose ``repr`` alone is longer than a test may be: the case
    will be dropped as ``too-large``, so the value itself (up to megabytes) is not kept."""

    repr_length: int


def repr_length(value: Any) -> int:
    """``len(repr(value))``, also for an :class:`Oversized` stand-in."""
    return value.repr_length if isinstance(value, Oversized) else len(repr(value))


@dataclass
class SourceCase:
    """One test case in Python terms, before any SQL decision."""

    id: str
    #: ``base``/``plus`` for MBPP+, ``case`` otherwise; base cases decide the signature.
    origin: str
    args: tuple[Any, ...] | None
    #: The expected output; alternatives are further acceptable outputs (special oracles).
    expected: Any = None
    alternatives: tuple[Any, ...] = ()
    tolerance: Tolerance = EXACT
    #: Compare the top-level result as a set (evalplus MBPP_OUTPUT_SET_EQ_TASKS, ``set(f(x))``).
    as_set: bool = False
    #: Why the case is unusable before typing (parse errors, reference failures), if so.
    problem: tuple[str, str] | None = None
    #: Python source of the call and expected value, for doctest examples in prompts.
    call_src: str | None = None
    expected_src: str | None = None


@dataclass
class SourceTask:
    """One dataset record read into Python values."""

    id: str
    entry_point: str
    #: Parameter names of the Python function (from its ``def``), for the record only.
    params: tuple[str, ...]
    #: The commented Python part of the prompt (signature, docstring, doctest examples).
    prompt_py: str
    cases: list[SourceCase]
    metadata: dict[str, Any] = field(default_factory=dict)
    #: The published Oracle prompt and test block (PLSQLBench source only).
    published_prompt: str | None = None
    published_test: str | None = None
    #: Set when the record cannot be converted at all: (reason, detail).
    problem: tuple[str, str] | None = None
    #: Python code defining the entry point, when cases may need re-running (MBPP+).
    solution: str | None = None


@dataclass(frozen=True)
class Rejection:
    task_id: str
    reason: str
    detail: str


@dataclass(frozen=True)
class DroppedCase:
    case_id: str
    reason: str
    detail: str


@dataclass
class ConversionResult:
    """The outcome of converting one source file into one dialect."""

    source: str
    dialect: str
    total: int
    #: The converted tasks written out: left-out tasks are among them only when kept on request.
    tasks: list[Task] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    #: Converted tasks left out by default (``metadata["left_out"]`` says why), in source order.
    left_out: list[Task] = field(default_factory=list)
    #: Whether ``left_out`` tasks were kept in ``tasks`` (marked).
    keep_left_out: bool = False
    #: Dropped cases per task id (converted and rejected tasks alike).
    dropped: dict[str, list[DroppedCase]] = field(default_factory=dict)
    #: Source case count per task id, so kept + dropped can be checked to add up.
    source_cases: dict[str, int] = field(default_factory=dict)

    @property
    def converted(self) -> int:
        return len(self.tasks)

    def rejected_by_reason(self) -> Counter[str]:
        return Counter(r.reason for r in self.rejected)

    def dropped_by_reason(self) -> Counter[str]:
        kept = {t.id for t in self.tasks}
        return Counter(d.reason for tid, cases in self.dropped.items() if tid in kept for d in cases)

    def summary_lines(self) -> list[str]:
        """``converted A of N`` first, then rejected and left-out counts by reason, dropped cases,
        and the tasks that keep few of their cases."""
        lines = [f"converted {self.converted} of {self.total}"]
        for reason, count in sorted(self.rejected_by_reason().items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"rejected {count}: {reason}")
        lines.extend(left_out_lines(self.left_out, self.keep_left_out))
        n_tests = sum(t.n_tests for t in self.tasks)
        dropped = self.dropped_by_reason()
        lines.append(f"tests {n_tests} kept, {sum(dropped.values())} dropped in converted tasks")
        for reason, count in sorted(dropped.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"dropped {count}: {reason}")
        few = few_cases_line(self.tasks)
        if few:
            lines.append(few)
        return lines

    def explain(self, task_id: str) -> str:
        """Why ``task_id`` was rejected, or which of its cases were dropped and why."""
        lines: list[str] = []
        rejection = next((r for r in self.rejected if r.task_id == task_id), None)
        task = next((t for t in (*self.tasks, *self.left_out) if t.id == task_id), None)
        if rejection is None and task is None:
            return f"{task_id}: not in {self.source} input ({self.total} records)"
        if rejection is not None:
            lines.append(f"{task_id}: rejected ({rejection.reason}): {rejection.detail}")
            lines.append(f"  meaning: {TASK_REASONS.get(rejection.reason, rejection.reason)}")
        else:
            assert task is not None
            lines.append(
                f"{task_id}: converted to {self.dialect} with {task.n_tests} unit test(s) "
                f"of {self.source_cases.get(task_id, task.n_tests)} source case(s)"
            )
            if "left_out" in task.metadata:
                reason = task.metadata["left_out"]
                state = "kept on request" if self.keep_left_out else "left out by default"
                lines.append(f"  {state} ({reason}): {task.metadata.get('left_out_detail', '')}")
                lines.append(f"  meaning: {LEFT_OUT_REASONS.get(reason, reason)}")
            notes = task.metadata.get("notes") or []
            lines.extend(f"  note: {n}" for n in notes)
        dropped = self.dropped.get(task_id, [])
        if dropped:
            lines.append(f"  dropped {len(dropped)} case(s):")
            for d in dropped:
                lines.append(f"    {d.case_id}: {d.reason}: {d.detail}")
        elif task is not None:
            lines.append("  no case dropped")
        return "\n".join(lines)


def kept_of(task: Task) -> tuple[int, int]:
    """(cases kept, source cases) of a converted task (its unit tests when not recorded)."""
    kept = int(task.metadata.get("cases_kept", task.n_tests))
    return kept, int(task.metadata.get("cases_total", kept))


def _listing(items: list[str], limit: int = 8) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f", ... (+{len(items) - limit})" if len(items) > limit else "")


def left_out_lines(left_out: list[Task], kept: bool) -> list[str]:
    """One line per left-out reason, naming the tasks (and the constant that passes them)."""
    by_reason: dict[str, list[Task]] = {}
    for task in left_out:
        by_reason.setdefault(str(task.metadata.get("left_out", "?")), []).append(task)
    lines = []
    for reason, tasks in sorted(by_reason.items()):
        names = [
            f"{t.id} (-> {t.metadata.get('constant_answer', '?')}, {kept_of(t)[0]} of {kept_of(t)[1]} cases)"
            for t in tasks
        ]
        verb = "kept on request, marked" if kept else "left out"
        lines.append(f"{verb} {len(tasks)}: {reason}: {_listing(names)}")
    return lines


def few_cases_line(tasks: list[Task], limit: int = FEW_CASES) -> str | None:
    """The tasks that keep fewer than ``limit`` of their source cases, and under half of them."""
    few = []
    for task in tasks:
        kept, total = kept_of(task)
        if kept < limit and 2 * kept < total:
            few.append((kept / total, task.id, kept, total))
    if not few:
        return None
    few.sort()
    names = [f"{tid} {k} of {n}" for _, tid, k, n in few]
    return f"few cases kept {len(few)}: under half and fewer than {limit} of their cases: {_listing(names)}"

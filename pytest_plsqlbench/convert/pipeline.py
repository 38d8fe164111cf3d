"""The conversion pipeline (paper App. B.5): read, compute, type, drop, emit.

1. A source reader yields :class:`~.model.SourceTask` objects (Python values).
2. MBPP+ expected outputs are computed by the canonical solution in a sandboxed child.
3. The signature is inferred from the base cases; a task is rejected only when no
   consistent signature exists for them (or for a stated reason). Other cases that do not
   fit the signature are dropped, each with a reason.
4. Cases whose SQL encoding is lossy (``True`` passed as ``1``, ``2.0`` as ``2``) are re-run
   with the encoded input and dropped if Python's answer changes; cases whose SQL inputs
   coincide with an earlier case's but expect something else are dropped as ambiguous.
5. The dialect emitter writes prompt, fixtures, one ``assert`` unit test per case and the
   replay function (the task's reference answer).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import UsageError
from ..tasks import Task, Turn, UnitTest
from . import evalplus, sources
from .emitter import ASSERTION_MODES, EmitCase, Emitter, Signature
from .model import ConversionResult, DroppedCase, Rejection, SourceCase, SourceTask, repr_length
from .names import sql_function_name
from .oracle import OracleEmitter, published_cases, show_published
from .postgres import PostgresEmitter
from .sandbox import run_calls, zygotes
from .sqltypes import (
    SqlType,
    Storage,
    TypeConflict,
    Unknown,
    UnsupportedValue,
    ValueProblem,
    canon,
    has_unknown,
    infer,
    kind_of,
    lossy,
    refine,
    resolve,
    same,
    sql_visible,
    with_top_order,
)

log = logging.getLogger(__name__)

#: Bump when converted output changes, so cached conversions are rebuilt.
CONVERTER_VERSION = "3"
#: A case whose inputs and outputs print longer than this is dropped (``too-large``): a few
#: MBPP+ inputs produce megabyte outputs that would bloat every script and the replay.
MAX_CASE_CHARS = sources.MAX_CASE_CHARS

EMITTERS: dict[str, type[Emitter]] = {e.dialect: e for e in (PostgresEmitter, OracleEmitter)}


def emitter_for(dialect: str) -> Emitter:
    """A new emitter of ``dialect``; UsageError naming the dialects the converter writes otherwise."""
    try:
        return EMITTERS[dialect]()
    except KeyError:
        raise UsageError(f"the MBPP converter has no emitter for dialect {dialect!r} "
                         f"(it writes {', '.join(EMITTERS)})") from None


def case_display(emitter: Emitter, sig: Signature, case: EmitCase) -> dict[str, Any]:
    """What a failing case shows (:class:`~pytest_plsqlbench.judges.AssertJudge`): the call and
    the accepted values as the user would write them in SQL, whatever the script prints."""
    return {"call": emitter.call(sig, case.args), "expected": [emitter.literal(o, sig.returns) for o in case.outputs]}


@dataclass
class Typed:
    """A task after typing: its SQL-facing signature and the cases that fit it."""

    source: SourceTask
    params: tuple[SqlType, ...] = ()
    returns: SqlType = field(default_factory=Unknown)
    cases: list[SourceCase] = field(default_factory=list)
    dropped: list[DroppedCase] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rejection: tuple[str, str] | None = None

    def drop(self, case: SourceCase, reason: str, detail: str) -> None:
        self.dropped.append(DroppedCase(case.id, reason, detail))


# --------------------------------------------------------------------------- typing
def _check_supported(value: Any) -> None:
    kind = kind_of(value) if value is not None else "none"
    if kind in ("seq", "set"):
        for v in value:
            _check_supported(v)
    elif kind == "dict":
        for k, v in value.items():
            _check_supported(k)
            _check_supported(v)


def _outputs(case: SourceCase) -> list[Any]:
    return [case.expected, *case.alternatives]


def type_task(task: SourceTask) -> Typed:
    """Infer the signature from base cases; drop the cases that do not fit it."""
    typed = Typed(task)
    live: list[SourceCase] = []
    for case in task.cases:
        if case.problem is not None:
            typed.drop(case, *case.problem)
        else:
            live.append(case)
    if task.problem is not None:
        typed.rejection = task.problem
        return typed
    if not task.cases:
        typed.rejection = ("no-cases", "the record has no test cases")
        return typed
    base_all = [c for c in live if c.origin in ("base", "case")]
    if not base_all:
        reasons = Counter(d.reason for d in typed.dropped)
        why = ", ".join(f"{n} {r}" for r, n in reasons.most_common())
        typed.rejection = ("no-cases", f"no usable base case ({why})")
        return typed
    # The calls decide the arity (a def may have defaulted parameters the tests never pass).
    arity = Counter(len(c.args or ()) for c in base_all).most_common(1)[0][0]
    fitting: list[SourceCase] = []
    for case in live:
        assert case.args is not None
        if len(case.args) != arity:
            typed.drop(case, "arity-mismatch", f"{len(case.args)} argument(s), the function takes {arity}")
            continue
        size = sum(repr_length(v) for v in (*case.args, *_outputs(case)))
        if size > MAX_CASE_CHARS:
            typed.drop(case, "too-large", f"{size} characters of Python literals (limit {MAX_CASE_CHARS})")
            continue
        try:
            for value in (*case.args, *_outputs(case)):
                _check_supported(value)
        except UnsupportedValue as exc:
            typed.drop(case, "unsupported-value", str(exc))
            continue
        fitting.append(case)
    base = [c for c in fitting if c.origin in ("base", "case")]
    if not base:
        reasons = Counter(d.reason for d in typed.dropped)
        why = ", ".join(f"{n} {r}" for r, n in reasons.most_common()) or "none given"
        code = "unsupported-type" if reasons.get("unsupported-value") else "no-cases"
        typed.rejection = (code, f"no usable base case ({why})")
        return typed
    try:
        params, returns, agreeing = _signature(task, base, arity)
    except TypeConflict as exc:
        typed.rejection = ("inconsistent-types", str(exc))
        return typed
    for case in base:
        if case not in agreeing:
            typed.drop(
                case,
                "type-mismatch",
                f"outvoted: {len(agreeing)} of {len(base)} base cases agree on {_describe(params, returns)}",
            )
    base = agreeing
    if isinstance(returns, Unknown):
        typed.rejection = ("no-return-value", f"returns None in all {len(base)} base case(s)")
        return typed
    kept = list(base)
    for case in fitting:
        if case.origin in ("base", "case"):
            continue
        try:
            params, returns = _refined(params, returns, case)
        except TypeConflict as exc:
            typed.drop(case, "type-mismatch", f"{exc} (signature {_describe(params, returns)})")
            continue
        kept.append(case)
    if any(has_unknown(t) for t in (*params, returns)):
        typed.notes.append("a collection was empty in every case; its element type defaults to number")
    typed.params = tuple(resolve(t) for t in params)
    typed.returns = resolve(returns)
    order = {c.id: n for n, c in enumerate(task.cases)}
    for case in sorted(kept, key=lambda c: order[c.id]):
        problem = _value_problem(typed, case)
        if problem is not None:
            typed.drop(case, *problem)
        else:
            typed.cases.append(case)
    if not typed.cases:
        typed.rejection = ("no-cases", "every case was dropped")
    return typed


def _refined(params: Sequence[SqlType], returns: SqlType, case: SourceCase) -> tuple[list[SqlType], SqlType]:
    """The signature widened to fit ``case`` as well; TypeConflict (nothing changed) if it cannot."""
    new_params = [refine(t, v) for t, v in zip(params, case.args)]  # type: ignore[arg-type]
    new_returns = returns
    for o in _outputs(case):
        new_returns = refine(new_returns, o)
    return new_params, new_returns


def _infer_all(task: SourceTask, cases: Sequence[SourceCase], arity: int) -> tuple[list[SqlType], SqlType]:
    params = []
    for i in range(arity):
        try:
            params.append(infer([c.args[i] for c in cases]))  # type: ignore[index]
        except TypeConflict as exc:
            raise TypeConflict(f"argument {i + 1} ({_param(task, i)}): {exc}") from None
    try:
        returns = infer([o for c in cases for o in _outputs(c)])
    except TypeConflict as exc:
        raise TypeConflict(f"return value: {exc}") from None
    return params, returns


def _signature(
    task: SourceTask, base: Sequence[SourceCase], arity: int
) -> tuple[list[SqlType], SqlType, list[SourceCase]]:
    """The signature of all base cases, else of a strict majority of them (the largest group
    one signature fits; ties go to the earliest case), else TypeConflict."""
    try:
        params, returns = _infer_all(task, base, arity)
        return params, returns, list(base)
    except TypeConflict as exc:
        first = exc
    best: list[SourceCase] = []
    for seed in base:
        try:
            params, returns = _infer_all(task, [seed], arity)
        except TypeConflict:
            continue
        group = [seed]
        for case in base:
            if case is seed:
                continue
            try:
                params, returns = _refined(params, returns, case)
            except TypeConflict:
                continue
            group.append(case)
        if len(group) > len(best):
            best = group
    if 2 * len(best) > len(base):
        group = [c for c in base if c in best]
        try:
            params, returns = _infer_all(task, group, arity)
            return params, returns, group
        except TypeConflict:
            pass
    raise first


def _param(task: SourceTask, i: int) -> str:
    return task.params[i] if i < len(task.params) else f"p{i + 1}"


def _describe(params: Sequence[SqlType], returns: SqlType) -> str:
    return "(" + ", ".join(map(str, params)) + f") -> {returns}"


def _value_problem(typed: Typed, case: SourceCase) -> tuple[str, str] | None:
    try:
        for i, (v, t) in enumerate(zip(case.args or (), typed.params), 1):
            canon(v, t, where=f"argument {i}")
        for o in _outputs(case):
            canon(o, typed.returns, where="expected value")
    except ValueProblem as exc:
        return exc.reason, exc.detail
    return None


def check_lossy_one(typed: Typed, timeout: float) -> None:
    """Re-run the task's cases whose SQL encoding changes the input; drop those whose result changes."""
    task = typed.source
    suspects = [c for c in typed.cases if any(lossy(v, t) for v, t in zip(c.args or (), typed.params))]
    if not suspects or not task.solution:
        return
    calls = [
        (task.entry_point, tuple(sql_visible(v, t) for v, t in zip(c.args or (), typed.params)))
        for c in suspects
    ]
    results = run_calls(task.solution, calls, timeout)
    bad: dict[str, str] = {}
    for case, res in zip(suspects, results):
        if not res.ok:
            bad[case.id] = f"with the input as SQL passes it the solution fails ({res.error})"
            continue
        out = evalplus.not_none_output(res.value) if task.entry_point in evalplus.NOT_NONE_TASKS else res.value
        cmp = with_top_order(typed.returns, "set") if case.as_set else typed.returns
        try:
            _check_supported(out)
            refine(typed.returns, out)
            ok = any(
                same(canon(out, typed.returns), canon(o, typed.returns), cmp, case.tolerance)
                for o in _outputs(case)
            )
        except (TypeConflict, UnsupportedValue, ValueProblem):
            ok = False
        if not ok:
            bad[case.id] = (
                f"with the input as SQL passes it the solution returns {_short(out)}, not {_short(case.expected)}"
            )
    for case in suspects:
        if case.id in bad:
            typed.drop(case, "lossy-encoding", bad[case.id])
    typed.cases = [c for c in typed.cases if c.id not in bad]
    if not typed.cases:
        typed.rejection = ("no-cases", "every case was dropped")


class TypedTasks(Protocol):
    """Typed tasks, iterated once, their number known up front (a list, a :class:`TypedStream`)."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Typed]: ...


class TypedStream:
    """The typed tasks of an MBPP+ file, each yielded as soon as its canonical solution has run
    on its cases, in file order -- so emitting one task overlaps with computing the next ones'
    expected outputs. Iterate once; ``len`` is known up front."""

    def __init__(self, tasks: list[SourceTask], timeout: float) -> None:
        self.tasks = tasks
        self.timeout = timeout

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[Typed]:
        workers = max(1, min(16, os.cpu_count() or 2))  # the canonical solutions' sandboxed runs
        # One fork server more than pool threads: the lossy re-runs of this thread never wait.
        with zygotes(workers + 1):
            pool = ThreadPoolExecutor(max_workers=workers)
            try:
                pending: dict[str, list[Future[None]]] = {}
                for job in sources.reference_jobs(self.tasks):
                    pending.setdefault(job[0].id, []).append(
                        pool.submit(sources.run_reference_job, job, self.timeout)
                    )
                for task in self.tasks:
                    for future in pending.pop(task.id, ()):
                        future.result()
                    typed = type_task(task)
                    if typed.rejection is None:
                        check_lossy_one(typed, self.timeout)
                    yield typed
            finally:
                pool.shutdown(wait=True, cancel_futures=True)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- emission
def _normalise(text: str) -> str:
    return " ".join(text.split())


def emit_task(
    typed: Typed, dialect: str, subset: str, mode: str, emitter: Emitter | None = None
) -> tuple[Task | None, list[DroppedCase], Rejection | None]:
    """The task in one dialect, the cases dropped there (ambiguous inputs), or a rejection.

    ``emitter`` (of ``dialect``) may be shared by the assertion modes of one task."""
    task = typed.source
    emitter = emitter or emitter_for(dialect)
    published = emitter.published
    sig = Signature(sql_function_name(task.entry_point), typed.params, typed.returns)
    dropped: list[DroppedCase] = []
    cases: list[EmitCase] = []
    #: Per kept case: its canonical acceptable outputs, comparison type and tolerance.
    accepts: list[tuple[list[Any], SqlType, Any]] = []
    seen: dict[tuple[Any, ...], tuple[SourceCase, Any]] = {}
    memo = emitter.canon_memo
    for case in typed.cases:
        entry = memo.get(case.id) if memo is not None else None
        if entry is None:
            entry = _canonical(case, sig, emitter.storage)
            if memo is not None:
                memo[case.id] = entry
        key, outs, problem = entry
        if problem is not None:
            dropped.append(DroppedCase(case.id, problem.reason, problem.detail))
            continue
        cmp = with_top_order(sig.returns, "set") if case.as_set else sig.returns
        if key in seen:
            first, first_expected = seen[key]
            if not any(same(first_expected, o, cmp, case.tolerance) for o in outs):
                dropped.append(
                    DroppedCase(
                        case.id,
                        "ambiguous-input",
                        f"same {dialect} input as {first.id}, which expects {_short(first.expected)}",
                    )
                )
                continue
        else:
            seen[key] = (case, outs[0])
        accepts.append((outs, cmp, case.tolerance))
        cases.append(
            EmitCase(
                id=case.id,
                args=tuple(case.args or ()),
                expected=case.expected,
                alternatives=case.alternatives,
                tolerance=case.tolerance,
                compare=cmp if case.as_set else None,
            )
        )
    if not cases:
        return None, dropped, Rejection(task.id, "no-cases", "every case was dropped")
    constant = passing_constant(accepts)
    notes = list(typed.notes)
    if 2 * len(cases) < len(task.cases):
        notes.append(f"only {len(cases)} of {len(task.cases)} source cases fit the signature")
    if sig.name != task.entry_point:
        notes.append(
            f"entry point {task.entry_point!r} is named {sig.name!r} in SQL (reserved or built-in name)"
        )
    prompt_notes = emitter.type_notes(sig, "")
    prompt = emitter.prompt(sig, task.prompt_py, prompt_notes)
    metadata: dict[str, Any] = {}
    if published and task.published_prompt is not None:
        matches = _normalise(prompt) == _normalise(task.published_prompt)
        metadata["published_prompt_match"] = matches
        if matches:
            prompt = task.published_prompt
        else:
            notes.append("the generated prompt differs from the published one")
    if published and task.published_test is not None:
        metadata["published_test_match"] = published_block_matches(emitter, sig, cases, task.published_test)
    if mode == "published" and published and task.published_test is not None:
        # The published block decides; its failure names the case, its call, the expected and
        # the returned value (show_published changes only the message).
        tests: tuple[UnitTest, ...] = (
            UnitTest(id="block", kind="assert", script=show_published(task.published_test),
                     options={"cases": published_cases(task.published_test)}),
        )
    else:
        tests = tuple(
            UnitTest(id=c.id, kind="assert", script=emitter.test_script(sig, c, mode),
                     options=case_display(emitter, sig, c))
            for c in cases
        )
    all_dropped = [*typed.dropped, *dropped]
    metadata.update(
        {
            "source_id": task.metadata.get("source_id", task.id),
            "python_entry_point": task.entry_point,
            "python_params": list(task.params),
            "signature": f"{sig.name}{_describe(sig.params, sig.returns)}",
            "atol": task.metadata.get("atol", 0),
            "assertions": mode,
            "cases_total": len(task.cases),
            "cases_kept": len(cases),
            "cases_dropped": len(all_dropped),
            "dropped_by_reason": dict(Counter(d.reason for d in all_dropped)),
            "origins": dict(Counter(c.id.split("-")[0] for c in cases)),
            "set_compared": any(c.compare is not None for c in cases),
            "notes": notes,
            "converter_version": CONVERTER_VERSION,
        }
    )
    if constant is not None:
        # Only on tasks left out by default, so the tasks that stay are unchanged.
        value = [cases[0].expected, *cases[0].alternatives][constant]
        metadata["constant_answer"] = _short(value)
        metadata["left_out"] = "constant-passable"
        metadata["left_out_detail"] = _constant_detail(task, cases, value)
    turn = Turn(
        index=1,
        prompt=prompt,
        tests=tests,
        reference=emitter.replay(sig, cases),
        source_id=str(task.metadata.get("source_id", task.id)),
    )
    built = Task(
        id=task.id,
        subset=subset,
        dialect=dialect,
        turns=(turn,),
        entry_points=(sig.name,),
        fixtures=emitter.fixtures(sig, cases, mode),
        metadata=metadata,
    )
    return built, dropped, None


def _canonical(
    case: SourceCase, sig: Signature, storage: Storage
) -> tuple[tuple[Any, ...], list[Any], ValueProblem | None]:
    """A case's inputs and acceptable outputs as ``storage`` holds them, or why it cannot."""
    try:
        key = tuple(
            canon(v, t, storage=storage, where=f"argument {i}")
            for i, (v, t) in enumerate(zip(case.args or (), sig.params), 1)
        )
        outs = [canon(o, sig.returns, storage=storage, where="expected value") for o in _outputs(case)]
    except ValueProblem as exc:
        return (), [], exc
    return key, outs, None


def passing_constant(accepts: Sequence[tuple[Sequence[Any], SqlType, Any]]) -> int | None:
    """Which output of the first case, if any, every case accepts (so an answer returning
    that one constant -- true, 0, '', an empty list, NULL ... -- passes every unit test).

    ``accepts`` holds per case its canonical acceptable outputs, comparison type and tolerance,
    compared exactly as the emitted tests compare (a constant within tolerance passes too).
    """
    if not accepts:
        return None
    for index, candidate in enumerate(accepts[0][0]):
        if all(any(same(candidate, o, cmp, tol) for o in outs) for outs, cmp, tol in accepts[1:]):
            return index
    return None


def _constant_detail(task: SourceTask, cases: Sequence[EmitCase], value: Any) -> str:
    """Why a task is left out: the constant, the kept count, and what the dropped cases expected."""
    kept = {c.id for c in cases}
    others = [
        c for c in task.cases if c.id not in kept and c.problem is None and c.args is not None and c.expected != value
    ]
    text = f"a function returning {_short(value)} passes all {len(cases)} kept case(s) of {len(task.cases)}"
    if others:
        text += f"; {len(others)} dropped case(s) expect something else"
    return text


def published_block_matches(
    emitter: Emitter, sig: Signature, cases: Sequence[EmitCase], published: str
) -> bool:
    """Whether the Oracle emitter reproduces a published test block (whitespace-normalised)."""
    assert isinstance(emitter, OracleEmitter)
    try:
        block = emitter.block(sig, list(cases), "published", show=False)
    except ValueError:
        return False
    return _normalise(block) == _normalise(published)


# --------------------------------------------------------------------------- entry point
def read_source(source: str, path: Path, assertions: str = "null-safe") -> list[SourceTask]:
    if source == "mbpp-plus":
        return sources.read_mbpp_plus(path)
    if source == "mbpp":
        return sources.read_mbpp(path)
    if source == "plsqlbench-mbpp":
        return sources.read_plsqlbench(path, null_safe=assertions == "null-safe")
    raise UsageError(f"unknown conversion source {source!r}; choose from {', '.join(sources.SOURCES)}")


def type_source(
    source: str, path: Path, *, assertions: str = "null-safe", timeout: float = 5.0, stream: bool = False
) -> Sequence[Typed] | TypedStream:
    """Read and type every record of ``path`` (dialect-independent, runs Python for MBPP+).

    ``stream=True`` returns MBPP+ as a :class:`TypedStream` (iterate once) instead of a list.
    """
    tasks = read_source(source, path, assertions)
    if source != "mbpp-plus":
        return [type_task(t) for t in tasks]
    typed = TypedStream(tasks, timeout)
    return typed if stream else list(typed)


def emit_all(
    typed: TypedTasks,
    source: str,
    dialect: str,
    *,
    subset: str,
    assertions: str,
    keep_left_out: bool = False,
) -> ConversionResult:
    """Emit every typed task; tasks a constant passes are left out unless ``keep_left_out``."""
    result = ConversionResult(source=source, dialect=dialect, total=len(typed), keep_left_out=keep_left_out)
    for t in typed:
        tid = t.source.id
        result.source_cases[tid] = len(t.source.cases)
        if t.rejection is not None:
            result.rejected.append(Rejection(tid, *t.rejection))
            result.dropped[tid] = list(t.dropped)
            continue
        task, extra, rejection = emit_task(t, dialect, subset, assertions)
        result.dropped[tid] = [*t.dropped, *extra]
        if rejection is not None:
            result.rejected.append(rejection)
        else:
            assert task is not None
            if "left_out" in task.metadata:
                result.left_out.append(task)
                if not keep_left_out:
                    continue
            result.tasks.append(task)
    return result


def _slim(task: Task) -> Task:
    """What a summary needs of a task already written out: ids, test count, metadata."""
    turns = tuple(
        dataclasses.replace(
            turn, prompt="", reference=None, tests=tuple(dataclasses.replace(u, script="") for u in turn.tests)
        )
        for turn in task.turns
    )
    return dataclasses.replace(task, turns=turns, fixtures=())


def emit_streaming(
    typed: TypedTasks,
    source: str,
    *,
    subset: str,
    targets: Sequence[tuple[str, str]],
    sink: Callable[[str, str, Task], None],
) -> dict[tuple[str, str], ConversionResult]:
    """:func:`emit_all` for several (dialect, assertion mode) targets at once, task by task.

    Each emitted task -- left-out ones included, marked -- goes to ``sink(dialect, mode, task)``
    as soon as it exists, and the results keep only what their summaries need, so memory does not
    grow with the output. One emitter per task and dialect renders each value once for every mode.
    The output is the same as :func:`emit_all` with ``keep_left_out=True`` per target.
    """
    results = {
        (d, m): ConversionResult(source=source, dialect=d, total=len(typed), keep_left_out=True) for d, m in targets
    }
    for t in typed:
        tid = t.source.id
        emitters: dict[str, Emitter] = {}
        for d, mode in targets:
            result = results[(d, mode)]
            result.source_cases[tid] = len(t.source.cases)
            if t.rejection is not None:
                result.rejected.append(Rejection(tid, *t.rejection))
                result.dropped[tid] = list(t.dropped)
                continue
            if d not in emitters:
                emitters[d] = emitter_for(d)
                emitters[d].remember_literals()
                emitters[d].canon_memo = {}
            task, extra, rejection = emit_task(t, d, subset, mode, emitters[d])
            result.dropped[tid] = [*t.dropped, *extra]
            if rejection is not None:
                result.rejected.append(rejection)
                continue
            assert task is not None
            sink(d, mode, task)
            slim = _slim(task)
            if "left_out" in task.metadata:
                result.left_out.append(slim)
            result.tasks.append(slim)
    return results


def convert_file(
    source: str,
    path: Path,
    dialect: str,
    *,
    subset: str,
    assertions: str = "null-safe",
    timeout: float = 5.0,
    keep_left_out: bool = False,
) -> ConversionResult:
    """Convert one source file into tasks of one dialect (see the module docstring)."""
    if dialect not in EMITTERS:
        raise UsageError(f"unknown dialect {dialect!r}; choose from {', '.join(EMITTERS)}")
    if assertions not in ASSERTION_MODES:
        raise UsageError(f"unknown assertion mode {assertions!r}; choose from {', '.join(ASSERTION_MODES)}")
    if timeout <= 0:
        raise UsageError("the conversion timeout must be positive")
    typed = type_source(source, Path(path), assertions=assertions, timeout=timeout)
    result = emit_all(typed, source, dialect, subset=subset, assertions=assertions, keep_left_out=keep_left_out)
    log.info("%s -> %s: %s", path, dialect, "; ".join(result.summary_lines()))
    return result

"""Readers for the three inputs: evalplus MBPP+, sanitized MBPP, PLSQLBench's MBPP-PLSQL.

Each reader turns records into :class:`~.model.SourceTask` objects holding Python values.
A line that is not a JSON object with the fields a reader needs is a
:class:`~pytest_plsqlbench.errors.DataError` naming file and line: the file is not what it
claims to be. Records that are well-formed but cannot be converted become task problems
(rejections with a reason), never errors.
"""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..textfiles import read_text
from . import evalplus
from .assertions import ParsedAssertion, assertions_in, called_function, parse_one, parse_python
from .model import Oversized, SourceCase, SourceTask
from .sandbox import run_calls

log = logging.getLogger(__name__)

SOURCES = ("mbpp-plus", "mbpp", "plsqlbench-mbpp")
PLSQLBENCH_FILE = Path("datasets") / "mbpp" / "mbpp_plsql.jsonl"


# --------------------------------------------------------------------------- reading
def _records(
    path: Path, required: Mapping[str, type | tuple[type, ...]]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for a JSON Lines file or a JSON array file, plain or gzipped
    (evalplus publishes ``MbppPlus.jsonl.gz``), with or without a UTF-8 byte order mark."""
    try:
        text = read_text(path)
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        numbered = [(0, item) for item in items]
    else:
        numbered = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                numbered.append((lineno, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
    if not numbered:
        raise DataError(f"{path}: no records (an empty file?)")
    for n, (lineno, rec) in enumerate(numbered, 1):
        where = f"{path}:{lineno}" if lineno else f"{path}: record {n}"
        if not isinstance(rec, dict):
            raise DataError(f"{where}: expected a JSON object")
        for name, kind in required.items():
            alternatives = name.split("|")
            present = [a for a in alternatives if a in rec]
            if not present:
                raise DataError(f"{where}: missing field {alternatives[0]!r}{_other_source_hint(rec, required)}")
            if not isinstance(rec[present[0]], kind):
                raise DataError(
                    f"{where}: field {present[0]!r} has the wrong type ({type(rec[present[0]]).__name__})"
                    f"{_other_source_hint(rec, required)}"
                )
        yield lineno, rec


#: A field only one source has -> what to run it with, for a file given to the wrong subset.
_SOURCE_MARKS = (
    ("plus_input", "MBPP+ (evalplus): run it with --subset mbpp-plus --plsql-source=mbppplus=FILE"),
    ("test_list", "sanitized MBPP: run it with --subset mbpp-sanitized --plsql-source=mbpp-sanitized=FILE"),
    ("entry_point_py", "PLSQLBench's MBPP-PLSQL: run it with --subset mbpp --plsql-data=RELEASE_ROOT (or the file)"),
)


def _other_source_hint(rec: dict[str, Any], required: Mapping[str, Any]) -> str:
    wanted = {alt for name in required for alt in name.split("|")}
    for field_name, what in _SOURCE_MARKS:
        if field_name in rec and field_name not in wanted:  # not the source being read
            return f" (this looks like {what})"
    return ""


def _pick(rec: dict[str, Any], name: str) -> Any:
    for alt in name.split("|"):
        if alt in rec:
            return rec[alt]
    return None


# --------------------------------------------------------------------------- prompts
def _def_of(code: str, name: str) -> tuple[str, str, tuple[str, ...]] | None:
    """(def header, body indent, parameter names) of function ``name`` in ``code``."""
    try:
        tree = parse_python(code)
    except SyntaxError:
        return None
    lines = code.splitlines()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.FunctionDef) and node.name == name and node.body):
            continue
        first = node.body[0]
        params = tuple(a.arg for a in node.args.args)
        if first.lineno == node.lineno:  # def f(x): return x
            return lines[node.lineno - 1][: first.col_offset].rstrip(), "    ", params
        header: list[str] = []
        for line in lines[node.lineno - 1 : first.lineno - 1]:
            header.append(line.rstrip())
            if line.split("#", 1)[0].rstrip().endswith(":"):
                break
        body_line = lines[first.lineno - 1]
        indent = body_line[: len(body_line) - len(body_line.lstrip())] or "    "
        return "\n".join(header), indent, params
    return None


def python_prompt(def_line: str, indent: str, description: str, examples: list[tuple[str, str]]) -> str:
    """The commented Python part of an MBPP prompt, in PLSQLBench's layout."""
    lines = ["", "", def_line, f'{indent}"""']
    lines += [f"{indent}{line}" if line.strip() else "" for line in description.strip().splitlines()]
    for call, expected in examples:
        lines += [f"{indent}>>> {call}", f"{indent}{expected}"]
    lines.append(f'{indent}"""')
    return "\n".join(lines) + "\n"


def _description(prompt: str) -> str:
    text = prompt.strip()
    for quote in ('"""', "'''"):
        if text.startswith(quote) and text.endswith(quote) and len(text) >= 6:
            text = text[3:-3]
    return "\n".join(line for line in text.strip().splitlines() if not line.lstrip().startswith("assert "))


def _examples(parsed: list[ParsedAssertion]) -> list[tuple[str, str]]:
    """Doctest lines from the assertions as written (also those whose values are not literals)."""
    return [(p.call_src, p.expected_src) for p in parsed if p.call_src and p.expected_src]


def _case_from(parsed: ParsedAssertion, case_id: str, origin: str, as_set: bool = False) -> SourceCase:
    case = SourceCase(
        id=case_id, origin=origin, args=parsed.args, expected=parsed.expected, problem=parsed.problem
    )
    case.call_src, case.expected_src = parsed.call_src, parsed.expected_src
    if parsed.problem is None:
        case.as_set = parsed.as_set or as_set
        case.tolerance = parsed.tolerance or evalplus.tolerance_for(parsed.expected, 0)
    return case


def case_id(origin: str, index: int) -> str:
    return f"{origin}-{index:03d}" if origin in ("base", "plus") else f"case-{index}"


# --------------------------------------------------------------------------- MBPP+
def read_mbpp_plus(path: Path) -> list[SourceTask]:
    """evalplus MBPP+ records; expected outputs still to be computed (see :func:`run_reference_job`)."""
    required: dict[str, Any] = {
        "task_id": str,
        "prompt": str,
        "entry_point": str,
        "canonical_solution": str,
        "base_input": list,
        # Mbpp/793 of the official release has ``"plus_input": {}`` for "no plus inputs".
        "plus_input": (list, dict),
        "atol": (int, float),
    }
    tasks: list[SourceTask] = []
    for lineno, rec in _records(path, required):
        tid, ep = rec["task_id"], rec["entry_point"]
        if isinstance(rec["plus_input"], dict):
            if rec["plus_input"]:
                raise DataError(f"{path}:{lineno}: field 'plus_input' must be a list")
            rec["plus_input"] = []
        code = rec["canonical_solution"]
        meta = {"atol": rec["atol"], "source_id": tid}
        task = SourceTask(id=tid, entry_point=ep, params=(), prompt_py="", cases=[], metadata=meta)
        found = _def_of(code, ep)
        if found is None:
            why = "does not parse" if not _parses(code) else f"defines no function {ep!r}"
            task.problem = ("malformed-record", f"canonical_solution {why}")
            tasks.append(task)
            continue
        def_line, indent, params = found
        task.params = params
        try:
            parsed = assertions_in(rec.get("assertion") or "", {ep})
        except SyntaxError:
            parsed = []
        task.prompt_py = python_prompt(def_line, indent, _description(rec["prompt"]), _examples(parsed))
        task.solution = code + "\n" + evalplus.ALTERNATIVE_ORACLES.get(ep, "")
        if ep in evalplus.ANY_OUTPUT_TASKS:
            task.problem = ("no-oracle", f"evalplus's special oracle for {ep} accepts any output")
        for origin in ("base", "plus"):
            raw = rec[f"{origin}_input"]
            try:
                inputs = evalplus.deserialize_inputs(tid, raw)
            except (TypeError, ValueError, IndexError, AttributeError, KeyError) as exc:
                task.problem = ("malformed-record", f"{origin}_input does not match evalplus's layout: {exc}")
                inputs = raw
            for i, inp in enumerate(inputs, 1):
                args = tuple(inp) if isinstance(inp, (list, tuple)) else None
                case = SourceCase(id=case_id(origin, i), origin=origin, args=args)
                if args is None:
                    case.problem = ("arity-mismatch", "the input is not a list of arguments")
                task.cases.append(case)
        tasks.append(task)
    return tasks


def _parses(code: str) -> bool:
    try:
        parse_python(code)
        return True
    except SyntaxError:
        return False


#: A case whose inputs and outputs print longer than this is dropped as ``too-large`` (see
#: :mod:`.pipeline`); an expected value longer than that on its own is kept as an :class:`Oversized`.
MAX_CASE_CHARS = 20_000
#: Calls per child process: a task's cases are split so slow tasks spread over workers.
BATCH = 40


Job = tuple[SourceTask, list[SourceCase]]


def reference_jobs(tasks: list[SourceTask]) -> list[Job]:
    """A task's cases to run, in batches of at most :data:`BATCH` (one child process each).

    Dealt round-robin, not cut in runs: an input list often grows its large inputs together
    (Mbpp/599 has 13 of its 16 calls that sum 10**8 numbers among its first 40 cases), and one
    batch holding them all was the conversion's critical path.
    """
    jobs: list[Job] = []
    for task in tasks:
        if task.problem is not None or not task.solution:
            continue
        live = [c for c in task.cases if c.problem is None]
        batches = -(-len(live) // BATCH)
        jobs += [(task, live[i::batches]) for i in range(batches)]
    return jobs


def run_reference_job(job: Job, timeout: float) -> None:
    """Fill in the expected outputs of one batch of cases by running the canonical solution."""
    task, cases = job
    ep = task.entry_point
    alternative = ep in evalplus.ALTERNATIVE_ORACLES
    calls: list[tuple[str, tuple[Any, ...]]] = []
    for c in cases:
        assert c.args is not None
        calls.append((ep, c.args))
        if alternative:
            calls.append(("_mbpp_alternative", c.args))
    results = run_calls(task.solution or "", calls, timeout)
    step = 2 if alternative else 1
    atol = float(task.metadata.get("atol") or 0)
    for n, c in enumerate(cases):
        res = results[n * step]
        if not res.ok:
            c.problem = (
                "reference-timeout" if res.timed_out else "reference-error",
                res.error or "failed",
            )
            continue
        out = evalplus.not_none_output(res.value) if ep in evalplus.NOT_NONE_TASKS else res.value
        c.expected = out
        if ep in evalplus.ALSO_ACCEPTS:
            c.alternatives = (evalplus.ALSO_ACCEPTS[ep],)
        if alternative and results[n * step + 1].ok and results[n * step + 1].value != out:
            c.alternatives = (results[n * step + 1].value,)
        c.as_set = ep in evalplus.SET_EQ_TASKS
        c.tolerance = evalplus.tolerance_for(out, atol)
        length = len(repr(out))
        if length > MAX_CASE_CHARS:
            c.expected = Oversized(length)  # too large for a test: do not hold megabytes until then


# --------------------------------------------------------------------------- sanitized MBPP
def read_mbpp(path: Path) -> list[SourceTask]:
    """Sanitized MBPP (``text|prompt``, ``code``, ``test_list``; JSON Lines or the official JSON)."""
    tasks: list[SourceTask] = []
    for _lineno, rec in _records(
        path, {"task_id": (int, str), "text|prompt": str, "code": str, "test_list": list}
    ):
        tid = f"Mbpp/{rec['task_id']}"
        tests = [t for t in rec["test_list"] if isinstance(t, str)]
        code = rec["code"]
        meta = {"source_id": rec["task_id"]}
        ep = next((f for f in (called_function(t) for t in tests) if f), None)
        task = SourceTask(id=tid, entry_point=ep or "", params=(), prompt_py="", cases=[], metadata=meta)
        found = _def_of(code, ep) if ep else None
        if not ep or found is None:
            task.problem = (
                "no-entry-point",
                f"no test calls a function defined in the code ({ep or 'no call found'})",
            )
            tasks.append(task)
            continue
        def_line, indent, params = found
        task.params = params
        parsed = [parse_one(t, {ep}) for t in tests]
        for i, p in enumerate(parsed, 1):
            case = _case_from(p, case_id("case", i), "case")
            if p.problem is None and p.callee != ep:
                case.problem = ("unsupported-assertion", f"calls {p.callee}, not {ep}")
            task.cases.append(case)
        task.prompt_py = python_prompt(def_line, indent, _pick(rec, "text|prompt"), _examples(parsed))
        tasks.append(task)
    return tasks


# --------------------------------------------------------------------------- PLSQLBench
def plsqlbench_file(path: Path) -> Path:
    """The MBPP file of a PLSQLBench release root (or the file itself)."""
    return path / PLSQLBENCH_FILE if path.is_dir() else path


def read_plsqlbench(path: Path, null_safe: bool = True) -> list[SourceTask]:
    """PLSQLBench's ``datasets/mbpp/mbpp_plsql.jsonl`` (cases from ``test_py``).

    The published tests dropped the ``set()`` of the original MBPP assertions; in NULL-safe
    mode the tasks evalplus compares as sets are compared as sets again.
    """
    required = {
        "task_id": str,
        "entry_point_py": str,
        "prompt": str,
        "test": str,
        "prompt_py": str,
        "test_py": str,
    }
    tasks: list[SourceTask] = []
    for _lineno, rec in _records(plsqlbench_file(path), required):
        ep = rec["entry_point_py"]
        task = SourceTask(
            id=rec["task_id"],
            entry_point=ep,
            params=(),
            prompt_py=rec["prompt_py"],
            cases=[],
            metadata={"source_id": rec["task_id"], "type_ddl_info": rec.get("type_ddl_info") or []},
            published_prompt=rec["prompt"],
            published_test=rec["test"],
        )
        found = _def_of(rec["prompt_py"], ep)
        if found is not None:
            task.params = found[2]
        try:
            parsed = assertions_in(rec["test_py"], {"candidate"})
        except SyntaxError as exc:
            task.problem = ("malformed-record", f"test_py does not parse ({exc.msg})")
            tasks.append(task)
            continue
        as_set = null_safe and ep in evalplus.SET_EQ_TASKS
        for i, p in enumerate(parsed, 1):
            task.cases.append(_case_from(p, case_id("case", i), "case", as_set=as_set))
        tasks.append(task)
    return tasks

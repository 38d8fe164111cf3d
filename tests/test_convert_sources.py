"""Reading MBPP-style data: assertions, readers, evalplus rules and the sandboxed reference runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_plsqlbench.convert import evalplus, sources
from pytest_plsqlbench.convert.assertions import parse_one
from pytest_plsqlbench.convert.model import Tolerance
from pytest_plsqlbench.convert.sandbox import run_calls
from pytest_plsqlbench.convert.sources import python_prompt, read_mbpp, read_mbpp_plus, read_plsqlbench
from pytest_plsqlbench.errors import DataError


# --------------------------------------------------------------------------- assertions
@pytest.mark.parametrize(
    ("text", "args", "expected", "as_set", "tolerance"),
    [
        ("assert f(1, 'a') == [1, 2]", (1, "a"), [1, 2], False, None),
        ("assert [1, 2] == f(1, 'a')", (1, "a"), [1, 2], False, None),
        ("assert (f((1, 2))) == ((3, 4)), 'message'", ((1, 2),), (3, 4), False, None),
        ("assert f(-2.5) == -1", (-2.5,), -1, False, None),
        ("assert f(1)", (1,), True, False, None),
        ("assert not f(1)", (1,), False, False, None),
        ("assert f(1) is None", (1,), None, False, None),
        ("assert set(f([1, 2])) == set((2, 1))", ([1, 2],), {1, 2}, True, None),
        ("assert f(0) == set([1, 2])", (0,), {1, 2}, False, None),
        (
            "assert math.isclose(f(10), 4188.79, rel_tol=0.001)",
            (10,),
            4188.79,
            False,
            Tolerance(0.0, 0.001, "isclose"),
        ),
    ],
)
def test_supported_assertions(text, args, expected, as_set, tolerance):
    parsed = parse_one(text, {"f"})
    assert parsed.problem is None
    assert parsed.args == args
    assert parsed.expected == expected and type(parsed.expected) is type(expected)
    assert parsed.as_set is as_set
    assert parsed.tolerance == tolerance


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("assert f(14*14)", "non-literal"),
        ("assert f(x) == 1", "non-literal"),
        ("assert f(1) == math.pi", "non-literal"),
        ("assert f(1) == __import__('os').system('true')", "non-literal"),
        ("assert f(n=1) == 2", "unsupported-assertion"),
        ("assert f(1) != 2", "unsupported-assertion"),
        ("assert sorted(f(1)) == [1]", "unsupported-assertion"),
        ("assert f(1) == 2 == 2", "unsupported-assertion"),
        ("x = f(1)", "unsupported-assertion"),
        ("assert f(1 ==", "unsupported-assertion"),
    ],
)
def test_unsupported_assertions_are_reported_not_guessed(text, reason):
    parsed = parse_one(text, {"f"})
    assert parsed.problem is not None and parsed.problem[0] == reason
    assert parsed.args is None


# --------------------------------------------------------------------------- readers
def _jsonl(tmp_path: Path, rows: list, name: str = "data.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def _plus(tid: str = "Mbpp/1", **kw) -> dict:
    row = {
        "task_id": tid,
        "prompt": '"""\nWrite a function that adds one.\n"""\n',
        "entry_point": "add_one",
        "canonical_solution": "def add_one(x):\n    return x + 1\n",
        "base_input": [[1], [2]],
        "plus_input": [[3]],
        "atol": 0,
        "assertion": "assert add_one(1) == 2\nassert add_one(2) == 3\n",
    }
    row.update(kw)
    return row


def test_malformed_lines_name_file_and_line(tmp_path):
    path = _jsonl(tmp_path, [_plus(), "{not json"])
    with pytest.raises(DataError, match=rf"{path}:2: not valid JSON"):
        read_mbpp_plus(path)
    path = _jsonl(tmp_path, [_plus(), _plus(), {"task_id": "Mbpp/3"}])
    with pytest.raises(DataError, match=rf"{path}:3: missing field 'prompt'"):
        read_mbpp_plus(path)
    path = _jsonl(tmp_path, [_plus(base_input="oops")])
    with pytest.raises(DataError, match=rf"{path}:1: field 'base_input' has the wrong type"):
        read_mbpp_plus(path)
    path = _jsonl(tmp_path, [_plus(), [1, 2]])
    with pytest.raises(DataError, match=rf"{path}:2: expected a JSON object"):
        read_mbpp_plus(path)
    array = tmp_path / "sanitized-mbpp.json"
    array.write_text('[{"task_id": 1}, 2]')
    with pytest.raises(DataError, match=rf"{array}: record 1: missing field 'text'"):
        read_mbpp(array)


def test_mbpp_plus_reader_builds_cases_and_the_python_prompt(tmp_path):
    (task,) = read_mbpp_plus(_jsonl(tmp_path, [_plus(plus_input={})]))  # Mbpp/793 ships {} for "none"
    assert [c.id for c in task.cases] == ["base-001", "base-002"]
    assert task.params == ("x",)
    assert task.prompt_py == (
        '\n\ndef add_one(x):\n    """\n    Write a function that adds one.\n'
        '    >>> add_one(1)\n    2\n    >>> add_one(2)\n    3\n    """\n'
    )


def test_python_prompt_matches_the_published_layout(plsqlbench_sample):
    """The published prompt_py is def line + docstring + doctests; rebuild it from its parts."""
    rows = [
        json.loads(x) for x in (plsqlbench_sample / "datasets/mbpp/mbpp_plsql.jsonl").read_text().splitlines()
    ]
    rebuilt = 0
    for row in rows:
        published = row["prompt_py"]
        lines = published.split("\n")
        def_line, indent = lines[2], lines[3][: lines[3].index('"""')]
        description = lines[4][len(indent) :]
        examples = [
            (lines[i][len(indent) + 4 :], lines[i + 1][len(indent) :])
            for i in range(5, len(lines) - 2, 2)
            if lines[i].lstrip().startswith(">>> ")
        ]
        rebuilt += python_prompt(def_line, indent, description, examples) == published
    assert rebuilt == len(rows)


def test_sanitized_reader_accepts_jsonl_and_the_official_json_array(tmp_path):
    row = {
        "task_id": 7,
        "prompt": "Write a function to double.",
        "code": "def double(x):\n  return 2 * x",
        "test_imports": [],
        "test_list": ["assert double(2) == 4", "assert double(14*14) == 392", "assert helper(1) == 1"],
    }
    array = tmp_path / "sanitized-mbpp.json"
    array.write_text(json.dumps([row]))
    (task,) = read_mbpp(array)
    assert task.id == "Mbpp/7" and task.entry_point == "double"
    assert [c.problem[0] if c.problem else None for c in task.cases] == [
        None,
        "non-literal",
        "unsupported-assertion",
    ]
    row2 = {k: v for k, v in row.items() if k != "prompt"} | {"text": row["prompt"]}
    (task2,) = read_mbpp(_jsonl(tmp_path, [row2]))
    assert task2.prompt_py == task.prompt_py
    assert ">>> double(14*14)" in task.prompt_py  # shown as written, even if not convertible


def test_plsqlbench_reader_restores_set_comparison_only_when_null_safe(plsqlbench_sample):
    safe = {t.id: t for t in read_plsqlbench(plsqlbench_sample)}
    published = {t.id: t for t in read_plsqlbench(plsqlbench_sample, null_safe=False)}
    assert len(safe) == 28
    assert all(c.as_set for c in safe["MBPP/2"].cases)  # similar_elements: evalplus compares sets
    assert not any(c.as_set for c in published["MBPP/2"].cases)
    assert not any(c.as_set for c in safe["MBPP/1"].cases)
    assert safe["MBPP/3"].cases[0].expected is False


# --------------------------------------------------------------------------- evalplus rules
def test_evalplus_deserialisation_rebuilds_tuples_per_task():
    assert evalplus.deserialize_inputs("Mbpp/2", [[[1, 2], [3]]]) == [[(1, 2), (3,)]]
    assert evalplus.deserialize_inputs("Mbpp/64", [[[["a", 1]]]]) == [[[("a", 1)]]]
    assert evalplus.deserialize_inputs("Mbpp/791", [[[1, [2, 3]]]]) == [[(1, (2, 3))]]
    assert evalplus.deserialize_inputs("Mbpp/4", [[[1, 2], 1]]) == [[[1, 2], 1]]


def test_evalplus_float_rule():
    assert evalplus.tolerance_for(1.5, 0) == Tolerance(1e-6, 1e-7)
    assert evalplus.tolerance_for([1, 2.5], 0) == Tolerance(1e-6, 1e-7)  # widened: any float
    assert evalplus.tolerance_for(3, 0) == Tolerance()
    assert evalplus.tolerance_for(3, 1e-4) == Tolerance(1e-4, 1e-7)
    assert evalplus.not_none_output(None) is False
    assert evalplus.not_none_output("match") is True
    assert evalplus.not_none_output(False) is False


# --------------------------------------------------------------------------- sandbox
@pytest.fixture(params=["fresh", "forked"], autouse=False)
def child_mode(request):
    """Every sandbox guarantee holds for fresh interpreters and for children forked by a zygote."""
    from pytest_plsqlbench.convert import sandbox

    if request.param == "fresh":
        yield request.param
        return
    with sandbox.zygotes(1):
        yield request.param


def test_sandbox_runs_calls_and_keeps_python_types(child_mode):
    code = "def f(x):\n    return (x, {x}, {'k': [x, 2.5]}, None)\n"
    (res,) = run_calls(code, [("f", (3,))], 5.0)
    assert res.ok and res.value == (3, {3}, {"k": [3, 2.5]}, None)


def test_sandbox_has_no_network_and_reports_errors(child_mode):
    code = (
        "import socket\n"
        "def f(x):\n"
        "    socket.create_connection(('127.0.0.1', 9))\n"
        "def g(x):\n"
        "    s = socket.socket()\n"
        "def h(x):\n"
        "    return 1 // x\n"
    )
    results = run_calls(code, [("f", (1,)), ("g", (1,)), ("h", (0,)), ("h", (1,)), ("missing", (1,))], 5.0)
    assert [r.ok for r in results] == [False, False, False, True, False]
    assert "network access is disabled" in results[0].error
    assert "network access is disabled" in results[1].error
    assert "ZeroDivisionError" in results[2].error
    assert results[3].value == 1
    assert "no function 'missing'" in results[4].error


def test_sandbox_times_out_one_call_and_continues_with_the_next(child_mode):
    code = "def spin(x):\n    while x:\n        pass\n    return 'done'\n"
    results = run_calls(code, [("spin", (1,)), ("spin", (0,))], 0.5)
    assert results[0].timed_out and not results[0].ok
    assert results[1].ok and results[1].value == "done"


def test_sandbox_survives_a_solution_that_does_not_load(child_mode):
    results = run_calls("def f(:\n", [("f", (1,)), ("f", (2,))], 1.0)
    assert [r.ok for r in results] == [False, False]
    assert "does not load" in results[0].error


def test_sandbox_kills_a_call_hung_outside_python_and_goes_on(child_mode, monkeypatch):
    """A sleep burns no CPU, so only the parent's wall-clock watchdog can end it."""
    from pytest_plsqlbench.convert import sandbox

    monkeypatch.setattr(sandbox, "STARTUP_GRACE", 0.5)
    code = "import time\ndef f(x):\n    if x == 1:\n        time.sleep(60)\n    return x\n"
    results = run_calls(code, [("f", (0,)), ("f", (1,)), ("f", (2,))], 0.2)
    assert results[0].ok and results[0].value == 0
    assert results[1].timed_out and "child killed" in results[1].error
    assert results[2].ok and results[2].value == 2


def test_sandbox_child_that_exits_mid_batch(child_mode):
    code = "import os\ndef f(x):\n    if x == 1:\n        os._exit(3)\n    return x\n"
    results = run_calls(code, [("f", (0,)), ("f", (1,)), ("f", (2,))], 1.0)
    assert [r.ok for r in results] == [True, False, True]
    assert results[2].value == 2


def test_each_batch_gets_a_process_no_solution_ran_in(child_mode):
    """Module state a solution leaves (here a global counter and a patched builtin) is gone
    in the next batch, as with a new interpreter."""
    code = "import builtins\nn = [0]\ndef f(x):\n    n[0] += 1\n    builtins.len = lambda v: 42\n    return n[0]\n"
    first = run_calls(code, [("f", (0,)), ("f", (0,))], 1.0)
    second = run_calls("def g(x):\n    return len([x])\n", [("g", (0,))], 1.0)
    again = run_calls(code, [("f", (0,))], 1.0)
    assert [r.value for r in first] == [1, 2]
    assert second[0].value == 1 and again[0].value == 1


def test_a_dead_zygote_is_replaced():
    from pytest_plsqlbench.convert import sandbox

    with sandbox.zygotes(1):
        zygote = sandbox._ZYGOTES.queue[0]
        zygote.proc.kill()
        zygote.proc.wait()
        (res,) = run_calls("def f(x):\n    return x + 1\n", [("f", (1,))], 1.0)
        assert res.ok and res.value == 2
        assert sandbox._ZYGOTES.queue[0] is not zygote and sandbox._ZYGOTES.queue[0].alive
    assert sandbox._ZYGOTES is None


@pytest.mark.parametrize(
    "value",
    [
        "x" * 50,
        [1, 2, 3] * 10,
        [("ab", 1.5, None, True)] * 8,
        {"k": [1, 2], (1, 2): {3}},
        [[["é"] * 3] * 3] * 3,
        10**40,
    ],
)
def test_output_size_bound_never_refuses_what_fits(value):
    """json_size_exceeds is a lower bound: True only when the exact JSON line is longer."""
    import json

    from pytest_plsqlbench.convert._child import encode, json_size_exceeds

    exact = len(json.dumps(encode(value)))
    assert not json_size_exceeds(value, exact)
    assert json_size_exceeds(value, 0)


def test_giant_outputs_are_refused_quickly_and_the_same_way(child_mode):
    code = "def f(n):\n    return [('colour',) * 77] * n\n"
    (small, giant) = run_calls(code, [("f", (1,)), ("f", (2_000_000,))], 5.0)
    assert small.ok and small.value == [("colour",) * 77]
    assert not giant.ok and giant.error == "output larger than 5 MB" and not giant.timed_out


def test_an_output_too_large_for_a_test_is_not_kept(tmp_path):
    from pytest_plsqlbench.convert.model import Oversized
    from pytest_plsqlbench.convert.pipeline import type_task

    row = {
        "task_id": "Mbpp/901", "prompt": '"""\nRepeat.\n"""', "entry_point": "rep",
        "canonical_solution": "def rep(n):\n    return 'ab' * n\n",
        "base_input": [[1], [2], [30000]], "plus_input": [], "atol": 0, "assertion": "assert rep(1) == 'ab'\n",
    }
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (task,) = sources.read_mbpp_plus(path)
    for job in sources.reference_jobs([task]):
        sources.run_reference_job(job, 5.0)
    assert isinstance(task.cases[2].expected, Oversized) and task.cases[2].expected.repr_length == 60002
    typed = type_task(task)
    assert [(d.case_id, d.reason, d.detail) for d in typed.dropped] == [
        ("base-003", "too-large", "60007 characters of Python literals (limit 20000)")
    ]


def _encode_slow(value, depth=0):
    """encode as defined element by element (the oracle for its fast paths)."""
    from pytest_plsqlbench.convert._child import encode

    if depth > 200:
        raise ValueError("value nested deeper than 200 levels")
    if isinstance(value, list):
        return [_encode_slow(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return {"$t": [_encode_slow(v, depth + 1) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"$s": [_encode_slow(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {"$d": [[_encode_slow(k, depth + 1), _encode_slow(v, depth + 1)] for k, v in value.items()]}
    return encode(value, depth)


def _size_slow(value, limit):
    total, stack = 0, [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            total += len(v) + 2
        elif isinstance(v, (list, tuple, set, frozenset)):
            total += 2 + 2 * max(len(v) - 1, 0)
            stack.extend(v)
        elif isinstance(v, dict):
            total += 2 + 2 * max(len(v) - 1, 0)
            for k, item in v.items():
                stack += [k, item]
        else:
            total += 1
        if total > limit:
            return True
    return False


def _contains_float_slow(value):
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_contains_float_slow(k) or _contains_float_slow(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_contains_float_slow(v) for v in value)
    return False


class _Flag(int):
    pass


class _Ratio(float):
    pass


def _nested(depth, leaf):
    for _ in range(depth):
        leaf = [leaf]
    return leaf


FAST_PATH_VALUES = [
    [], (), [1, 2, 3], (1, "a", None, True), [2**53 - 1, -(2**53) + 1], [2**53], [-(2**53)], [1, 2**60, 3],
    [1.5, float("nan")], [float("inf")], (1, 2.5, "x"), [1, 2.5, -float("inf")], ["é", "", "a\\\"b"],
    [[1, 2], [3, 4.0]], [(1, 2), {3}], [{"a": 1}], [_Flag(3), 1], [_Ratio(0.5), 1], [None, False],
    {1, 2.0}, frozenset({"a"}), [[["x"] * 3] * 2] * 2, [10**40], [complex(1, 2)], [b"x"],
    _nested(199, [1, 2]), _nested(200, [1, 2]), _nested(201, [1, 2]),
]


@pytest.mark.parametrize("value", FAST_PATH_VALUES, ids=range(len(FAST_PATH_VALUES)))
def test_the_fast_paths_over_plain_collections_give_what_element_by_element_does(value):
    """Lists and tuples of plain values are encoded, decoded, sized and searched for floats in C
    (a million-element output was most of a conversion child's own time): same results."""
    import json

    from pytest_plsqlbench.convert._child import decode, encode, json_size_exceeds
    from pytest_plsqlbench.convert.evalplus import contains_float

    try:
        want = json.dumps(_encode_slow(value))
    except ValueError as exc:
        with pytest.raises(ValueError, match=str(exc)):
            json.dumps(encode(value))
    else:
        got = json.dumps(encode(value))
        assert got == want
        # (by repr: nan is not equal to itself, an opaque value has no equality)
        assert repr(decode(json.loads(got))) == repr(decode(json.loads(want)))
    for limit in (0, 1, 5, 17, 60, 10**6):
        assert json_size_exceeds(value, limit) == _size_slow(value, limit), limit
    assert contains_float(value) == _contains_float_slow(value)


def test_kept_reference_results_come_back_as_computed(tmp_path, monkeypatch):
    """A second conversion of a source reads the calls' results the first one kept -- values of
    every kind, errors and timeouts alike -- and a torn last line (an interrupted run) is computed
    again, not misread."""
    from pytest_plsqlbench.convert import sandbox

    code = (
        "import re\n"
        "def f(x):\n"
        "    if x == 0:\n        raise ValueError('zero')\n"
        "    if x == 1:\n        while True: pass\n"
        "    return [(x, 'é'), {x, -x}, {x: [2.5, float('nan')]}, 10**40, float('inf'), re.compile('a')]\n"
    )
    calls = [("f", (n,)) for n in (0, 1, 2, 3)]
    path = tmp_path / "calls.jsonl"
    with sandbox.call_store(path):
        first = sandbox.run_calls(code, calls, 1.0)
    assert [r.ok for r in first] == [False, False, True, True] and first[1].timed_out
    assert len(path.read_text().splitlines()) == 4

    def no_solution(*a, **k):
        raise AssertionError("ran the solution again")

    with monkeypatch.context() as m:
        m.setattr(sandbox, "_run_pooled", no_solution)
        with sandbox.call_store(path):
            again = sandbox.run_calls(code, calls, 1.0)
    assert repr(again) == repr(first)
    # Another time limit is another call.
    with monkeypatch.context() as m:
        m.setattr(sandbox, "_run_pooled", no_solution)
        with sandbox.call_store(path), pytest.raises(AssertionError, match="ran the solution again"):
            sandbox.run_calls(code, calls[2:], 2.0)
    # An interrupted run tore its last line: that call runs again, the others are read.
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    ran: list[int] = []
    real = sandbox._run_pooled

    def counting(code, calls, timeout):
        ran.append(len(calls))
        return real(code, calls, timeout)

    monkeypatch.setattr(sandbox, "_run_pooled", counting)
    with sandbox.call_store(path):
        third = sandbox.run_calls(code, calls, 1.0)
    assert ran == [1] and repr(third) == repr(first)
    with monkeypatch.context() as m:  # and what it computed again is read from then on
        m.setattr(sandbox, "_run_pooled", no_solution)
        with sandbox.call_store(path):
            assert repr(sandbox.run_calls(code, calls, 1.0)) == repr(first)

"""Read MBPP-style Python assertions with ``ast`` into literal arguments and expected values.

Supported forms (anything else is reported, never guessed):

* ``assert f(a, b) == expected`` (either side, any parentheses, an optional message);
* ``assert set(f(a)) == set(expected)`` -- compared as sets;
* ``set([...])``, ``tuple([...])`` ... of a literal count as literals;
* ``assert math.isclose(f(a), expected, rel_tol=r, abs_tol=t)`` -- compared like ``isclose``;
* ``assert f(a)`` / ``assert not f(a)`` -- expected ``True`` / ``False``;
* ``assert f(a) is None``.

Arguments and expected values must be Python literals (``ast.literal_eval``); a call whose
argument is an expression (``14*14``, a variable, ``math.pi``) is rejected as non-literal.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from typing import Any

from .model import Tolerance

ISCLOSE_DEFAULT_REL = 1e-9


@dataclass
class ParsedAssertion:
    """One assertion: its call's literal arguments and the expected value, or a problem."""

    text: str
    args: tuple[Any, ...] | None = None
    expected: Any = None
    as_set: bool = False
    tolerance: Tolerance | None = None
    call_src: str | None = None
    expected_src: str | None = None
    problem: tuple[str, str] | None = None
    #: The name of the function the assertion calls.
    callee: str | None = None


def parse_python(source: str) -> ast.Module:
    """``ast.parse`` without the dataset's invalid-escape warnings (``'\\w'`` in old MBPP code)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(source)


def _segment(source: str, node: ast.AST) -> str:
    return ast.get_source_segment(source, node) or ast.unparse(node)


#: Builtin constructors of literal arguments that are still literals (``set([1, 2])``).
_CONSTRUCTORS = {"set": set, "frozenset": frozenset, "tuple": tuple, "list": list, "dict": dict}


def _literal(node: ast.AST, source: str, what: str) -> Any:
    try:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _CONSTRUCTORS
            and len(node.args) <= 1
            and not node.keywords
        ):
            inner = ast.literal_eval(node.args[0]) if node.args else ()
            return _CONSTRUCTORS[node.func.id](inner)
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise _Problem("non-literal", f"{what} `{_segment(source, node)[:80]}` is not a literal") from None


class _Problem(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _is_call_to(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names


def _unwrap_set(node: ast.AST) -> ast.AST | None:
    """The argument of ``set(x)``, else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "set"
        and len(node.args) == 1
        and not node.keywords
    ):
        return node.args[0]
    return None


def _is_isclose(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.value.id == "math" and func.attr == "isclose"
    return isinstance(func, ast.Name) and func.id == "isclose"


def parse_assert(node: ast.Assert, source: str, names: set[str]) -> ParsedAssertion:
    """Parse one ``assert`` statement calling one of ``names``."""
    out = ParsedAssertion(text=_segment(source, node))
    try:
        call, expected_node, as_set, tol, expected_const = _shape(node.test, names)
        out.callee = call.func.id  # type: ignore[attr-defined]
        out.call_src = _segment(source, call)
        out.expected_src = (
            _segment(source, expected_node) if expected_node is not None else repr(expected_const)
        )
        if as_set:
            out.call_src = f"set({out.call_src})"
        if call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
            raise _Problem("unsupported-assertion", "keyword or starred arguments")
        out.args = tuple(_literal(a, source, f"argument {i}") for i, a in enumerate(call.args, 1))
        out.expected = (
            _literal(expected_node, source, "expected value") if expected_node is not None else expected_const
        )
        out.as_set, out.tolerance = as_set, tol
        if as_set and not isinstance(out.expected, (set, frozenset)):
            raise _Problem("unsupported-assertion", "set() of a non-collection expected value")
    except _Problem as p:
        out.problem = (p.reason, p.detail)
        out.args = None
    return out


def _shape(test: ast.expr, names: set[str]) -> tuple[ast.Call, ast.AST | None, bool, Tolerance | None, Any]:
    """(call, expected node, as_set, tolerance, expected constant) of an assertion test."""
    if _is_call_to(test, names):
        return test, None, False, None, True  # type: ignore[return-value]
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _is_call_to(test.operand, names):
        return test.operand, None, False, None, False  # type: ignore[return-value]
    if _is_isclose(test):
        assert isinstance(test, ast.Call)
        if len(test.args) != 2 or not _is_call_to(test.args[0], names):
            raise _Problem("unsupported-assertion", "isclose() without (call, expected) arguments")
        rel, abs_ = ISCLOSE_DEFAULT_REL, 0.0
        for kw in test.keywords:
            try:
                value = float(ast.literal_eval(kw.value))
            except (ValueError, TypeError, SyntaxError):
                raise _Problem("non-literal", f"isclose {kw.arg} is not a number") from None
            if kw.arg == "rel_tol":
                rel = value
            elif kw.arg == "abs_tol":
                abs_ = value
            else:
                raise _Problem("unsupported-assertion", f"isclose keyword {kw.arg!r}")
        return test.args[0], test.args[1], False, Tolerance(abs_, rel, "isclose"), None  # type: ignore[return-value]
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, right, op = test.left, test.comparators[0], test.ops[0]
        if (
            isinstance(op, ast.Is)
            and _is_call_to(left, names)
            and isinstance(right, ast.Constant)
            and right.value is None
        ):
            return left, None, False, None, None  # type: ignore[return-value]
        if isinstance(op, ast.Eq):
            for call_side, exp_side in ((left, right), (right, left)):
                if _is_call_to(call_side, names):
                    return call_side, exp_side, False, None, None  # type: ignore[return-value]
                inner = _unwrap_set(call_side)
                if inner is not None and _is_call_to(inner, names):
                    if _unwrap_set(exp_side) is None and not isinstance(exp_side, ast.Set):
                        raise _Problem("unsupported-assertion", "set(call) compared with a non-set")
                    return inner, exp_side, True, None, None  # type: ignore[return-value]
    raise _Problem(
        "unsupported-assertion", "not of the form `f(...) == literal` (or set/isclose/not variants)"
    )


def assertions_in(source: str, names: set[str]) -> list[ParsedAssertion]:
    """Every ``assert`` in ``source`` (anywhere, e.g. inside ``def check(candidate)``)."""
    tree = parse_python(source)
    return [parse_assert(node, source, names) for node in ast.walk(tree) if isinstance(node, ast.Assert)]


def parse_one(text: str, names: set[str]) -> ParsedAssertion:
    """Parse a single assertion statement given as text (one MBPP ``test_list`` entry)."""
    try:
        tree = parse_python(text.strip())
    except SyntaxError as exc:
        return ParsedAssertion(text=text, problem=("unsupported-assertion", f"not valid Python ({exc.msg})"))
    stmts = tree.body
    if len(stmts) != 1 or not isinstance(stmts[0], ast.Assert):
        return ParsedAssertion(text=text, problem=("unsupported-assertion", "not a single assert statement"))
    return parse_assert(stmts[0], text.strip(), names)


def called_function(text: str) -> str | None:
    """The function an MBPP test assertion is about (first plain call not a builtin helper)."""
    try:
        tree = parse_python(text.strip())
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in _HELPERS:
            return node.func.id
    return None


_HELPERS = {
    "set",
    "sorted",
    "isclose",
    "abs",
    "round",
    "list",
    "tuple",
    "len",
    "str",
    "int",
    "float",
    "frozenset",
}

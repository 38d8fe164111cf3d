"""evalplus's own MBPP+ evaluation rules, which the converted tests must reproduce.

From evalplus (``evalplus/data/mbpp.py``, ``evalplus/eval/__init__.py``,
``evalplus/eval/_special_oracle.py``, MBPP+ v0.2.0):

* the release stores tuples, sets and complex numbers as JSON lists/strings; evalplus
  rebuilds them per task id before running anything (:func:`deserialize_inputs`);
* ``MBPP_OUTPUT_SET_EQ_TASKS`` compare ``set(out) == set(exp)``;
* ``MBPP_OUTPUT_NOT_NONE_TASKS`` only check whether the result is None (a bool result is
  compared as is);
* special oracles: ``are_equivalent`` (Mbpp/164) accepts any output -- nothing to test,
  so the task is rejected; ``sum_div`` (Mbpp/295) also accepts 0; ``surface_Area``
  (Mbpp/581) and ``digit_distance_nums`` (Mbpp/558) also accept the value of an
  alternative formula (computed here at conversion time);
* floats: with ``atol == 0`` a float (or list of floats) expected value gets ``atol = 1e-6``;
  when a tolerance applies, numbers match within ``atol + 1e-7 * |expected|``
  (``np.allclose``). We apply the tolerance whenever the expected value contains a float,
  not only for all-float lists: PL/SQL's decimal arithmetic cannot reproduce binary-float
  results bit for bit, which evalplus's exact comparison of mixed lists silently requires.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .model import Tolerance

SET_EQ_TASKS = frozenset(
    {
        "similar_elements",
        "find_char_long",
        "common_in_nested_lists",
        "extract_singly",
        "larg_nnum",
        "intersection_array",
        "find_dissimilar",
        "Diff",
    }
)
NOT_NONE_TASKS = frozenset({"check_str", "text_match_three", "text_starta_endb"})
#: Entry points whose evalplus oracle accepts any output.
ANY_OUTPUT_TASKS = frozenset({"are_equivalent"})
#: Entry points whose evalplus oracle also accepts a fixed value.
ALSO_ACCEPTS = {"sum_div": 0}
#: Entry points whose evalplus oracle also accepts an alternative formula's value; the code
#: defines ``_mbpp_alternative(*args)`` and runs in the same sandbox as the solution.
ALTERNATIVE_ORACLES = {
    # The height is the perpendicular height: slant = sqrt((b/2)^2 + h^2), rounded total.
    "surface_Area": (
        "def _mbpp_alternative(base_edge, height):\n"
        "    import math\n"
        "    slant = math.sqrt((base_edge / 2) ** 2 + height ** 2)\n"
        "    return round(base_edge ** 2 + 2 * base_edge * slant)\n"
    ),
    # Digits compared after left-padding the shorter number with zeros.
    "digit_distance_nums": (
        "def _mbpp_alternative(n1, n2):\n"
        "    a, b = str(n1), str(n2)\n"
        "    width = max(len(a), len(b))\n"
        "    a, b = a.zfill(width), b.zfill(width)\n"
        "    return sum(abs(int(x) - int(y)) for x, y in zip(a, b))\n"
    ),
}
FLOAT_ATOL = 1e-6
RTOL = 1e-7


def _tuple_all(value: Any) -> Any:
    return tuple(_tuple_all(v) for v in value) if isinstance(value, list) else value


_RULES: dict[int, Callable[[list[Any]], list[Any]]] = {}


def _rule(ids: list[int], fn: Callable[[list[Any]], list[Any]]) -> None:
    for i in ids:
        _RULES[i] = fn


# Each rule maps one input (the argument list) to the argument list evalplus passes.
_rule(
    [
        2,
        116,
        132,
        143,
        222,
        261,
        273,
        394,
        399,
        421,
        424,
        429,
        470,
        560,
        579,
        596,
        616,
        630,
        726,
        740,
        744,
        809,
    ],
    lambda inp: [tuple(a) for a in inp],
)
_rule(
    [63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780],
    lambda inp: [[tuple(x) for x in a] for a in inp],
)
_rule([75, 413, 444, 753], lambda inp: [[tuple(x) for x in inp[0]], inp[1]])
_rule([106, 750], lambda inp: [inp[0], tuple(inp[1])])
_rule([115], lambda inp: [[set(x) if isinstance(x, list) and x else {} for x in inp[0]]])
_rule([124], lambda inp: [float(inp[0]), complex(inp[1])])
_rule([250, 405, 446, 617, 720, 763, 808], lambda inp: [tuple(inp[0]), *inp[1:]])
_rule([259, 401, 445], lambda inp: [tuple(tuple(x) for x in a) for a in inp])
_rule([278], lambda inp: [tuple(tuple(x) if isinstance(x, list) else x for x in inp[0])])
_rule([307], lambda inp: [tuple(inp[0]), inp[1], inp[2]])
_rule([722], lambda inp: [{k: tuple(v) for k, v in inp[0].items()}, *inp[1:]])
_rule([252], lambda inp: [complex(inp[0])])
_rule([580, 615, 791], lambda inp: list(_tuple_all(inp)))


def deserialize_inputs(task_id: str, inputs: list[Any]) -> list[list[Any]]:
    """evalplus's per-task reconstruction of tuples/sets/complex numbers from JSON lists."""
    try:
        number = int(task_id.rsplit("/", 1)[-1])
    except ValueError:
        return inputs
    rule = _RULES.get(number)
    if rule is None:
        return inputs
    return [list(rule(list(inp))) for inp in inputs]


_COLLECTIONS = (list, tuple, set, frozenset, dict)


def contains_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(contains_float(k) or contains_float(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        # Decided from the element types where it can be (an expected list of 10^5 numbers was
        # a noticeable part of a conversion): a float among them, or nothing to look inside.
        types = set(map(type, value))
        if any(issubclass(t, float) for t in types):
            return True
        if not any(issubclass(t, _COLLECTIONS) for t in types):
            return False
        return any(contains_float(v) for v in value)
    return False


def tolerance_for(expected: Any, atol: float) -> Tolerance:
    """evalplus's float rule for one expected value (widened to any contained float)."""
    if atol:
        return Tolerance(float(atol), RTOL)
    if contains_float(expected):
        return Tolerance(FLOAT_ATOL, RTOL)
    return Tolerance()


def not_none_output(out: Any) -> bool:
    """The expected value of a NOT_NONE task: the bool itself, or whether a result exists."""
    return out if isinstance(out, bool) else out is not None

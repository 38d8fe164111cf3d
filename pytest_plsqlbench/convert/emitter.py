"""What both dialect emitters share: the signature, cases in emitter terms, naming helpers.

An emitter turns a typed signature and typed cases into text: type DDL (prompt and
fixture), literals, the prompt scaffold, one test script per case and the replay function.
It knows nothing about datasets; :mod:`.pipeline` decides what to emit.
"""

from __future__ import annotations

import abc
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ..tasks import Fixture
from .model import EXACT, Tolerance
from .sqltypes import EXACT_STORAGE, ListT, RecordT, Scalar, SqlType, Storage, walk

#: Published wording of the requirement list (PLSQLBench MBPP prompts).
REQUIREMENTS = (
    "Use only the given argument names and types",
    "Do not generate type definitions!",
    "Return exactly the specified return type",
    "Deterministic behavior",
    "No DB access, no dynamic SQL",
)

#: Test assertion styles: NULL-safe (default) or the published blocks' ``!=``/``<>``.
ASSERTION_MODES = ("null-safe", "published")


@dataclass(frozen=True)
class Signature:
    """A function as SQL sees it: its name, parameter types and return type.

    ``returns`` carries the comparison semantics too (a top-level ``set`` order for
    evalplus's set-compared tasks), which does not change the SQL type.
    """

    name: str
    params: tuple[SqlType, ...]
    returns: SqlType

    def types(self) -> list[SqlType]:
        return [*self.params, self.returns]


@dataclass(frozen=True)
class EmitCase:
    """One test case ready to emit: Python values of fitting types."""

    id: str
    args: tuple[Any, ...]
    expected: Any
    alternatives: tuple[Any, ...] = ()
    tolerance: Tolerance = EXACT
    #: How the result compares when that differs from the return type's own semantics
    #: (the same SQL type with a top-level set order, for ``set(f(x)) == set(y)``).
    compare: SqlType | None = None

    def compare_type(self, sig: Signature) -> SqlType:
        return self.compare if self.compare is not None else sig.returns

    @property
    def label(self) -> str:
        """The name in the failure message (``case_1`` as in the published blocks)."""
        return self.id.replace("-", "_")

    @property
    def outputs(self) -> tuple[Any, ...]:
        return (self.expected, *self.alternatives)


@dataclass(frozen=True)
class TypeDef:
    """One type a task needs: shown to the model (``prompt_ddl``) and created by a fixture."""

    name: str
    prompt_ddl: str
    fixture: Fixture


def format_number(value: Any) -> str:
    """A number literal both dialects read back exactly (``True`` -> ``1``)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return str(value)
    return repr(float(value))


def format_plain(value: float) -> str:
    """A tolerance constant without exponent notation (``1e-06`` -> ``0.000001``)."""
    text = format(Decimal(repr(value)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def shorten(raw: str, limit: int, prefix: str) -> str:
    """``raw`` if it fits the identifier limit, else a stable hashed name."""
    if len(raw) <= limit:
        return raw
    return prefix + hashlib.sha1(raw.encode()).hexdigest()[:10]


def order_code(t: SqlType) -> str:
    """The comparison semantics of every collection in ``t`` (``""`` when all are ordered)."""
    codes = "".join(x.order[0] for x in walk(t) if isinstance(x, ListT))
    return "" if set(codes) <= {"l"} else "_" + codes


def comment_safe(text: str) -> str:
    """Text that cannot end the ``/* ... */`` comment it is shown in."""
    return text.replace("*/", "* /")


class Emitter(abc.ABC):
    """Text generation for one dialect."""

    dialect: str = ""
    #: First line of the prompt.
    intro: str = ""
    #: How the database holds the cases' values (cases it cannot hold exactly are dropped).
    storage: Storage = EXACT_STORAGE
    #: PLSQLBench's published prompts and test blocks are in this dialect: a task's generated
    #: prompt and cases are checked against them (and ``--assertions published`` uses them).
    published: bool = False

    # ----------------------------------------------------------------- types
    @abc.abstractmethod
    def type_sql(self, t: SqlType) -> str:
        """How ``t`` is written in a parameter list or declaration."""

    @abc.abstractmethod
    def own_type_defs(self, t: SqlType) -> list[TypeDef]:
        """The user-defined types ``t`` itself needs, not counting those of its parts."""

    def type_defs(self, t: SqlType) -> list[TypeDef]:
        """The user-defined types ``t`` needs, dependencies first."""
        return [d for part in walk(t) for d in self.own_type_defs(part)]

    def signature_type_defs(self, sig: Signature) -> list[TypeDef]:
        seen: dict[str, TypeDef] = {}
        for t in sig.types():
            for d in self.type_defs(t):
                seen.setdefault(d.name, d)
        return list(seen.values())

    def fixtures(self, sig: Signature, cases: Sequence[EmitCase], mode: str) -> tuple[Fixture, ...]:
        return tuple(d.fixture for d in self.signature_type_defs(sig))

    # ----------------------------------------------------------------- values
    @abc.abstractmethod
    def literal(self, value: Any, t: SqlType) -> str:
        """``value`` (which fits ``t``) as an expression of type ``t``."""

    #: Canonical case values by case id, when one emitter serves several assertion modes of a
    #: task (they do not depend on the mode): set by :func:`~.pipeline.emit_streaming`.
    canon_memo: dict[str, Any] | None = None

    def remember_literals(self) -> None:
        """From now on render each collection or string literal once per (object, type).

        A test script, the replay function and both assertion modes spell the same case
        values; rendering them once is most of the emission time of MBPP+. The memo keeps
        each value alive, so an ``id`` is never reused while it is cached: make one emitter
        per task.
        """
        render = self.literal
        memo: dict[tuple[int, SqlType], tuple[Any, str]] = {}

        def literal(value: Any, t: SqlType) -> str:
            if not isinstance(value, (str, list, tuple, dict, set, frozenset)):
                return render(value, t)
            key = (id(value), t)
            hit = memo.get(key)
            if hit is None:
                hit = memo[key] = (value, render(value, t))
            return hit[1]

        self.literal = literal  # type: ignore[method-assign]

    def call(self, sig: Signature, args: Sequence[Any]) -> str:
        return f"{sig.name}(" + ", ".join(self.literal(a, t) for a, t in zip(args, sig.params)) + ")"

    # ----------------------------------------------------------------- scripts
    @abc.abstractmethod
    def scaffold(self, sig: Signature) -> list[str]:
        """The function header with ``p1..pN`` parameters and the exact return type."""

    @abc.abstractmethod
    def body_frame(self, python_comment: str) -> list[str]:
        """What follows the header: the Python signature/docstring comment and an empty body."""

    def prompt(self, sig: Signature, prompt_py: str, notes: Sequence[str] = ()) -> str:
        """The paper's MBPP prompt: requirements, commented DDL, scaffold, Python comment."""
        ddl = "\n".join(d.prompt_ddl for d in self.signature_type_defs(sig))
        head = [self.intro, "", "Requirements:", self.requirements(notes), "", "", "/*", ddl, "*/", "    "]
        return "\n".join([*head, *self.scaffold(sig), *self.body_frame(comment_safe(prompt_py))])

    @abc.abstractmethod
    def test_script(self, sig: Signature, case: EmitCase, mode: str) -> str:
        """A self-contained script that raises unless the function passes ``case``."""

    @abc.abstractmethod
    def replay(self, sig: Signature, cases: Sequence[EmitCase]) -> str:
        """A function with ``sig`` that maps every case's inputs to its expected output."""

    # ----------------------------------------------------------------- shared bits
    def requirements(self, notes: Sequence[str]) -> str:
        return "\n".join(f"- {r}" for r in (*REQUIREMENTS, *notes))

    @staticmethod
    def type_notes(sig: Signature, bool_word: str) -> list[str]:
        """Extra requirement lines for encodings a model cannot guess from the DDL alone."""
        notes: list[str] = []
        kinds = [x for t in sig.types() for x in walk(t)]
        if any(isinstance(x, ListT) and x.order == "map" for x in kinds):
            notes.append(
                "Python dicts are passed and returned as collections of (key, value) entries, in any order"
            )
        if any(isinstance(x, RecordT) and not x.kv for x in kinds):
            notes.append(
                "Python tuples of mixed types are object values with fields F1, F2, ... in tuple order"
            )
        if bool_word and any(isinstance(x, Scalar) and x.kind == "bool" for x in kinds):
            notes.append(bool_word)
        return notes

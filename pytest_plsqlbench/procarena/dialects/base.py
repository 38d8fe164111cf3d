"""What ProcArena writes or reads differently per dialect, as one object per dialect.

The family's code asks an :class:`Adapter` (found by :func:`.adapter_for`) instead of comparing
dialect names, so a third dialect is one more module here, not an edit of every caller.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from ...dialects.base import Backend
    from ...tasks import Task
    from ..access import Access


class Adapter(abc.ABC):
    """ProcArena's prompt words, call forms, lexer and database access in one dialect."""

    #: The dialect's name (``Task.dialect``, ``--plsql-dialect``).
    name: ClassVar[str]
    #: The database as the Direct prompt names it ("PostgreSQL (PL/pgSQL)").
    label: ClassVar[str]
    #: The language as the Interactive Solver's system prompt names it.
    language: ClassVar[str]
    #: The statement the Direct prompt tells the model to raise errors with.
    raise_statement: ClassVar[str]
    #: First words a task file's call statement may start with ...
    call_words: ClassVar[tuple[str, ...]]
    #: ... and the form a call is shown in when it starts with another.
    call_form: ClassVar[str]
    #: sqlglot's name of the dialect (fixtures are read with it for the prompt's description).
    sqlglot: ClassVar[str]
    #: Procedure bodies are ``$``-quoted strings (PL/pgSQL); otherwise a body runs from
    #: ``IS``/``AS`` to a line holding ``/`` (PL/SQL). The mutants change bodies only.
    quoted_bodies: ClassVar[bool]

    @abc.abstractmethod
    def tokens(self, code: str) -> list[tuple[object, str]]:
        """The project's lexer's tokens of ``code`` (the mutants are made from them)."""

    @abc.abstractmethod
    def row_limit(self, n: int) -> str:
        """The clause that ends a query returning at most ``n`` rows (Interactive's sample_rows)."""

    @abc.abstractmethod
    def do_nothing(self, signature: str) -> str:
        """A procedure with ``signature`` that does nothing (a hollow call suite passes it)."""

    @abc.abstractmethod
    def plforge_call_problem(self, calls: Sequence[str]) -> str | None:
        """Why a PLForge record's calls cannot run here (``field 'call' ...``), or None."""

    @abc.abstractmethod
    def access(self, backend: Backend, task: Task) -> Access:
        """The call-suite judge's access to ``task``'s schema on ``backend``."""

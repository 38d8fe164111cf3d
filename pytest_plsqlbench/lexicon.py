"""What the splitter, the safety check and code extraction must know of a dialect, as capabilities.

The core (:mod:`.scripts`, :mod:`.safety`, :mod:`.generation.extract`) asks a :class:`Lexicon`
or :class:`SafetyRules` a question ("does a line holding ``/`` end a block?") instead of
comparing a dialect name; each dialect package builds one instance of each
(``dialects/postgres_text.py``, ``dialects/oracle_text.py``). Values only: this module imports
nothing of the package.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

StatementKind = Literal["sql", "plsql", "client"]


class ScanToken(Protocol):
    """One token of a server's scanner, as ``pglast.parser.scan`` gives them: ``start`` and
    ``end`` (inclusive) offsets, PostgreSQL's token ``name`` (``SCONST``, ``IDENT`` ...) and
    keyword ``kind`` (``NO_KEYWORD`` for a name)."""

    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...


@dataclass(frozen=True, eq=False)
class Lexicon:
    """How a dialect's client tool (psql, SQL*Plus) reads a script.

    Compared and hashed by identity (one instance per dialect): the splitter's cache keys on the
    Lexicon a caller passes, and a field-by-field hash would cost every call.
    """

    #: The server's own scanner (PostgreSQL: ``pglast.parser.scan``), raising pglast's
    #: ``ParseError(message, offset)`` where it stops: tokens are read from it, whatever the
    #: script's size (the splitter's tokens and the safety lexer's one-pass path). None: sqlparse's
    #: lexer reads them, a backslash being no escape and q-quotes masked when :attr:`q_quotes`
    #: (a regular expression with the same rules for scripts over ``scripts.FAST_TOKENIZER_FROM``).
    scanner: Callable[[str], Sequence[ScanToken]] | None = None
    #: The statements of a large script as slices, from the server's scanner in C (PostgreSQL:
    #: ``pglast.parser.split``), for data fixtures; the splitter uses it when no line of the
    #: script starts with ``/`` or ``\\`` (client rules) and falls back when it raises ``ParseError``.
    slices: Callable[[str], Sequence[slice]] | None = None
    #: Oracle's q-quoted literals (``q'[it's]'``, ``nq'{...}'``) are one string.
    q_quotes: bool = False
    #: ``$tag$ ... $tag$`` bodies are one string in scripts over ``scripts.FAST_TOKENIZER_FROM``
    #: (sqlparse's lexer reads them so in any dialect).
    dollar_quotes: bool = False
    #: A line starting with a backslash is a client meta-command (psql).
    backslash_commands: bool = False
    #: The client's own commands and PL/SQL units, from a statement's first words: (kind,
    #: command); a ``plsql`` unit ends only at a ``/`` line. None: every statement is SQL.
    classify: Callable[[list[str]], tuple[StatementKind, str | None]] | None = None
    #: A line holding only ``/`` is where a block ends (SQL*Plus): code extraction cuts a reply's
    #: commentary after the last such line. (The splitter ends statements at ``/`` lines anyway.)
    slash_terminator: bool = False
    #: The driver refuses a trailing ``;`` on plain SQL: the splitter strips it.
    strip_semicolon: bool = False
    #: Code-fence languages of a model's reply that name this dialect's code (``plpgsql``,
    #: ``oracle`` ...). Code extraction takes a block tagged with any registered dialect's name as
    #: code, whatever the task's dialect (a model may tag PL/pgSQL ``oracle``), as it does ``sql``
    #: and any tag containing ``sql``.
    fence_names: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SafetyRules:
    """What the safety pre-check (:mod:`.safety`) must know of a dialect's namespaces."""

    #: Schemas that are the answer's own scratch space: a name qualified with one of them is
    #: the unqualified name (PostgreSQL: ``answers``, ``pg_temp``).
    scratch_schemas: frozenset[str] = frozenset()
    #: Schemas an entry point may also be qualified with (PostgreSQL: ``public.f`` is ``f``).
    default_schemas: frozenset[str] = frozenset()
    #: CREATE SCHEMA creates outside the answer's own space (PostgreSQL; in Oracle a schema is a user).
    create_schema_is_elsewhere: bool = False
    #: Objects created in a schema other than :attr:`scratch_schemas` are created elsewhere.
    objects_live_in_scratch: bool = False
    #: String literals of CREATE FUNCTION/PROCEDURE are bodies run later: read as dynamic SQL.
    routine_bodies_are_dynamic: bool = False

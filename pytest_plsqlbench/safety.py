"""Safety pre-check of answers (PLSQLBench App. E.2: generated SQL "skipped by the safety checker").

Before an answer installs, :class:`SafetyChecker` reads it with sqlparse's lexer and looks for
statements outside what a benchmark task needs: dropping, altering, truncating or writing to
objects the answer (or an earlier turn of its conversation) did not create and that are not
the task's entry points; privilege and role changes; server files, programs and network
access; server-wide settings, extensions and untrusted languages; changing the harness's
timeouts; signalling other backends; Oracle autonomous transactions.

It is a filter that names what it refused, not the containment: dynamic SQL assembled from
variables is invisible to it, so the database role's grants and the timeouts stay the
guarantee (``docs/security.md``). Literal strings run as dynamic SQL (``EXECUTE '...'``,
``EXECUTE IMMEDIATE '...'``, ``DBMS_SQL``) and ``$$`` bodies are read like the rest.

``--plsql-safety``: ``block`` refuses the turn (failure class ``unsafe``), ``warn`` runs it
and attaches the finding to each of its tests, ``off`` skips the check. A task can widen its
allowed set with ``metadata.safety_allow`` (rule names, e.g. ``[write]`` for a task that
must modify data).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import gc
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pglast import parser as pg_parser
from sqlparse import tokens as T

from .lexicon import Lexicon, SafetyRules, ScanToken
from .registry import rules_for
from .scripts import _PG_TYPES, lexicon_of, split, tokens
from .settings import DatabaseSettings
from .tasks import Task

log = logging.getLogger(__name__)

#: Rule names (what ``metadata.safety_allow`` may list).
RULES = (
    "drop", "alter", "truncate", "write", "create-elsewhere", "privileges", "server-files",
    "programs", "system", "limits", "signals", "transactions", "client",
)
#: Statements, bodies and dynamic-SQL strings read per answer at most.
MAX_UNITS = 5000

#: Words that begin a statement inside PL/SQL and PL/pgSQL bodies.
_BOUNDARY = {None, ";", "BEGIN", "THEN", "ELSE", "LOOP", ">>", "DECLARE"}
#: Object kinds (the word after CREATE/DROP/ALTER; the two-word ones are matched first).
_KINDS2 = {
    ("MATERIALIZED", "VIEW"), ("FOREIGN", "TABLE"), ("PACKAGE", "BODY"), ("TYPE", "BODY"),
    ("EVENT", "TRIGGER"), ("DATABASE", "LINK"), ("USER", "MAPPING"), ("ACCESS", "METHOD"),
    ("TEXT", "SEARCH"), ("FOREIGN", "DATA"), ("DEFAULT", "PRIVILEGES"), ("LARGE", "OBJECT"),
}
_KINDS1 = {
    "TABLE", "VIEW", "FUNCTION", "PROCEDURE", "TYPE", "PACKAGE", "TRIGGER", "INDEX", "SEQUENCE",
    "SYNONYM", "DOMAIN", "AGGREGATE", "OPERATOR", "COLLATION", "RULE", "POLICY", "SCHEMA",
    "CAST", "CONVERSION", "STATISTICS", "ROUTINE", "ROLE", "USER", "GROUP", "DATABASE",
    "TABLESPACE", "EXTENSION", "SERVER", "SUBSCRIPTION", "PUBLICATION", "LANGUAGE", "DIRECTORY",
    "LIBRARY", "JAVA", "PROFILE", "CONTEXT", "OWNED", "SYSTEM", "SESSION", "TRANSFORM",
}
_CREATE_MODIFIERS = {
    "OR", "REPLACE", "GLOBAL", "LOCAL", "TEMP", "TEMPORARY", "UNLOGGED", "EDITIONABLE",
    "NONEDITIONABLE", "EDITIONING", "FORCE", "NOFORCE", "RECURSIVE", "UNIQUE", "CONSTRAINT",
    "TRUSTED", "PROCEDURAL", "PUBLIC", "PRIVATE", "AND", "COMPILE", "RESOLVE", "NO", "DEFAULT",
    "SHARDED", "DUPLICATED", "IMMUTABLE", "BLOCKCHAIN", "SHARED",
}
#: Kinds whose CREATE/ALTER/DROP is never part of a benchmark answer.
_SYSTEM_KINDS = {
    "ROLE": "privileges", "USER": "privileges", "GROUP": "privileges", "PROFILE": "privileges",
    "DEFAULT PRIVILEGES": "privileges", "OWNED": "privileges",
    "DATABASE": "system", "TABLESPACE": "system", "EXTENSION": "system", "SERVER": "system",
    "SUBSCRIPTION": "system", "PUBLICATION": "system", "LANGUAGE": "system", "SYSTEM": "system",
    "EVENT TRIGGER": "system", "FOREIGN DATA": "system", "USER MAPPING": "system",
    "ACCESS METHOD": "system", "FOREIGN TABLE": "system", "TRANSFORM": "system",
    "DIRECTORY": "server-files", "LIBRARY": "programs", "JAVA": "programs",
    "DATABASE LINK": "programs", "CONTEXT": "system",
}
#: Settings that bound an answer; changing them is the harness's business.
_LIMITS = {
    "STATEMENT_TIMEOUT", "LOCK_TIMEOUT", "IDLE_IN_TRANSACTION_SESSION_TIMEOUT",
    "IDLE_SESSION_TIMEOUT", "TRANSACTION_TIMEOUT", "TEMP_FILE_LIMIT", "ROLE",
    "SESSION_AUTHORIZATION", "SESSION_REPLICATION_ROLE",
    # Makes every error end the session as a FATAL with the code the answer raised.
    "EXIT_ON_ERROR",
}
#: Functions and packages by rule (PostgreSQL functions, Oracle supplied packages).
_CALLS = {
    "server-files": {
        "PG_READ_FILE", "PG_READ_BINARY_FILE", "PG_LS_DIR", "PG_STAT_FILE", "PG_LS_LOGDIR",
        "PG_LS_WALDIR", "PG_LS_TMPDIR", "PG_LS_ARCHIVE_STATUSDIR", "PG_LS_LOGICALSNAPDIR",
        "PG_LS_REPLSLOTDIR", "LO_IMPORT", "LO_EXPORT", "PG_FILE_WRITE", "PG_FILE_RENAME",
        "PG_FILE_UNLINK", "PG_LOGDIR_LS", "UTL_FILE", "BFILENAME", "DBMS_XSLPROCESSOR",
        "DBMS_FILE_TRANSFER", "DBMS_DATAPUMP", "DBMS_BACKUP_RESTORE",
    },
    "programs": {
        "DBLINK", "DBLINK_EXEC", "DBLINK_CONNECT", "DBLINK_CONNECT_U", "DBLINK_SEND_QUERY",
        "UTL_HTTP", "UTL_TCP", "UTL_SMTP", "UTL_MAIL", "UTL_INADDR", "DBMS_SCHEDULER", "DBMS_JOB",
        "DBMS_PIPE", "DBMS_JAVA", "DBMS_SYS_SQL", "DBMS_LDAP", "DBMS_NETWORK_ACL_ADMIN",
        "HTTPURITYPE",
    },
    "signals": {"PG_TERMINATE_BACKEND", "PG_CANCEL_BACKEND", "PG_SIGNAL_BACKEND"},
    "system": {"PG_RELOAD_CONF", "PG_ROTATE_LOGFILE", "PG_PROMOTE", "PG_CREATE_RESTORE_POINT"},
}
_CALL_RULE = {name: rule for rule, names in _CALLS.items() for name in names}
_CALL_TEXT = {
    "server-files": "reads or writes server files",
    "programs": "runs programs, jobs or network connections",
    "signals": "signals database backends",
    "system": "changes the server",
}
#: Languages an answer may write functions in (PostgreSQL's trusted ones).
_TRUSTED_LANGUAGES = {"SQL", "PLPGSQL", "PLPERL", "PLTCL", "PLV8", "PLRUST"}
#: Words that make a statement's string literals SQL run at run time.
_DYNAMIC = {"EXECUTE", "IMMEDIATE", "DBMS_SQL", "OPEN"}
#: psql meta-commands that run programs or touch files (the harness skips them; intent counts).
_PSQL_UNSAFE = re.compile(r"^\\(!|copy\b|o\b|out\b|w\b|write\b|i\b|ir\b|include|cd\b|setenv\b|lo_import|lo_export|g\s*\|)", re.I)


@dataclass(frozen=True)
class Finding:
    """One statement outside the allowed set."""

    rule: str
    detail: str
    line: int

    def __str__(self) -> str:
        return f"{self.detail} (line {self.line})"


@dataclass(slots=True)
class _Tok:
    word: str  # upper-cased word, punctuation as is, '' for literals
    kind: str  # word | quoted | string | body | punct | number
    text: str  # original text (literal content for string/body)
    line: int


@dataclass
class _Context:
    rules: SafetyRules
    entry: set[tuple[str, str]]
    created: set[tuple[str, str]] = field(default_factory=set)
    #: The answer creates temporary tables: a DROP TABLE of a name built at run time (``EXECUTE
    #: format('DROP TABLE %I', v)``) is taken to be one of them (the grants protect the rest).
    temp_tables: bool = False
    findings: list[Finding] = field(default_factory=list)


# --------------------------------------------------------------------------- lexing
@functools.cache
def _token_class(ttype: object) -> tuple[bool, bool, bool, bool, bool, bool, bool]:
    """What :func:`_lex` asks of a token type, once per type (sqlparse's ``in`` is slow Python):
    blank, quoted name, literal, string, number, punctuation, name."""
    return (
        ttype in T.Comment or ttype in T.Whitespace or ttype in T.Newline or ttype in T.Text.Whitespace,
        ttype in T.String.Symbol,
        ttype in T.Literal,
        ttype in T.String,
        ttype in T.Number,
        ttype in T.Punctuation or ttype in T.Operator or ttype in T.Error,
        ttype in T.Name,
    )


def _lex(text: str, lexicon: Lexicon, line0: int) -> list[_Tok]:
    """Significant tokens of ``text``; multi-word keywords (``CREATE OR REPLACE``) become words."""
    if lexicon.scanner is not None:
        fast = _lex_pg(text, line0, lexicon.scanner)
        if fast is not None:
            return fast
    return _lex_tokens(text, lexicon, line0)


#: What :func:`_lex_tokens` makes of a PostgreSQL token, by scanner token name, where that does
#: not depend on the token's text (see ``scripts._PG_TYPES``).
_PG_CATEGORY = {name: ("blank" if c[0] else "string" if c[3] else "number" if c[4] else "punct" if c[5] else "word")
                for name, c in ((name, _token_class(ttype)) for name, ttype in _PG_TYPES.items())}


#: Characters of a text the scanner reads at a time in :func:`_lex_pg` (its token objects are
#: several times the text's size; a megabyte body at once was 150 MB of them).
SCAN_CHUNK = 64 * 1024
#: Scanner tokens the next line may continue (``'a'`` newline ``'b'`` is one string): no piece
#: of the text ends after one of them.
_CONTINUED = frozenset({"SCONST", "USCONST", "BCONST", "XCONST"})


def _continued(toks: Sequence[Any]) -> bool:
    """Whether the next line may still be part of the last token (comments between the parts of
    a string count as blanks: ``'a' -- note`` newline ``'b'`` is one string)."""
    for tok in reversed(toks):
        if _PG_CATEGORY.get(tok.name) != "blank":
            return tok.name in _CONTINUED
    return False


def _pg_chunks(text: str, scan: Callable[[str], Sequence[ScanToken]]) -> Iterator[tuple[int, Sequence[Any]]]:
    """The server scanner's tokens of ``text``, a piece at a time: ``(offset, tokens)``.

    A piece ends just before a newline, where the scanner is between tokens, so it reads the
    piece as it reads the whole: nothing before is left open (an open string, comment or body
    is a scan error: the piece grows) and the last token cannot go on on the next line. Raises
    ``ParseError`` where the whole text does.
    """
    start = 0
    while start < len(text):
        end = text.find("\n", start + SCAN_CHUNK)
        while True:
            if end < 0:
                end = len(text)
            try:
                toks = scan(text[start:end])
            except pg_parser.ParseError:
                if end == len(text):
                    raise
                toks = None
            if toks is not None and (end == len(text) or not _continued(toks)):
                break
            end = text.find("\n", end + 1 + SCAN_CHUNK)
        yield start, toks
        start = end


def _lex_pg(text: str, line0: int, scan: Callable[[str], Sequence[ScanToken]] = pg_parser.scan) -> list[_Tok] | None:
    """:func:`_lex_tokens` for a dialect with a scanner, in one pass over the scanner's tokens.

    The same tokens, token for token (``tests/test_safety_lexer.py``), without the splitter's
    intermediate token list and a piece of the text at a time: a model's answer is small, but a
    converted MBPP+ reference can be megabytes. None where the scanner stops (the general path
    handles that).
    """
    out: list[_Tok] = []
    line = line0
    at = 0
    prev_q = False
    prev_value = ""
    seen: dict[str, str] = {}  # one string per distinct token text
    words: dict[str, str] = {}  # one upper-cased copy per distinct word
    try:
        for offset, toks in _pg_chunks(text, scan):
            for tok in toks:
                start, end, name = tok.start + offset, tok.end + offset, tok.name
                if start > at:
                    line += text.count("\n", at, start)
                adjacent = start == at
                value = text[start : end + 1]
                value = seen.setdefault(value, value)
                at = end + 1
                if adjacent and prev_value == "\\":
                    out.pop()  # a psql meta-command word (``\\set``): one word with its backslash
                    value, category, name_like = "\\" + value, "word", False
                elif name == "SCONST":
                    category, name_like = ("body" if value.startswith("$") else "string"), False
                elif name in ("IDENT", "UIDENT") and value.endswith('"'):
                    category, name_like = "quoted", False
                elif name.startswith("ASCII_"):
                    category, name_like = "punct", False
                elif name in _PG_CATEGORY:
                    category, name_like = _PG_CATEGORY[name], False
                else:
                    category, name_like = "word", tok.kind == "NO_KEYWORD"
                prev_value = value
                if category == "blank":
                    line += value.count("\n")
                    continue
                if category == "body" and not (value.endswith("$") and len(value) > 2):
                    category = "word"
                _add_token(out, category, value, line, prev_q, words)
                prev_q = name_like and value.lower() in ("q", "nq")
                line += value.count("\n")
    except pg_parser.ParseError:
        return None
    return out


def _lex_tokens(text: str, lexicon: Lexicon | str, line0: int) -> list[_Tok]:
    """Significant tokens of ``text`` from the splitter's tokens (``lexicon`` may be a dialect's name)."""
    out: list[_Tok] = []
    line = line0
    toks = tokens(text, lexicon_of(lexicon))
    prev_q = False
    for ttype, value in toks:
        blank, symbol, literal, string, number, punct, name = _token_class(ttype)
        if blank:
            line += value.count("\n")
            continue
        category = ("quoted" if symbol
                    else "body" if value.startswith("$") and literal and value.endswith("$") and len(value) > 2
                    else "string" if string else "number" if number else "punct" if punct else "word")
        _add_token(out, category, value, line, prev_q)
        prev_q = name and value.lower() in ("q", "nq")
        line += value.count("\n")
    return out


def _add_token(out: list[_Tok], category: str, value: str, line: int, prev_q: bool,
               words: dict[str, str] | None = None) -> None:
    """The tokens one lexed token of ``category`` is to the check (both lexers: one reading).

    ``category``: quoted, body (a complete dollar-quoted body), string, number, punct or word;
    ``prev_q``: the token before was Oracle's ``q``/``nq`` (a ``q'[...]'`` string follows);
    ``words``: upper-cased words already made, to share.
    """
    if category == "quoted" or (value.startswith('"') and value.endswith('"') and len(value) > 1):
        out.append(_Tok(value[1:-1].upper(), "quoted", value[1:-1], line))
    elif category == "body":
        tag_end = value.find("$", 1) + 1
        out.append(_Tok("", "body", value[tag_end : len(value) - tag_end], line))
    elif category == "string":
        if not value.startswith("'") and "'" in value:
            value = value[value.index("'") :]  # E'...', U&'...', B'...', X'...'
        inner = value[1:-1] if value.endswith("'") and len(value) > 1 else value[1:]
        if prev_q and len(inner) >= 2:
            inner = inner[1:-1]  # q'[...]': drop the delimiters
        out.append(_Tok("", "string", inner.replace("''", "'"), line))
    elif category in ("number", "punct"):
        out.append(_Tok(value, category, value, line))
    else:
        for word in value.split():
            upper = words.get(word) if words is not None else None
            if upper is None:
                upper = word.upper()
                if words is not None:
                    words[word] = upper
            out.append(_Tok(upper, "word", word, line))


#: Every word the rules (:func:`_check_unit`, :func:`_collect_created`) look for, upper-cased.
_WATCHED = (
    "DROP", "CREATE", "ALTER", "TRUNCATE", "INSERT", "DELETE", "MERGE", "INTO", "UPDATE", "GRANT",
    "REVOKE", "SET", "COPY", "LOAD", "PRAGMA", *sorted(_CALL_RULE),
)


def _watched(text: str) -> bool:
    """Whether a rule could find anything in ``text``: one of :data:`_WATCHED` occurs in it, even
    inside a longer word or a string. A text with none holds no token a rule reads, and neither do
    the bodies and strings inside it (they are pieces of it), so it is not lexed: the megabyte
    lookup body of a converted MBPP+ reference usually has none."""
    upper = text.upper()  # as the lexer upper-cases each word
    return any(word in upper for word in _WATCHED)


def _units(code: str, lexicon: Lexicon, rules: SafetyRules) -> list[list[_Tok]]:
    """The answer's statements plus every body and dynamic-SQL string inside them, as token lists
    (those a rule could find something in: :func:`_watched`)."""
    units: list[list[_Tok]] = []
    pending: collections.deque[tuple[str, int]] = collections.deque()
    for stmt in split(code, lexicon):
        if stmt.kind == "client":
            units.append([_Tok("\\CLIENT", "word", stmt.text, stmt.line)])
            continue
        pending.append((stmt.text, stmt.line))
    while pending:
        if len(units) >= MAX_UNITS:
            log.warning("safety check: more than %d statements, bodies and strings; the rest is not read", MAX_UNITS)
            break
        text, line = pending.popleft()
        if not _watched(text):
            continue
        toks = _lex(text, lexicon, line)
        units.append(toks)
        for segment in _segments(toks):
            words = {t.word for t in segment}
            is_routine = rules.routine_bodies_are_dynamic and "CREATE" in words and words & {"FUNCTION", "PROCEDURE"}
            dynamic = bool(words & _DYNAMIC) or is_routine
            for tok in segment:
                if tok.kind == "body" or (tok.kind == "string" and dynamic):
                    pending.append((tok.text, tok.line))
    return units


def _segments(toks: list[_Tok]) -> Iterable[list[_Tok]]:
    seg: list[_Tok] = []
    for tok in toks:
        if tok.word == ";":
            if seg:
                yield seg
            seg = []
        else:
            seg.append(tok)
    if seg:
        yield seg


# --------------------------------------------------------------------------- names
def _name_at(toks: list[_Tok], i: int) -> tuple[tuple[str | None, str] | None, int]:
    """A possibly qualified name starting at ``i``: ((schema, name), index after it)."""
    parts: list[str] = []
    while i < len(toks) and toks[i].kind in ("word", "quoted"):
        parts.append(toks[i].word.lower())
        if i + 2 < len(toks) and toks[i + 1].word == "." and toks[i + 2].kind in ("word", "quoted"):
            i += 2
            continue
        i += 1
        break
    if not parts:
        return None, i
    return ((parts[-2] if len(parts) > 1 else None), parts[-1]), i


def _key(name: tuple[str | None, str], rules: SafetyRules) -> tuple[str, str]:
    schema, base = name
    if schema in rules.scratch_schemas:
        schema = None
    return (schema or "", base)


def _kind_at(toks: list[_Tok], i: int) -> tuple[str | None, int]:
    """The object kind at ``i`` after CREATE/DROP/ALTER (modifiers skipped)."""
    n = len(toks)
    while i < n and toks[i].word in _CREATE_MODIFIERS:
        i += 1
    if i + 1 < n and (toks[i].word, toks[i + 1].word) in _KINDS2:
        kind = f"{toks[i].word} {toks[i + 1].word}"
        i += 2
        if kind == "FOREIGN DATA" and i < n and toks[i].word == "WRAPPER":
            i += 1
        if kind == "TEXT SEARCH" and i < n:
            i += 1
        return kind, i
    if i < n and toks[i].word in _KINDS1:
        return toks[i].word, i + 1
    return None, i


def _skip(toks: list[_Tok], i: int, *words: str) -> int:
    while i < len(toks) and toks[i].word in words:
        i += 1
    return i


# --------------------------------------------------------------------------- rules
def _collect_created(units: Sequence[list[_Tok]], ctx: _Context) -> None:
    for toks in units:
        for i, tok in enumerate(toks):
            if tok.word == "INTO" and i + 1 < len(toks) and toks[i + 1].word in ("TEMP", "TEMPORARY", "UNLOGGED", "TABLE"):
                # SELECT ... INTO [TEMP|UNLOGGED] [TABLE] name: creates a table.
                ctx.temp_tables = ctx.temp_tables or toks[i + 1].word in ("TEMP", "TEMPORARY")
                name, _ = _name_at(toks, _skip(toks, i + 1, "TEMP", "TEMPORARY", "UNLOGGED", "TABLE"))
                if name is not None:
                    ctx.created.add(_key(name, ctx.rules))
                continue
            if tok.word != "CREATE":
                continue
            kind, j = _kind_at(toks, i + 1)
            if kind is None:
                continue
            if kind == "TABLE" and any(t.word in ("TEMP", "TEMPORARY") for t in toks[i + 1 : j]):
                ctx.temp_tables = True
            j = _skip(toks, j, "IF", "NOT", "EXISTS", "CONCURRENTLY")
            name, _ = _name_at(toks, j)
            if name is not None:
                ctx.created.add(_key(name, ctx.rules))


def _allowed(name: tuple[str | None, str] | None, ctx: _Context) -> bool:
    if name is None:
        return False
    key = _key(name, ctx.rules)
    return key in ctx.created or key in ctx.entry


def _show(name: tuple[str | None, str] | None) -> str:
    if name is None:
        return "a name built at run time"
    return ".".join(p for p in name if p)


def _check_unit(toks: list[_Tok], ctx: _Context) -> None:
    add = ctx.findings.append
    n = len(toks)
    for i, tok in enumerate(toks):
        w = tok.word
        prev = toks[i - 1].word if i else None
        nxt = toks[i + 1].word if i + 1 < n else ""
        at_start = prev in _BOUNDARY
        if w == "\\CLIENT":
            if _PSQL_UNSAFE.match(tok.text) or re.match(r"^(HOST\b|!|\$)", tok.text, re.I):
                add(Finding("client", f"client command {tok.text.split()[0]!r} runs programs or writes files", tok.line))
        elif w == "DROP":
            kind, j = _kind_at(toks, i + 1)
            if kind is None:
                continue
            if kind in _SYSTEM_KINDS or kind == "SCHEMA":
                add(Finding(_SYSTEM_KINDS.get(kind, "drop"), f"DROP {kind}", tok.line))
                continue
            j = _skip(toks, j, "IF", "EXISTS", "CONCURRENTLY")
            for name in _name_list(toks, j):
                if name is None and kind == "TABLE" and ctx.temp_tables:
                    continue
                if not _allowed(name, ctx):
                    add(Finding("drop", f"DROP {kind} {_show(name)}: not created by this answer nor an entry point", tok.line))
        elif w == "CREATE":
            _check_create(toks, i, ctx)
        elif w == "ALTER":
            kind, j = _kind_at(toks, i + 1)
            if kind == "SESSION":
                k = _skip(toks, j, "SET")
                param = toks[k].word if k < n else ""
                if not param.startswith(("NLS_", "PLSQL_")):
                    add(Finding("system", f"ALTER SESSION SET {param}", tok.line))
            elif kind in _SYSTEM_KINDS:
                add(Finding(_SYSTEM_KINDS[kind], f"ALTER {kind}", tok.line))
            elif kind is not None:
                name, _ = _name_at(toks, _skip(toks, j, "IF", "EXISTS", "ONLY"))
                if not _allowed(name, ctx):
                    add(Finding("alter", f"ALTER {kind} {_show(name)}: not created by this answer nor an entry point", tok.line))
        elif w == "TRUNCATE":
            for name in _name_list(toks, _skip(toks, i + 1, "TABLE", "ONLY")):
                if not _allowed(name, ctx):
                    add(Finding("truncate", f"TRUNCATE {_show(name)}: not created by this answer", tok.line))
        elif (w, nxt) in (("INSERT", "INTO"), ("DELETE", "FROM"), ("MERGE", "INTO")):
            name, _ = _name_at(toks, _skip(toks, i + 2, "ONLY"))
            if name is not None and not _allowed(name, ctx):
                add(Finding("write", f"{w} {nxt} {_show(name)}: writes data this answer did not create", tok.line))
        elif w == "UPDATE" and prev != "FOR":
            name, j = _name_at(toks, _skip(toks, i + 1, "ONLY"))
            j = _skip(toks, j, "AS")
            if j < n and toks[j].word != "SET" and toks[j].kind == "word":
                j += 1  # alias
            if name is not None and name[1] != "set" and j < n and toks[j].word == "SET" and not _allowed(name, ctx):
                add(Finding("write", f"UPDATE {_show(name)}: writes data this answer did not create", tok.line))
        elif w in ("GRANT", "REVOKE") and at_start and any(t.word in ("TO", "FROM") for t in toks[i + 1 :]):
            # A statement, not the word: GRANT ... TO, REVOKE ... FROM ('Grant' as a value is not).
            add(Finding("privileges", w, tok.line))
        elif w == "SET":
            k = _skip(toks, i + 1, "SESSION", "LOCAL")
            param = toks[k].word if k < n else ""
            if param == "AUTHORIZATION" or (param == "ROLE" and at_start):
                add(Finding("privileges", f"SET {'SESSION AUTHORIZATION' if param == 'AUTHORIZATION' else 'ROLE'}", tok.line))
            elif param in _LIMITS and param != "ROLE":
                add(Finding("limits", f"SET {param.lower()}: the harness sets the limits", tok.line))
        elif w == "COPY" and at_start:
            _check_copy(toks, i, ctx)
        elif w == "LOAD" and at_start and i + 1 < n and toks[i + 1].kind == "string":
            add(Finding("system", "LOAD of a server library", tok.line))
        elif w == "PRAGMA" and nxt == "AUTONOMOUS_TRANSACTION":
            add(Finding("transactions", "PRAGMA AUTONOMOUS_TRANSACTION commits outside the task's transaction", tok.line))
        elif w in _CALL_RULE and tok.kind == "word" and nxt in ("(", "."):
            add(Finding(_CALL_RULE[w], f"{tok.text} {_CALL_TEXT[_CALL_RULE[w]]}", tok.line))
        elif w == "SET_CONFIG" and nxt == "(" and i + 2 < n and toks[i + 2].kind == "string" \
                and toks[i + 2].text.upper() in _LIMITS:
            add(Finding("limits", f"set_config('{toks[i + 2].text}')", tok.line))


def _name_list(toks: list[_Tok], i: int) -> list[tuple[str | None, str] | None]:
    """Names of DROP/TRUNCATE (``a, b(int), c``); [None] when the name is built at run time."""
    names: list[tuple[str | None, str] | None] = []
    while True:
        name, i = _name_at(toks, i)
        if name is None:
            break
        names.append(name)
        if i < len(toks) and toks[i].word == "(":
            depth = 0
            while i < len(toks):
                depth += {"(": 1, ")": -1}.get(toks[i].word, 0)
                i += 1
                if depth == 0:
                    break
        if i < len(toks) and toks[i].word == ",":
            i += 1
            continue
        break
    return names or [None]


def _check_create(toks: list[_Tok], i: int, ctx: _Context) -> None:
    add = ctx.findings.append
    line = toks[i].line
    j = i + 1
    public = False
    while j < len(toks) and toks[j].word in _CREATE_MODIFIERS:
        public = public or toks[j].word == "PUBLIC"
        j += 1
    kind, j = _kind_at(toks, j)
    if kind is None:
        return
    if kind in _SYSTEM_KINDS or (kind == "SCHEMA" and ctx.rules.create_schema_is_elsewhere):
        add(Finding(_SYSTEM_KINDS.get(kind, "create-elsewhere"), f"CREATE {kind}", line))
        return
    if public:
        add(Finding("privileges", f"CREATE PUBLIC {kind}", line))
    name, _ = _name_at(toks, _skip(toks, j, "IF", "NOT", "EXISTS", "CONCURRENTLY"))
    if ctx.rules.objects_live_in_scratch and name is not None and name[0] is not None \
            and name[0] not in ctx.rules.scratch_schemas and kind != "INDEX":
        add(Finding("create-elsewhere", f"CREATE {kind} {_show(name)}: answers create objects in their own schema", line))
    if kind in ("FUNCTION", "PROCEDURE", "ROUTINE"):
        for k in range(j, len(toks) - 1):
            if toks[k].word == "LANGUAGE" and toks[k + 1].kind in ("word", "quoted", "string"):
                lang = (toks[k + 1].text or toks[k + 1].word).upper()
                if lang not in _TRUSTED_LANGUAGES:
                    add(Finding("programs", f"CREATE {kind} in untrusted language {lang.lower()}", line))
                break


def _check_copy(toks: list[_Tok], i: int, ctx: _Context) -> None:
    depth = 0
    for k in range(i + 1, len(toks)):
        w = toks[k].word
        if w == ";":
            break
        depth += {"(": 1, ")": -1}.get(w, 0)
        if depth:
            continue
        if w == "PROGRAM":
            ctx.findings.append(Finding("programs", "COPY ... PROGRAM runs a shell command on the server", toks[i].line))
            return
        if w in ("TO", "FROM") and k + 1 < len(toks) and toks[k + 1].kind == "string":
            ctx.findings.append(Finding("server-files", f"COPY ... {w} a server file", toks[i].line))
            return


# --------------------------------------------------------------------------- the checker
def _entry_names(task: Task, rules: SafetyRules) -> set[tuple[str, str]]:
    names: set[tuple[str, str]] = set()
    for ep in task.entry_points:
        parts = [p.strip().strip('"').lower() for p in ep.split(".") if p.strip()]
        if not parts:
            continue
        names.add(("", parts[-1]))
        for schema in rules.default_schemas:
            names.add((schema, parts[-1]))  # ``DROP FUNCTION IF EXISTS public.f`` is common
        if len(parts) > 1:
            names.add(("", parts[0]))  # package of a package member
            names.add((parts[-2], parts[-1]))
    return names


def _allowed_rules(task: Task) -> set[str]:
    raw = task.metadata.get("safety_allow") if task.metadata else None
    if isinstance(raw, str):
        raw = raw.replace(",", " ").split()
    return {str(r) for r in raw or ()}


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while tokens are made: a megabyte answer is a
    million small objects, none in a cycle, and each collection would walk all of them again
    (it made the check of a converted MBPP+ reference twice as slow)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def findings(task: Task, code: str, earlier: Sequence[str] = ()) -> list[Finding]:
    """Statements of ``code`` outside ``task``'s allowed set (``earlier``: the conversation so far)."""
    lexicon, rules = rules_for(task.dialect)
    ctx = _Context(rules, _entry_names(task, rules))
    with _collector_paused():
        for previous in earlier:
            _collect_created(_units(previous, lexicon, rules), ctx)
        units = _units(code, lexicon, rules)
        _collect_created(units, ctx)
        for toks in units:
            _check_unit(toks, ctx)
        del units
    allowed = _allowed_rules(task)
    seen: set[tuple[str, int]] = set()
    out = []
    for f in ctx.findings:
        if f.rule in allowed or (f.detail, f.line) in seen:
            continue
        seen.add((f.detail, f.line))
        out.append(f)
    return out


class SafetyChecker:
    """The runner's ``SafetyCheck``: returns why a turn's answer is refused, or None.

    ``mode`` tells the runner whether a finding blocks the turn (``block``) or is only
    reported with its tests (``warn``).
    """

    def __init__(self, mode: str = "block", max_listed: int = 3) -> None:
        if mode not in ("warn", "block"):
            raise ValueError(f"safety mode {mode!r}: expected 'warn' or 'block'")
        self.mode = mode
        self.max_listed = max_listed

    def __call__(self, task: Task, turn: int, code: str, earlier: Sequence[str] = ()) -> str | None:
        found = findings(task, code, earlier)
        if not found:
            return None
        listed = "; ".join(str(f) for f in found[: self.max_listed])
        more = f" (+{len(found) - self.max_listed} more)" if len(found) > self.max_listed else ""
        rules = ",".join(dict.fromkeys(f.rule for f in found))
        log.info("task %s turn %d: safety check (%s): %s%s", task.id, turn, rules, listed, more)
        return f"safety check [{rules}]: {listed}{more}"


def make_checker(database: DatabaseSettings) -> SafetyChecker | None:
    """The checker for ``--plsql-safety`` (None when ``off``)."""
    if database.safety == "off":
        return None
    return SafetyChecker(database.safety)

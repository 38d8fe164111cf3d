"""Split answer and test scripts into statements the database driver can execute.

Tokenising, for PostgreSQL, is PostgreSQL's own scanner (``pglast.parser.scan``): strings
(``standard_conforming_strings`` on, ``E''``, ``U&''``, ``B''``/``X''``), quoted identifiers,
nested comments and dollar-quoted bodies are read exactly as the server reads them, so what
the splitter and the safety check see is what the server runs (the harness pins
``standard_conforming_strings`` and sends each statement with the extended protocol, which
refuses a string holding two statements). For Oracle it is sqlparse's lexer, with q-quotes
and backslashes (never an escape in Oracle) masked first. On top of the tokens we apply the
client's rules. Which of these a dialect follows is its :class:`~.lexicon.Lexicon`'s answer
(``dialects/postgres_text.py``, ``dialects/oracle_text.py``); this module compares no dialect name.

* **SQL*Plus** (Oracle): a statement starting with ``DECLARE``/``BEGIN``, ``CREATE [OR
  REPLACE] FUNCTION|PROCEDURE|PACKAGE [BODY]|TYPE [BODY]|TRIGGER`` or ``WITH FUNCTION|PROCEDURE``
  is a PL/SQL unit that ends at a line holding only ``/`` (or at the end of the script); other
  SQL ends at ``;`` or at a ``/`` line; ``EXEC call`` becomes ``BEGIN call; END;``; ``SET
  SERVEROUTPUT ON``, ``SHOW ERRORS``, ``PROMPT`` and friends are client commands, not SQL.
  Oracle's alternative quoting (``q'[it's]'``) is one string, as in SQL*Plus.
  Deliberate difference: a ``/`` after a statement that already ended with ``;`` is ignored
  (SQL*Plus would run the statement a second time).
* **psql-like** (PostgreSQL): statements end at ``;``; a line holding only ``/`` also ends
  one (answers written in SQL*Plus habit are otherwise fine PL/pgSQL); backslash
  meta-commands are client commands.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from pglast import parser as pg_parser
from sqlparse import lexer
from sqlparse import tokens as T

from .lexicon import Lexicon, ScanToken, StatementKind
from .registry import rules_for


@dataclass(frozen=True)
class Statement:
    """One executable unit of a script."""

    text: str
    kind: StatementKind
    #: 1-based line of the script where the statement starts (for error messages).
    line: int
    #: For ``client`` statements: the command word upper-cased (``SET``, ``SHOW`` ...).
    command: str | None = None
    #: Its first two words as :func:`first_keyword` reads them, when the splitter already had
    #: its tokens (so the backend does not lex each statement again).
    head: str | None = field(default=None, compare=False, repr=False)

    def first_words(self, n: int = 2) -> str:
        """The statement's first ``n`` (at most 2 from the splitter) words, upper-cased."""
        if self.head is not None and n <= 2:
            return " ".join(self.head.split()[:n])
        return first_keyword(self.text, n)

    @property
    def first_word(self) -> str:
        return first_keyword(self.text)


#: ``q'<delim>...<delim>'`` literals (Oracle alternative quoting); the closing delimiter of
#: a bracket is its partner.
_Q_QUOTE = re.compile(r"(?<![A-Za-z0-9_$#])[nN]?[qQ]'(.)", re.S)
_Q_CLOSE = {"[": "]", "{": "}", "(": ")", "<": ">"}


def _mask_q_quotes(script: str) -> str:
    """``script`` with the inside of q-quoted literals replaced by ``x`` (same length, same
    newlines), so the lexer sees one ordinary string where SQL*Plus sees one."""
    out, copied, search = [], 0, 0
    while True:
        m = _Q_QUOTE.search(script, search)
        if m is None:
            break
        # Only outside ordinary strings and comments: ask the lexer about the text before it.
        prefix_tokens = list(lexer.tokenize(script[copied : m.start()] + "\n"))
        last = prefix_tokens[-2][0] if len(prefix_tokens) > 1 else None
        if last is not None and (last in T.String or last in T.Comment or last in T.Error):
            search = m.end()
            continue
        close = _Q_CLOSE.get(m.group(1), m.group(1)) + "'"
        end = script.find(close, m.end())
        if end < 0:
            break
        prefix = "x" * (m.end() - 2 - m.start())  # the n/q letters
        inner = "".join(c if c == "\n" else "x" for c in script[m.end() - 1 : end + 1])
        out.append(script[copied : m.start()] + prefix + "'" + inner + "'")
        copied = search = end + 2
    out.append(script[copied:])
    return "".join(out)


#: Scripts longer than this (data fixtures: megabytes of INSERTs) are tokenised by
#: :func:`_fast_tokens`; sqlparse's lexer reads about 200 KB a second.
FAST_TOKENIZER_FROM = 200_000

_FAST = re.compile(
    r"""(?P<nl>\n)
    |(?P<ws>[ \t\f\v]+)
    |(?P<comment>--[^\n]*\n?|/\*.*?\*/)
    |(?P<qquote>(?<![\w$\#])[nN]?[qQ]'(?:\[.*?\]|\{.*?\}|\(.*?\)|<.*?>|(?P<qd>[^\s\[{(<]).*?(?P=qd))')
    |(?P<str>'(?:[^']++|'')*+')
    |(?P<ident>"(?:[^"]++|"")*+")
    |(?P<dollar>\$\$.*?\$\$|\$(?P<tag>[A-Za-z_]\w*)\$.*?\$(?P=tag)\$)
    |(?P<punct>;)
    |(?P<op>/)
    |(?P<other>(?:[^\n'";/\-$qQnN"]|[qQnN](?![qQ]?'))+|.)""",
    re.S | re.X,
)
_FAST_TYPES = {
    "nl": T.Text.Whitespace.Newline, "ws": T.Text.Whitespace, "comment": T.Comment, "qquote": T.String.Single,
    "str": T.String.Single, "ident": T.String.Symbol, "dollar": T.Literal,
    "punct": T.Punctuation, "op": T.Operator, "other": T.Other,
}


def _fast_tokens(script: str, lexicon: Lexicon) -> list[tuple[object, str]]:
    """The tokens the splitter needs, from one C-speed regular expression: the same rules
    as with sqlparse (strings, quoted names, comments, q-quotes and ``$$`` bodies as the lexicon
    says are single tokens), for scripts too large to lex with sqlparse. Text between
    those, ``;``, ``/`` and newlines comes in runs, not word by word: the splitter only reads
    the words at the start of a statement."""
    out: list[tuple[object, str]] = []
    for m in _FAST.finditer(script):
        kind = m.lastgroup or "other"
        if kind in ("qd", "tag"):  # inner groups: report the enclosing alternative
            kind = "qquote" if m.group("qquote") is not None else "dollar"
        if kind == "qquote" and not lexicon.q_quotes:
            value = m.group(0)
            out.append((T.Name, value[: value.index("'")]))
            out.extend(_fast_tokens(value[value.index("'") :], lexicon))
            continue
        if kind == "dollar" and not lexicon.dollar_quotes:
            out.append((T.Other, "$"))
            out.extend(_fast_tokens(m.group(0)[1:], lexicon))
            continue
        out.append((_FAST_TYPES[kind], m.group(0)))
    return out


#: PostgreSQL scanner token names by the sqlparse token type the splitter and the safety check read.
_PG_TYPES = {
    "SCONST": T.String.Single, "USCONST": T.String.Single, "BCONST": T.String.Single, "XCONST": T.String.Single,
    "ICONST": T.Number.Integer, "FCONST": T.Number.Float, "PARAM": T.Name.Placeholder,
    "C_COMMENT": T.Comment.Multiline, "SQL_COMMENT": T.Comment.Single,
    "Op": T.Operator, "TYPECAST": T.Punctuation, "DOT_DOT": T.Punctuation, "COLON_EQUALS": T.Operator,
    "EQUALS_GREATER": T.Operator, "LESS_EQUALS": T.Operator, "GREATER_EQUALS": T.Operator,
    "NOT_EQUALS": T.Operator, "RIGHT_ARROW": T.Operator,
}


def _pg_scan(script: str, out: list[tuple[object, str]], scan: Callable[[str], Sequence[ScanToken]]) -> None:
    """Append the server scanner's tokens of ``script`` to ``out``, with the text between them (blanks)."""
    at = 0
    for tok in scan(script):
        if tok.start > at:
            out.append((T.Text.Whitespace, script[at : tok.start]))
        value = script[tok.start : tok.end + 1]
        name = tok.name
        if name == "SCONST" and value.startswith("$"):
            ttype: object = T.Literal  # a dollar-quoted body
        elif name in ("IDENT", "UIDENT") and value.endswith('"'):
            ttype = T.String.Symbol
        elif name.startswith("ASCII_"):
            ttype = T.Operator if value == "/" else T.Punctuation
        elif name in _PG_TYPES:
            ttype = _PG_TYPES[name]
        elif tok.kind == "NO_KEYWORD":
            ttype = T.Name
        else:
            ttype = T.Keyword
        if out and out[-1][1] == "\\" and tok.start == at:
            ttype, value = T.Other, "\\" + value  # a psql meta-command word (``\\set``)
            out.pop()
        out.append((ttype, value))
        at = tok.end + 1
    if at < len(script):
        out.append((T.Text.Whitespace, script[at:]))


def _pg_tokens(script: str, scan: Callable[[str], Sequence[ScanToken]] = pg_parser.scan) -> list[tuple[object, str]]:
    """The server scanner's tokens of ``script`` (see the module docstring).

    Where the server's scanner stops (an unterminated string, comment or body), the rest is one
    ``Error`` token: the splitter then sends it as one statement, which the server refuses. A
    psql meta-command line the scanner cannot read (``\\echo it's``) is one token of its own.
    """
    out: list[tuple[object, str]] = []
    rest = script
    while rest:
        try:
            _pg_scan(rest, out, scan)
            return out
        except pg_parser.ParseError as exc:
            where = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], int) else 0
        line_start = rest.rfind("\n", 0, where) + 1
        line_end = rest.find("\n", where)
        line_end = len(rest) if line_end < 0 else line_end
        meta = rest[line_start:where].lstrip(" \t").startswith("\\")
        cut = line_start if meta else where
        try:
            _pg_scan(rest[:cut], out, scan)
        except pg_parser.ParseError:
            out.append((T.Error, rest[:cut]))
        if not meta:
            out.append((T.Error, rest[cut:]))
            return out
        out.append((T.Other, rest[cut:line_end]))
        rest = rest[line_end:]
    return out


def tokens(script: str, lexicon: Lexicon) -> list[tuple[object, str]]:
    """``script``'s tokens as ``lexicon`` reads them: the server's scanner where it has one, else
    sqlparse's lexer (a regular expression with the same rules for a large script)."""
    if lexicon.scanner is not None:
        return _pg_tokens(script, lexicon.scanner)
    if len(script) > FAST_TOKENIZER_FROM:
        return _fast_tokens(script, lexicon)
    if "'" not in script:
        return list(lexer.tokenize(script))
    # sqlparse reads a backslash before a quote as an escape; standard SQL never does.
    masked = script.replace("\\", "_")
    masked = _mask_q_quotes(masked) if lexicon.q_quotes and _Q_QUOTE.search(masked) else masked
    if masked == script:
        return list(lexer.tokenize(script))
    # Same length: map each token of the masked text back onto the original characters.
    toks, at = [], 0
    for ttype, value in lexer.tokenize(masked):
        toks.append((ttype, script[at : at + len(value)]))
        at += len(value)
    return toks


@functools.cache
def _is_blank(ttype: object) -> bool:
    return ttype in T.Whitespace or ttype in T.Newline or ttype in T.Text.Whitespace


@functools.cache
def _is_comment(ttype: object) -> bool:
    return ttype in T.Comment


def _is_newline(value: str) -> bool:
    return "\n" in value


def first_keyword(text: str, n: int = 1) -> str:
    """The first ``n`` words of ``text`` (comments skipped), upper-cased and space-joined.

    Read with PostgreSQL's scanner whatever the dialect, as always: what a statement starts with
    (``CREATE``, ``SELECT``, a ``/*`` comment ...) reads the same in SQL*Plus."""
    # The head is enough unless a long comment comes first (a 30 KB INSERT need not be lexed).
    words = _significant_words(_pg_tokens(text[:2000]), 0, n) if len(text) > 2000 else []
    if len(words) < n:
        words = _significant_words(_pg_tokens(text), 0, n)
    return " ".join(words)


def _significant_words(toks: list[tuple[object, str]], start: int, n: int, stop: int | None = None) -> list[str]:
    words: list[str] = []
    for k in range(start, len(toks) if stop is None else stop):  # by index: a slice would copy the rest of a long script
        ttype, value = toks[k]
        if _is_blank(ttype) or _is_comment(ttype):
            continue
        # sqlparse lexes some phrases (``CREATE OR REPLACE``) as one token.
        words.extend(value.upper().split())
        if len(words) >= n:
            break
    return words[:n] if len(words) > n else words


def _slash_line_at(toks: list[tuple[object, str]], i: int, at_line_start: bool) -> bool:
    """Token ``i`` is a ``/`` alone on its line (surrounding blanks allowed)."""
    ttype, value = toks[i]
    if value != "/" or not at_line_start:
        return False
    for k in range(i + 1, len(toks)):
        ttype2, value2 = toks[k]
        if _is_newline(value2) and _is_blank(ttype2):
            return True
        if _is_blank(ttype2):
            continue
        return False
    return True


#: A line holding a client meta-command or a lone ``/`` (client rules: the token path reads it).
_CLIENT_LINE = re.compile(r"^[ \t]*[/\\]", re.M)


def split(script: str, dialect: str | Lexicon) -> list[Statement]:
    """Split ``script`` into statements following the client rules of ``dialect`` (a name: its
    :class:`Lexicon` is looked up)."""
    if len(script) > FAST_TOKENIZER_FROM:
        lexicon = lexicon_of(dialect)
        fast = _split_large(script, lexicon.slices) if lexicon.slices is not None else None
        return fast if fast is not None else list(_split(script, lexicon))  # not kept: data scripts run once
    return list(_split_cached(script, dialect))


def lexicon_of(dialect: str | Lexicon) -> Lexicon:
    """``dialect``'s :class:`Lexicon` (a name is looked up; a Lexicon is itself)."""
    return rules_for(dialect)[0] if isinstance(dialect, str) else dialect


@functools.lru_cache(maxsize=32)
def _split_cached(script: str, dialect: str | Lexicon) -> tuple[Statement, ...]:
    """An answer is split by the safety check and again to install it (statements are immutable).
    Keyed by what the caller passed: a hit costs no lookup."""
    return tuple(_split(script, lexicon_of(dialect)))


def _split_large(script: str, slices: Callable[[str], Sequence[slice]]) -> list[Statement] | None:
    """A large script (a data fixture) split by the server's scanner in C, without building a
    token per word; None when client rules apply (meta-commands, ``/`` lines) or the scanner
    stops early: the token-by-token splitter handles those."""
    text = script.replace("\r\n", "\n").replace("\r", "\n")
    if _CLIENT_LINE.search(text):
        return None
    try:
        pieces = slices(text)
    except pg_parser.ParseError:
        return None
    out, line, at = [], 1, 0
    for piece in pieces:
        line += text.count("\n", at, piece.start)
        at = piece.start
        body = text[piece]
        lead = _leading_blanks(body)
        out.append(Statement(body[lead:].strip(), "sql", line + body.count("\n", 0, lead), None))
    return out


def _leading_blanks(body: str) -> int:
    """Length of the blanks and comments a statement starts with (the token path skips them)."""
    i, n = 0, len(body)
    while i < n:
        if body[i].isspace():
            i += 1
        elif body.startswith("--", i):
            end = body.find("\n", i)
            i = n if end < 0 else end + 1
        elif body.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if body.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif body.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        else:
            break
    return i


def _split(script: str, lexicon: Lexicon) -> Iterator[Statement]:
    toks = tokens(script.replace("\r\n", "\n").replace("\r", "\n"), lexicon)
    i, line, n = 0, 1, len(toks)
    at_line_start = True
    while i < n:
        ttype, value = toks[i]
        # Skip blanks and comments between statements.
        if _is_blank(ttype) or _is_comment(ttype):
            if _is_newline(value):
                at_line_start = True
            line += value.count("\n")
            i += 1
            continue
        if value == "/" and _slash_line_at(toks, i, at_line_start):
            i += 1  # a stray terminator (e.g. after a client command) is harmless
            continue
        if value == ";":
            i += 1  # empty statement
            continue
        start_line = line
        if lexicon.backslash_commands and at_line_start and value.startswith("\\"):
            # psql meta-command: up to end of line.
            parts = []
            while i < n and not (_is_newline(toks[i][1]) and _is_blank(toks[i][0])):
                parts.append(toks[i][1])
                i += 1
            text = "".join(parts).strip()
            yield Statement(text, "client", start_line, text.split()[0])
            continue
        words = _significant_words(toks, i, 8)
        kind, command = lexicon.classify(words) if lexicon.classify is not None else ("sql", None)
        if kind == "client" or command == "EXEC":
            parts = []
            while i < n and not (_is_newline(toks[i][1]) and (_is_blank(toks[i][0]) or _is_comment(toks[i][0]))):
                parts.append(toks[i][1])
                i += 1
            text = "".join(parts).strip()
            if command == "EXEC":
                call = text.split(None, 1)[1] if len(text.split(None, 1)) > 1 else ""
                call = call.strip().rstrip(";").strip()
                yield Statement(f"BEGIN {call}; END;", "plsql", start_line, None)
            else:
                yield Statement(text, "client", start_line, command)
            continue
        # Accumulate one statement.
        parts = []
        at_line_start = False
        terminated_by = None
        first, stop = i, n
        while i < n:
            ttype, value = toks[i]
            if value == "/" and _slash_line_at(toks, i, at_line_start):
                terminated_by = "/"
                stop = i
                i += 1
                break
            if kind != "plsql" and value == ";" and ttype in T.Punctuation:
                terminated_by = ";"
                stop = i
                i += 1
                break
            parts.append(value)
            if _is_newline(value):
                at_line_start = True
                line += value.count("\n")
            elif not _is_blank(ttype):
                at_line_start = False
            i += 1
        text = "".join(parts).strip()
        if not text:
            continue
        if lexicon.strip_semicolon and kind == "sql" and text.endswith(";"):
            text = text[:-1].rstrip()
        # The splitter's words are first_keyword's where both read with the server's scanner.
        head = " ".join(_significant_words(toks, first, 2, stop)) if lexicon.scanner is not None else None
        yield Statement(text, kind, start_line, None, head)
        at_line_start = terminated_by == "/"


_SERVEROUTPUT = re.compile(r"^SET\s+SERVEROUT(?:PUT|PU|P)?\s+(ON|OFF)\b", re.I)


def serveroutput(stmt: Statement) -> bool | None:
    """``True``/``False`` for ``SET SERVEROUTPUT ON|OFF`` (any abbreviation), else None."""
    if stmt.kind != "client":
        return None
    m = _SERVEROUTPUT.match(stmt.text.strip())
    return None if m is None else m.group(1).upper() == "ON"

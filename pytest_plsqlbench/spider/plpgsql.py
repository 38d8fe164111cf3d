"""Rule-based translation of the published Spider-PLSQL reference blocks to PL/pgSQL.

The references are Oracle anonymous blocks that print rows with DBMS_OUTPUT. For the
postgres dialect they become ``DO`` blocks that print with ``RAISE NOTICE``. The rules cover
what such blocks use -- variables, cursors, cursor FOR loops, numeric and WHILE loops, IF,
``SELECT ... INTO``, exception handlers, ``DBMS_OUTPUT.PUT_LINE/PUT/NEW_LINE``,
``RAISE_APPLICATION_ERROR`` -- and every embedded SQL statement or expression goes through
sqlglot (:mod:`.transpile`: ``NVL`` -> ``COALESCE``, NULL-ignoring ``||`` ...).

Semantics kept on purpose: ``SELECT ... INTO`` is ``INTO STRICT`` (NO_DATA_FOUND /
TOO_MANY_ROWS as in Oracle); names resolve to columns before variables
(``#variable_conflict use_column``); ``PUT_LINE(NULL)`` prints an empty line; text
``PUT`` without ``NEW_LINE`` is never printed. Anything else raises :class:`TranslateError`
with the construct named, so the report can list what did not translate.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlparse import lexer
from sqlparse import tokens as T

from ..scripts import split
from .schema import pg_ident
from .transpile import TranspileError, expression_to_postgres, to_postgres

DO_TAG = "$plsql$"
BUFFER = "plsql_put_buffer"

EXCEPTIONS = {
    "NO_DATA_FOUND": "no_data_found",
    "TOO_MANY_ROWS": "too_many_rows",
    "ZERO_DIVIDE": "division_by_zero",
    "DUP_VAL_ON_INDEX": "unique_violation",
    "INVALID_NUMBER": "invalid_text_representation",
    "VALUE_ERROR": "data_exception",
    "CASE_NOT_FOUND": "case_not_found",
    "OTHERS": "OTHERS",
}
SCALAR_TYPES = {
    "NUMBER": "numeric",
    "NUMERIC": "numeric",
    "DECIMAL": "numeric",
    "INTEGER": "numeric",
    "INT": "numeric",
    "SMALLINT": "numeric",
    "PLS_INTEGER": "integer",
    "BINARY_INTEGER": "integer",
    "SIMPLE_INTEGER": "integer",
    "NATURAL": "integer",
    "POSITIVE": "integer",
    "FLOAT": "double precision",
    "BINARY_DOUBLE": "double precision",
    "BINARY_FLOAT": "real",
    "VARCHAR2": "varchar",
    "NVARCHAR2": "varchar",
    "VARCHAR": "varchar",
    "CHAR": "char",
    "NCHAR": "char",
    "CLOB": "text",
    "NCLOB": "text",
    "LONG": "text",
    "DATE": "timestamp(0)",
    "TIMESTAMP": "timestamp",
    "BOOLEAN": "boolean",
}
REJECTED_STATEMENTS = {
    "INSERT": "DML",
    "UPDATE": "DML",
    "DELETE": "DML",
    "MERGE": "DML",
    "COMMIT": "transaction control",
    "ROLLBACK": "transaction control",
    "SAVEPOINT": "transaction control",
    "EXECUTE": "dynamic SQL",
    "GOTO": "GOTO",
    "CASE": "a CASE statement",
    "FORALL": "FORALL",
    "PIPE": "PIPE ROW",
}


class TranslateError(ValueError):
    """A reference that the rules do not translate; the message names the construct."""


@dataclass(frozen=True)
class Tok:
    value: str
    ttype: object
    space: bool  # whitespace before it in the source

    @property
    def up(self) -> str:
        return " ".join(self.value.upper().split())


def _tokens(text: str) -> list[Tok]:
    raw = list(lexer.tokenize(text))
    out: list[Tok] = []
    space = False
    for k, (ttype, value) in enumerate(raw):
        if ttype in T.Whitespace or ttype in T.Newline or ttype in T.Text.Whitespace or ttype in T.Comment:
            space = True
            continue
        nxt = raw[k + 1] if k + 1 < len(raw) else None
        # sqlparse reads ``1..10`` as ``1.`` ``.10``: give the range operator back.
        if ttype in T.Number.Float and value.endswith(".") and nxt is not None and nxt[1].startswith("."):
            out.append(Tok(value[:-1], T.Number.Integer, space))
            out.append(Tok("..", T.Operator, False))
            space = False
            continue
        if ttype in T.Number.Float and value.startswith(".") and out and out[-1].value == "..":
            out.append(Tok(value[1:], T.Number.Integer, False))
            space = False
            continue
        if value.startswith("..") and out and out[-1].value != "..":  # ``n ..m``
            out.append(Tok("..", T.Operator, space))
            value, space = value[2:], False
            if not value:
                continue
        if value == "." and out and out[-1].value == "." and not space:  # ``a . . b``
            out[-1] = Tok("..", T.Operator, out[-1].space)
            continue
        out.append(Tok(value, ttype, space))
        space = False
    return out


def _text(toks: list[Tok]) -> str:
    return "".join((" " if t.space and i else "") + t.value for i, t in enumerate(toks)).strip()


def _expr(toks: list[Tok]) -> str:
    if not toks:
        raise TranslateError("an empty expression")
    for t in toks:
        if t.value == "%":
            raise TranslateError(f"a cursor or SQL attribute ({_text(toks)[:60]})")
        if t.up in ("SQLCODE",):
            raise TranslateError("SQLCODE (PostgreSQL has SQLSTATE codes)")
    try:
        return expression_to_postgres(_text(toks))
    except TranspileError as exc:
        raise TranslateError(f"expression {_text(toks)[:60]!r}: {exc}") from None


def _query(toks: list[Tok]) -> str:
    try:
        return to_postgres(_text(toks))
    except TranspileError as exc:
        raise TranslateError(f"SQL {_text(toks)[:60]!r}: {exc}") from None


class _Parser:
    """Recursive descent over one anonymous block's tokens, emitting PL/pgSQL."""

    def __init__(self, toks: list[Tok]) -> None:
        self.toks = toks
        self.i = 0
        self.cursors: set[str] = set()
        self.uses_buffer = False
        self.records: list[set[str]] = []

    # ----------------------------------------------------------------- token helpers
    def peek(self, k: int = 0) -> Tok | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def at(self, *words: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.up in words

    def current(self) -> Tok:
        """The next token, not taken; the block must go on."""
        tok = self.peek()
        if tok is None:
            raise TranslateError("the block ends early")
        return tok

    def take(self) -> Tok:
        tok = self.peek()
        if tok is None:
            raise TranslateError("the block ends early")
        self.i += 1
        return tok

    def expect(self, *words: str) -> Tok:
        tok = self.take()
        if tok.up not in words:
            raise TranslateError(f"expected {' or '.join(words)}, found {tok.value!r}")
        return tok

    def until(self, stops: set[str]) -> list[Tok]:
        """Tokens up to a stop word at parenthesis depth 0 and outside CASE expressions."""
        out: list[Tok] = []
        depth = case = 0
        while True:
            tok = self.peek()
            if tok is None:
                raise TranslateError(f"missing {' or '.join(sorted(stops))}")
            if depth == 0 and case == 0 and tok.up in stops:
                return out
            if tok.value == "(":
                depth += 1
            elif tok.value == ")":
                depth -= 1
            elif tok.up == "CASE":
                case += 1
            elif tok.up == "END" and case:
                case -= 1
            out.append(self.take())

    # ----------------------------------------------------------------- blocks
    def block(self, label: str | None = None) -> list[str]:
        self.records.append(set())
        decls: list[str] = []
        if self.at("DECLARE"):
            self.take()
            decls = self.declarations()
        self.expect("BEGIN")
        body = self.statements({"EXCEPTION", "END"})
        handlers: list[str] = []
        if self.at("EXCEPTION"):
            self.take()
            handlers = self.handlers()
        self.expect("END")
        if (tok := self.peek()) is not None and tok.value != ";":  # END name;
            self.take()
        self.expect(";")
        records = sorted(self.records.pop())
        decls = [f"{r} record;" for r in records] + decls
        out = ([f"<<{label}>>"] if label else []) + (["DECLARE"] + _indent(decls) if decls else [])
        out += ["BEGIN"] + _indent(body)
        if handlers:
            out += ["EXCEPTION"] + _indent(handlers)
        out.append(f"END{' ' + label if label else ''};")
        return out

    def declarations(self) -> list[str]:
        out: list[str] = []
        while not self.at("BEGIN"):
            first = self.take()
            if first.up == "CURSOR":
                out.append(self.cursor_declaration())
                continue
            if first.up in ("TYPE", "SUBTYPE", "PRAGMA", "PROCEDURE", "FUNCTION"):
                raise TranslateError(f"a local {first.up} declaration")
            name = pg_ident(first.value)
            rest = self.until({";"})
            self.expect(";")
            words = [t.up for t in rest]
            if words[:1] == ["EXCEPTION"]:
                raise TranslateError("a user-defined exception")
            constant = bool(words and words[0] == "CONSTANT")
            rest = rest[1:] if constant else rest
            init: list[Tok] = []
            for j, t in enumerate(rest):
                if t.value == ":=" or t.up == "DEFAULT":
                    rest, init = rest[:j], rest[j + 1 :]
                    break
            not_null = len(rest) >= 2 and rest[-2].up == "NOT" and rest[-1].up == "NULL"
            if not_null:
                rest = rest[:-2]
            decl = f"{name}{' CONSTANT' if constant else ''} {self.type_name(rest)}"
            if not_null:
                decl += " NOT NULL"
            if init:
                decl += f" := {_expr(init)}"
            out.append(decl + ";")
        return out

    def cursor_declaration(self) -> str:
        name = self.take().value
        params = ""
        if (tok := self.peek()) is not None and tok.value == "(":
            self.take()
            raw = self.until({")"})
            self.expect(")")
            parts: list[str] = []
            current: list[Tok] = []
            for t in raw + [Tok(",", T.Punctuation, False)]:
                if t.value == ",":
                    if len(current) < 2:
                        raise TranslateError("a cursor parameter without a type")
                    kept = [x for x in current[1:] if x.up not in ("IN",)]
                    parts.append(f"{pg_ident(current[0].value)} {self.type_name(kept)}")
                    current = []
                else:
                    current.append(t)
            params = f" ({', '.join(parts)})"
        if self.at("RETURN"):
            raise TranslateError("a cursor with a RETURN type")
        self.expect("IS")
        query = self.until({";"})
        self.expect(";")
        self.cursors.add(name.upper())
        return f"{pg_ident(name)} CURSOR{params} FOR {_query(query)};"

    def type_name(self, toks: list[Tok]) -> str:
        if not toks:
            raise TranslateError("a declaration without a type")
        if any(t.value == "%" for t in toks):
            j = next(k for k, t in enumerate(toks) if t.value == "%")
            attr = toks[j + 1].up if j + 1 < len(toks) else ""
            names = [t.value for t in toks[:j] if t.value != "."]
            if attr not in ("TYPE", "ROWTYPE"):
                raise TranslateError(f"%{attr} in a declaration")
            if attr == "ROWTYPE" and len(names) == 1 and names[0].upper() in self.cursors:
                return "record"
            return ".".join(pg_ident(n) for n in names) + f"%{attr}"
        base = toks[0].up
        if base not in SCALAR_TYPES:
            raise TranslateError(f"the type {_text(toks)}")
        pg = SCALAR_TYPES[base]
        args = [t.value for t in toks[1:] if t.ttype in T.Number]
        if pg in ("varchar", "char") and args:
            return f"{pg}({args[0]})"
        if pg == "numeric" and args and base in ("NUMBER", "NUMERIC", "DECIMAL"):
            return f"numeric({', '.join(args[:2])})"
        return pg

    def handlers(self) -> list[str]:
        out: list[str] = []
        while self.at("WHEN"):
            self.take()
            names = self.until({"THEN"})
            self.expect("THEN")
            conditions = []
            for t in names:
                if t.up == "OR":
                    continue
                if t.up not in EXCEPTIONS:
                    raise TranslateError(f"the exception {t.value}")
                conditions.append(EXCEPTIONS[t.up])
            out.append(f"WHEN {' OR '.join(conditions)} THEN")
            out += _indent(self.statements({"WHEN", "END"}))
        return out

    # ----------------------------------------------------------------- statements
    def statements(self, stops: set[str]) -> list[str]:
        out: list[str] = []
        while not self.at(*stops):
            if self.peek() is None:
                raise TranslateError(f"missing {' or '.join(sorted(stops))}")
            out += self.statement()
        return out

    def statement(self) -> list[str]:
        label = None
        if self.current().value == "<<":
            self.take()
            label = self.take().value
            self.expect(">>")
        head = self.current().up
        if head in ("DECLARE", "BEGIN"):
            return self.block(label)
        if head == "IF":
            return self.if_statement()
        if head in ("FOR", "WHILE", "LOOP"):
            return self.loop(label)
        toks = self.until({";"})
        self.expect(";")
        return [self.simple(toks)]

    def if_statement(self) -> list[str]:
        self.expect("IF")
        cond = self.until({"THEN"})
        self.expect("THEN")
        out = [f"IF {_expr(cond)} THEN"] + _indent(self.statements({"ELSIF", "ELSE", "END IF"}))
        while self.at("ELSIF"):
            self.take()
            cond = self.until({"THEN"})
            self.expect("THEN")
            out += [f"ELSIF {_expr(cond)} THEN"] + _indent(self.statements({"ELSIF", "ELSE", "END IF"}))
        if self.at("ELSE"):
            self.take()
            out += ["ELSE"] + _indent(self.statements({"END IF"}))
        self.expect("END IF")
        self.expect(";")
        out.append("END IF;")
        return out

    def loop(self, label: str | None) -> list[str]:
        kind = self.take().up
        prefix = [f"<<{label}>>"] if label else []
        if kind == "LOOP":
            head = "LOOP"
        elif kind == "WHILE":
            cond = self.until({"LOOP"})
            head = f"WHILE {_expr(cond)} LOOP"
            self.expect("LOOP")
        else:
            var = self.take().value
            self.expect("IN")
            reverse = self.at("REVERSE")
            if reverse:
                self.take()
            source = self.until({"LOOP"})
            self.expect("LOOP")
            head = self.for_head(var, source, reverse)
        body = self.statements({"END LOOP"})
        self.expect("END LOOP")
        if (tok := self.peek()) is not None and tok.value != ";":
            self.take()  # END LOOP label;
        self.expect(";")
        return prefix + [head] + _indent(body) + [f"END LOOP{' ' + label if label else ''};"]

    def for_head(self, var: str, source: list[Tok], reverse: bool) -> str:
        dots = next((j for j, t in reversed(_top_level(source)) if t.value == ".."), None)
        if dots is not None:
            lo, hi = _expr(source[:dots]), _expr(source[dots + 1 :])
            if reverse:
                return f"FOR {pg_ident(var)} IN REVERSE {hi}..{lo} LOOP"
            return f"FOR {pg_ident(var)} IN {lo}..{hi} LOOP"
        if reverse:
            raise TranslateError("REVERSE over a query")
        if (
            source
            and source[0].value == "("
            and source[-1].value == ")"
            and len(source) > 2
            and source[1].up in ("SELECT", "WITH")
        ):
            self.records[-1].add(pg_ident(var))
            return f"FOR {pg_ident(var)} IN {_query(source[1:-1])} LOOP"
        if source and source[0].up in self.cursors:
            args = f"({', '.join(_args(source[1:]))})" if len(source) > 1 else ""
            return f"FOR {pg_ident(var)} IN {pg_ident(source[0].value)}{args} LOOP"
        raise TranslateError(f"FOR ... IN {_text(source)[:40]}")

    def simple(self, toks: list[Tok]) -> str:
        if not toks:
            return "NULL;"
        head = toks[0].up
        words = [t.up for t in toks]
        if head == "NULL" and len(toks) == 1:
            return "NULL;"
        if head in ("EXIT", "CONTINUE"):
            if "WHEN" in words:
                j = words.index("WHEN")
                return f"{_text(toks[:j])} WHEN {_expr(toks[j + 1 :])};"
            return f"{_text(toks)};"
        if head == "RETURN":
            if len(toks) > 1:
                raise TranslateError("RETURN with a value in an anonymous block")
            return "RETURN;"
        if head == "RAISE":
            if len(toks) == 1:
                return "RAISE;"
            if words[1] in EXCEPTIONS and words[1] != "OTHERS" and len(toks) == 2:
                return f"RAISE {EXCEPTIONS[words[1]]};"
            raise TranslateError(f"RAISE {toks[1].value}")
        if head in ("SELECT", "WITH"):
            return self.select_into(toks)
        if head in ("OPEN", "CLOSE"):
            args = f"({', '.join(_args(toks[2:]))})" if len(toks) > 2 else ""
            return f"{head} {pg_ident(toks[1].value)}{args};"
        if head == "FETCH":
            if "BULK" in words:
                raise TranslateError("BULK COLLECT")
            j = words.index("INTO")
            targets = ", ".join(_expr(g) for g in _split_commas(toks[j + 1 :]))
            return f"FETCH {pg_ident(toks[1].value)} INTO {targets};"
        if head in REJECTED_STATEMENTS:
            raise TranslateError(REJECTED_STATEMENTS[head])
        call = _text(toks[:3]).replace(" ", "").upper() if len(toks) >= 3 else head
        if call.startswith("DBMS_OUTPUT."):
            return self.dbms_output(toks)
        if head == "RAISE_APPLICATION_ERROR":
            raised = _args(toks[1:])
            if len(raised) < 2:
                raise TranslateError("RAISE_APPLICATION_ERROR without a message")
            return f"RAISE EXCEPTION USING MESSAGE = {raised[1]}, ERRCODE = 'P0001';"
        for j, t in enumerate(toks):
            if t.value == ":=":
                return f"{_expr(toks[:j])} := {_expr(toks[j + 1 :])};"
        raise TranslateError(f"a call to {_text(toks)[:40]}")

    def select_into(self, toks: list[Tok]) -> str:
        into = None
        for j, t in _top_level(toks):
            if t.up == "INTO":
                into = j
                break
            if t.up == "BULK":
                raise TranslateError("BULK COLLECT")
        if into is None:
            raise TranslateError("a SELECT without INTO")
        end = next((k for k in range(into + 1, len(toks)) if toks[k].up == "FROM"), None)
        if end is None:
            raise TranslateError("SELECT ... INTO without FROM")
        targets = ", ".join(_expr(g) for g in _split_commas(toks[into + 1 : end]))
        query = _query(toks[:into] + toks[end:])
        return f"{query} INTO STRICT {targets};"

    def dbms_output(self, toks: list[Tok]) -> str:
        name = toks[2].up
        args = _args(toks[3:]) if len(toks) > 3 else []
        if name == "PUT_LINE":
            return f"RAISE NOTICE '%', COALESCE(CAST(({args[0]}) AS TEXT), '');"
        if name == "PUT":
            self.uses_buffer = True
            return f"{BUFFER} := {BUFFER} || COALESCE(CAST(({args[0]}) AS TEXT), '');"
        if name == "NEW_LINE":
            self.uses_buffer = True
            return f"RAISE NOTICE '%', {BUFFER}; {BUFFER} := '';"
        if name in ("ENABLE", "DISABLE"):
            return "NULL;  -- DBMS_OUTPUT." + name.lower()
        raise TranslateError(f"DBMS_OUTPUT.{name}")


def _top_level(toks: list[Tok]) -> list[tuple[int, Tok]]:
    """(index, token) of the tokens outside every parenthesis (a closing one counts as outside)."""
    out, depth = [], 0
    for j, t in enumerate(toks):
        depth += t.value == "("
        depth -= t.value == ")"
        if depth == 0:
            out.append((j, t))
    return out


def _split_commas(toks: list[Tok]) -> list[list[Tok]]:
    commas = [j for j, t in _top_level(toks) if t.value == ","]
    bounds = zip([-1, *commas], [*commas, len(toks)])
    return [g for lo, hi in bounds if (g := toks[lo + 1 : hi])]


def _args(toks: list[Tok]) -> list[str]:
    """Translated arguments of ``( a, b )`` (the parentheses included in ``toks``)."""
    if not toks or toks[0].value != "(" or toks[-1].value != ")":
        raise TranslateError(f"arguments {_text(toks)[:40]!r}")
    return [_expr(g) for g in _split_commas(toks[1:-1])]


def _indent(lines: list[str]) -> list[str]:
    return ["  " + line for line in lines]


def translate_block(block: str) -> str:
    """One Oracle anonymous block -> a PostgreSQL ``DO`` statement."""
    parser = _Parser(_tokens(block))
    if not parser.at("DECLARE", "BEGIN"):
        raise TranslateError("not an anonymous block")
    body = parser.block()
    rest = parser.peek()
    if rest is not None:
        raise TranslateError(f"text after the block: {rest.value!r}")
    if parser.uses_buffer:
        if body[0] == "DECLARE":
            body.insert(1, f"  {BUFFER} text := '';")
        else:
            body = ["DECLARE", f"  {BUFFER} text := '';"] + body
    code = "\n".join(["#variable_conflict use_column", *body])
    if DO_TAG in code:
        raise TranslateError("the block contains the DO delimiter")
    return f"DO {DO_TAG}\n{code}\n{DO_TAG};"


def translate_reference(script: str) -> str:
    """A published Spider reference (a SQL*Plus script) as a psql script for PostgreSQL.

    SQL*Plus commands are dropped; each anonymous block becomes a ``DO`` block and each plain
    query a transpiled query. Raises :class:`TranslateError` naming what did not translate.
    """
    out: list[str] = []
    for stmt in split(script, "oracle"):
        if stmt.kind == "client":
            continue
        if stmt.kind == "plsql" and stmt.first_word in ("DECLARE", "BEGIN"):
            out.append(translate_block(stmt.text))
        elif stmt.kind == "sql" and stmt.first_word in ("SELECT", "WITH"):
            try:
                out.append(to_postgres(stmt.text) + ";")
            except TranspileError as exc:
                raise TranslateError(f"query at line {stmt.line}: {exc}") from None
        else:
            raise TranslateError(f"a {stmt.first_word} statement at line {stmt.line}")
    if not out:
        raise TranslateError("no code")
    return "\n".join(out) + "\n"

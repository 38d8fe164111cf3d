"""Code out of a model's reply: fenced blocks, leading prose and trailing commentary.

Models are told to answer with bare code, and many still wrap it in markdown or explain it.
Extraction is deliberately conservative: it removes what is clearly not code (fences, a
reasoning block, prose before the first statement, commentary after the last terminator) and
keeps everything else. The raw reply is always stored beside the code, so a person can see
what extraction did; a reply with no code at all yields whatever text remains -- it fails its
tests as a model failure.
"""

from __future__ import annotations

import re

#: Fence languages that hold SQL; an untagged fence counts as SQL too.
SQL_LANGS = frozenset(
    {"", "sql", "plsql", "pl-sql", "pls", "oracle", "oraclesql", "sqlplus", "pgsql", "plpgsql", "postgres",
     "postgresql", "psql", "sqlpl", "ddl"}
)

_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[^\s`]*)[^\n]*$")
_REASONING = re.compile(r"<(think|thinking|reasoning)>.*?(</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_CODE_START = re.compile(
    r"""^\s*(?:
        create\s+(?:or\s+replace\s+)?(?:(?:non)?editionable\s+)?(?:function|procedure|package|type|trigger|view
            |table|index|sequence|materialized|global|temp|temporary|unique|synonym|schema|extension|domain
            |aggregate|operator|cast|rule|policy)\b
      | declare\b | begin\b | do\s+(?:\$|language\b) | end\s*;
      | with\s+(?:recursive\s+)?\w+\s*(?:\([^)]*\)\s*)?as\s*\(
      | select\b(?!\s+(?:the|a|an|this|that|one|which)\b)
      | set\s+(?:serveroutput|define|echo|feedback|search_path|client_min_messages|verify|linesize|pagesize)\b
      | alter\s+(?:session|table|function|procedure|package|type|system|view|trigger)\b
      | drop\s+(?:function|procedure|package|type|table|view|trigger|sequence|index)\b
      | (?:call|exec|execute)\s+[\w.$"]+\s*(?:\(|;)
      | insert\s+into\b | update\s+[\w.$"]+\s+set\b | delete\s+from\b | merge\s+into\b | truncate\s+table\b
      | comment\s+on\b | grant\s+\w+
      | -- | /\* | <<\w+>>
    )""",
    re.IGNORECASE | re.VERBOSE,
)


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of each fenced block; an unclosed last fence runs to the end."""
    blocks: list[tuple[str, str]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group("fence"), m.group("lang").lower()
        body: list[str] = []
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                break
            body.append(lines[i])
            i += 1
        blocks.append((lang, "\n".join(body)))
        i += 1
    return blocks


def _is_terminator(line: str, dialect: str) -> bool:
    s = line.strip()
    if not s:
        return False
    if dialect == "oracle" and s == "/":
        return True
    code = s.split("--", 1)[0].rstrip() if "--" in s and "'" not in s else s
    return code.endswith((";", "$$"))


def _strip_prose(text: str, dialect: str) -> str:
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return text.strip()
    lines = lines[start:]
    ends = [i for i, line in enumerate(lines) if _is_terminator(line, dialect)]
    if dialect == "oracle" and any(line.strip() == "/" for line in lines):
        ends = [i for i, line in enumerate(lines) if line.strip() == "/"]
    if ends:
        last = ends[-1]
        tail = [line for line in lines[last + 1 :] if line.strip()]
        if tail and not _CODE_START.match(tail[0]) and tail[0].strip() != "/":
            lines = lines[: last + 1]
    return "\n".join(lines).strip("\n").rstrip()


def extract_code(reply: str | None, dialect: str = "oracle") -> str:
    """The code in ``reply`` (possibly empty), for ``dialect`` (``oracle`` or ``postgres``)."""
    if not reply:
        return ""
    text = reply.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    text = _REASONING.sub("", text)
    blocks = _fenced_blocks(text)
    if blocks:
        sql = [body for lang, body in blocks if lang in SQL_LANGS and body.strip()]
        if sql:
            return "\n\n".join(body.strip("\n").rstrip() for body in sql)
        longest = max((body for _, body in blocks), key=lambda b: len(b.strip()))
        if longest.strip():
            return longest.strip("\n").rstrip()
    return _strip_prose(text, dialect)

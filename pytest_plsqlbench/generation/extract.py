"""Code out of a model's reply: fenced blocks, leading prose and trailing commentary.

Models are told to answer with bare code, and many still wrap it in markdown or explain it.
Extraction is deliberately conservative: it removes what is clearly not code (fences, a
reasoning block, prose before the first statement, commentary after the last terminator) and
keeps everything else. The raw reply is always stored beside the code, so a person can see
what extraction did; a reply with no code at all yields whatever text remains -- it fails its
tests as a model failure.

Which fenced blocks are code: SQL-tagged ones (``sql``, ``ddl``, any tag containing ``sql``, and
the fence names of every registered dialect's :class:`~pytest_plsqlbench.lexicon.Lexicon`:
``plpgsql``, ``oracle`` ...) and untagged ones whose first line starts like a statement; an
untagged ``Example output`` block or a ``python`` block is not. When the reply
starts with bare code before its first fence, that code is the answer and later fences (a usage
example, sample output) are commentary.
"""

from __future__ import annotations

import functools
import re

from ..lexicon import Lexicon
from ..registry import Registry, active
from ..scripts import lexicon_of

#: Fence languages that hold SQL in any dialect (besides any tag containing ``sql`` and the
#: registered dialects' :attr:`Lexicon.fence_names <pytest_plsqlbench.lexicon.Lexicon.fence_names>`).
#: An untagged fence counts as SQL when its first line starts like a statement (:func:`_is_code_block`).
SQL_LANGS = frozenset({"sql", "sqlpl", "ddl"})

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


def _fenced_blocks(text: str) -> list[tuple[str, str, int, int]]:
    """``(language, body, first line, last line)`` of each fenced block (line numbers of the
    opening and closing fence); an unclosed last fence runs to the end."""
    blocks: list[tuple[str, str, int, int]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group("fence"), m.group("lang").lower()
        first = i
        body: list[str] = []
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                break
            body.append(lines[i])
            i += 1
        blocks.append((lang, "\n".join(body), first, min(i, len(lines) - 1)))
        i += 1
    return blocks


@functools.lru_cache(maxsize=8)
def _code_langs(registry: Registry) -> frozenset[str]:
    """:data:`SQL_LANGS` and the fence names of ``registry``'s dialects (once per registry: a
    model's every reply asks)."""
    return SQL_LANGS.union(*(d.lexicon.fence_names for d in registry.dialects.values()))


def _is_code_block(lang: str, body: str, langs: frozenset[str]) -> bool:
    """A SQL-tagged block (``langs``), or an untagged one whose first non-blank line starts like a statement."""
    if not body.strip():
        return False
    if lang:
        return lang in langs or "sql" in lang
    first = next(line for line in body.split("\n") if line.strip())
    return bool(_CODE_START.match(first))


def _has_code(text: str, lexicon: Lexicon) -> bool:
    """Bare code: a line that starts like a statement, followed (or ended) by a terminator."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    return start is not None and any(_is_terminator(line, lexicon) for line in lines[start:])


def _is_terminator(line: str, lexicon: Lexicon) -> bool:
    s = line.strip()
    if not s:
        return False
    if lexicon.slash_terminator and s == "/":
        return True
    code = s.split("--", 1)[0].rstrip() if "--" in s and "'" not in s else s
    return code.endswith((";", "$$"))


def _strip_prose(text: str, lexicon: Lexicon) -> str:
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return text.strip()
    lines = lines[start:]
    ends = [i for i, line in enumerate(lines) if _is_terminator(line, lexicon)]
    if lexicon.slash_terminator and any(line.strip() == "/" for line in lines):
        ends = [i for i, line in enumerate(lines) if line.strip() == "/"]
    if ends:
        last = ends[-1]
        tail = [line for line in lines[last + 1 :] if line.strip()]
        if tail and not _CODE_START.match(tail[0]) and tail[0].strip() != "/":
            lines = lines[: last + 1]
    return "\n".join(lines).strip("\n").rstrip()


def extract_code(reply: str | None, dialect: str | Lexicon) -> str:
    """The code in ``reply`` (possibly empty), for ``dialect`` (a name: its :class:`Lexicon` is looked up)."""
    if not reply:
        return ""
    lexicon = lexicon_of(dialect)
    text = reply.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    text = _REASONING.sub("", text)
    blocks = _fenced_blocks(text)
    if not blocks:
        return _strip_prose(text, lexicon)
    lines = text.split("\n")
    lead = "\n".join(lines[: blocks[0][2]])
    if _has_code(lead, lexicon):
        # Bare code first; the fences after it are a usage example or sample output.
        return _strip_prose(lead, lexicon)
    langs = _code_langs(active())
    code = [body for lang, body, _, _ in blocks if _is_code_block(lang, body, langs)]
    if code:
        return "\n\n".join(body.strip("\n").rstrip() for body in code)
    # No code block: the other blocks (python, sample output) are ignored, never taken for code.
    fenced = {n for _, _, first, last in blocks for n in range(first, last + 1)}
    return _strip_prose("\n".join(line for n, line in enumerate(lines) if n not in fenced), lexicon)

"""Standard mutants of a gold procedure, and the mutation score of a task's call suite.

``plsqlbench validate --subset procarena-sample --mutants`` (docs/procarena.md): a call suite is
only as good as the wrong procedures it refuses. Each mutant is gold with one small change, made
from gold's own tokens (PostgreSQL's scanner for PL/pgSQL, the project's Oracle lexer for PL/SQL;
nothing hand-picked). The operators:

``relational``
    a comparison operator (``= <> != < <= > >=``) replaced by each other one, except the
    boundary pairs below.
``boundary``
    ``<`` <-> ``<=`` and ``>`` <-> ``>=`` (the off-by-one at a threshold).
``arithmetic``
    a binary ``+ - * /`` replaced by each other one.
``logical``
    ``AND`` <-> ``OR`` (not the ``AND`` of ``BETWEEN``).
``constant``
    a numeric literal ``c`` replaced by ``c+1``, ``c-1`` and ``0`` (not type modifiers such as
    ``varchar(20)``).
``statement``
    one simple statement (SQL, assignment, procedure call, ``RAISE``, ``EXIT``/``CONTINUE``/
    ``RETURN``) replaced by ``NULL;``.
``where``
    the ``WHERE`` clause of one statement or subquery removed.

Statements whose only effect is printed output (``RAISE NOTICE``, ``DBMS_OUTPUT``) are not
mutated: the judge compares tables, and validation refuses requirements that ask for printed
output. A mutant that does not install (a syntax or compile error) is *stillborn* and not counted;
a mutant the task file marks equivalent (field ``equivalent_mutants``, with the reason) is not
counted either. The score is killed / (generated - stillborn - equivalent); a mutant is killed
when at least one call's outcome differs from gold's, which is exactly how the judge scores an answer:
each mutant runs through :func:`.evaluation.evaluate`, so it follows whatever isolation the judge uses.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from .. import outcomes
from .dialects import adapter_for

#: How the runner words an answer that did not install (runner.TaskRun).
INSTALL_FAILED = "the answer failed to install"

OPERATORS = ("relational", "boundary", "arithmetic", "logical", "constant", "statement", "where")

_REL = ("=", "<>", "<", "<=", ">", ">=")
_BOUNDARY = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
_ARITH = ("+", "-", "*", "/")
#: Words whose parenthesised numbers are type modifiers, not constants of the logic.
_TYPE_WORDS = frozenset(
    "varchar varchar2 nvarchar2 char character nchar numeric decimal number float raw timestamp "
    "interval time bit varbit urowid".split()
)
#: First words of a simple statement that deletion may replace by ``NULL;``.
_SIMPLE = frozenset("update insert delete merge select perform raise call execute exit continue return with".split())
#: Words after which a new PL statement starts (at statement level).
_OPENERS = frozenset({"then", "else", "loop", "begin", "declare", "exception"})
#: Control statements: their header runs to the opener word, not to a semicolon.
_CONTROL = frozenset({"if", "elsif", "elseif", "for", "while", "loop", "case", "when", "foreach", "forall"})
#: Words that end a WHERE clause at its own parenthesis depth.
_WHERE_END = frozenset(
    "order group having limit returning for loop union intersect except minus fetch offset window connect start into then".split()
)
_OUTPUT = re.compile(r"^\s*(raise\s+(notice|info|log|debug|warning)\b|dbms_output\s*\.)", re.I)


class MutationError(ValueError):
    """Gold that cannot be lexed into mutants (message names the task)."""


@dataclass(frozen=True)
class Tok:
    kind: str  # ws, comment, str, num, word, qword, op, punct, body, other
    text: str
    start: int

    @property
    def low(self) -> str:
        return self.text.lower()


@dataclass(frozen=True)
class Mutant:
    """Gold with one change: ``id`` is ``operator:line:column:replacement`` (stable while gold is)."""

    id: str
    operator: str
    line: int
    before: str
    after: str
    code: str

    def diff(self, gold: str) -> str:
        lines = difflib.unified_diff(gold.splitlines(), self.code.splitlines(), "gold", self.id, n=0, lineterm="")
        return "\n".join(list(lines)[2:])


def _kind(ttype: object, value: str) -> str:
    name = str(ttype)
    if value.strip() == "":
        return "ws"
    if "Comment" in name:
        return "comment"
    if name == "Token.Literal" and value.startswith("$"):
        return "body"
    if "String.Symbol" in name or value.startswith('"'):
        return "qword"
    if "String" in name:
        return "str"
    if "Number" in name:
        return "num"
    if value in ("(", ")", ",", ";", "."):
        return "punct"
    if re.fullmatch(r"[A-Za-z_][\w$#]*(\s+[A-Za-z_][\w$#]*)*", value):
        return "word"
    return "op"


def lex(code: str, dialect: str) -> list[Tok]:
    """Tokens of ``code`` with their offsets; a PostgreSQL ``$$`` body is lexed in place."""
    raw = adapter_for(dialect).tokens(code)
    if "".join(v for _, v in raw) != code:
        raise MutationError("the lexer does not cover the code exactly (non-ASCII text in PL/pgSQL?)")
    out: list[Tok] = []
    at = 0
    for ttype, value in raw:
        kind = _kind(ttype, value)
        if kind == "body":
            tag = value[: value.index("$", 1) + 1]
            out.append(Tok("other", tag, at))
            inner = value[len(tag): len(value) - len(tag)]
            out += [Tok(t.kind, t.text, t.start + at + len(tag)) for t in lex(inner, dialect)]
            out.append(Tok("other", tag, at + len(value) - len(tag)))
        elif kind == "num" and value.startswith("-"):
            out += [Tok("op", "-", at), Tok("num", value[1:], at + 1)]  # sqlparse reads -20001 as one number
        else:
            out.append(Tok(kind, value, at))
        at += len(value)
    return out


def _body_ranges(toks: list[Tok], dialect: str) -> list[tuple[int, int]]:
    """Index ranges of significant tokens that hold procedural code (not the header)."""
    if adapter_for(dialect).quoted_bodies:
        tags = [i for i, t in enumerate(toks) if t.kind == "other" and t.text.startswith("$")]
        return [(tags[k] + 1, tags[k + 1]) for k in range(0, len(tags) - 1, 2)]
    ranges = []
    i, depth = 0, 0
    while i < len(toks):
        t = toks[i]
        if t.kind == "word" and t.low in ("procedure", "function", "trigger", "package body"):
            j = i + 1
            depth = 0
            while j < len(toks):
                u = toks[j]
                depth += {"(": 1, ")": -1}.get(u.text, 0)
                if depth == 0 and u.kind == "word" and u.low in ("is", "as"):
                    break
                j += 1
            end = j + 1
            while end < len(toks) and not (toks[end].kind == "op" and toks[end].text == "/"
                                           and "\n" in toks[end - 1].text):
                end += 1
            ranges.append((j + 1, end))
            i = end
        i += 1
    return ranges


def _sig(toks: list[Tok], lo: int, hi: int) -> list[int]:
    return [i for i in range(lo, hi) if toks[i].kind not in ("ws", "comment")]


def _statements(toks: list[Tok], idx: list[int]) -> list[tuple[int, int, str]]:
    """``(first, last, first word)`` per statement of a body (positions in ``idx``)."""
    out = []
    start = 0
    depth = 0
    control = False  # inside a control header (IF ... THEN)
    for p, i in enumerate(idx):
        t = toks[i]
        if t.text == "(":
            depth += 1
        elif t.text == ")":
            depth -= 1
        if p == start:
            control = t.kind == "word" and t.low.split()[0] in _CONTROL
            if t.kind == "word" and t.low in _OPENERS:  # BEGIN, ELSE, LOOP ... open the next one
                start = p + 1
                continue
        if depth:
            continue
        if t.text == ";":
            out.append((start, p, toks[idx[start]].low.split()[0] if start < p else ""))
            start = p + 1
        elif control and t.kind == "word" and t.low in _OPENERS:
            start = p + 1
    return out


def _line_col(code: str, offset: int) -> tuple[int, int]:
    line = code.count("\n", 0, offset) + 1
    return line, offset - (code.rfind("\n", 0, offset) + 1) + 1


class _Builder:
    def __init__(self, code: str) -> None:
        self.code = code
        self.seen: set[str] = {code}
        self.out: list[Mutant] = []

    def add(self, operator: str, start: int, end: int, after: str) -> None:
        code = self.code[:start] + after + self.code[end:]
        if code in self.seen:
            return
        self.seen.add(code)
        line, col = _line_col(self.code, start)
        before = self.code[start:end]
        short = " ".join(after.split())[:24] or "(removed)"
        self.out.append(Mutant(f"{operator}:{line}:{col}:{short}", operator, line, " ".join(before.split()), after, code))


def _number(text: str) -> Decimal | None:
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


def _show(value: Decimal) -> str:
    text = format(value, "f")
    return f"({text})" if text.startswith("-") else text


def generate(code: str, dialect: str, operators: Sequence[str] = OPERATORS) -> list[Mutant]:
    """Every standard mutant of ``code`` (gold), in source order per operator; duplicates dropped."""
    unknown = set(operators) - set(OPERATORS)
    if unknown:
        raise MutationError(f"unknown mutation operator(s) {sorted(unknown)}; known: {', '.join(OPERATORS)}")
    toks = lex(code, dialect)
    b = _Builder(code)
    for lo, hi in _body_ranges(toks, dialect):
        idx = _sig(toks, lo, hi)
        stmts = _statements(toks, idx)
        skip: set[int] = set()  # positions in output-only statements
        for first, last, _ in stmts:
            if first <= last and _OUTPUT.match(code[toks[idx[first]].start: toks[idx[last]].start + 1]):
                skip.update(range(first, last + 1))
        _operators(b, toks, idx, stmts, skip, set(operators))
    return b.out


def _operators(b: _Builder, toks: list[Tok], idx: list[int], stmts: list[tuple[int, int, str]],
               skip: set[int], ops: set[str]) -> None:
    parens: list[str] = []  # word before each open parenthesis
    between = 0  # ANDs that belong to a BETWEEN
    for p, i in enumerate(idx):
        t = toks[i]
        prev = toks[idx[p - 1]] if p else None
        nxt = toks[idx[p + 1]] if p + 1 < len(idx) else None
        if t.text == "(":
            parens.append(prev.low if prev is not None and prev.kind == "word" else "")
            continue
        if t.text == ")":
            if parens:
                parens.pop()
            continue
        if p in skip:
            continue
        end = t.start + len(t.text)
        operand_before = prev is not None and (prev.kind in ("num", "str", "qword") or prev.text == ")"
                                               or (prev.kind == "word" and prev.low not in _KEYWORDS))
        if t.kind == "op" and t.text in (*_REL, "!="):
            if t.text == "=" and _is_assignment(toks, idx, p):
                continue
            here = "<>" if t.text == "!=" else t.text
            for repl in _REL:
                if repl == here:
                    continue
                op = "boundary" if _BOUNDARY.get(here) == repl else "relational"
                if op in ops:
                    b.add(op, t.start, end, repl)
        elif t.kind == "op" and t.text in _ARITH and operand_before and "arithmetic" in ops:
            for repl in _ARITH:
                if repl != t.text:
                    pad = b.code[t.start - 1: t.start] in "-/*" or b.code[end: end + 1] in "-/*"
                    b.add("arithmetic", t.start, end, f" {repl} " if pad else repl)
        elif t.kind == "word" and t.low == "between":
            between += 1
        elif t.kind == "word" and t.low == "and" and between:
            between -= 1
        elif t.kind == "word" and t.low in ("and", "or") and "logical" in ops:
            if t.low == "or" and nxt is not None and nxt.low == "replace":
                continue
            b.add("logical", t.start, end, "OR" if t.low == "and" else "AND")
        elif t.kind == "num" and "constant" in ops:
            if parens and parens[-1] in _TYPE_WORDS:
                continue
            number = _number(t.text)
            if number is None:
                continue
            for changed in (number + 1, number - 1, Decimal(0)):
                if changed != number:
                    b.add("constant", t.start, end, _show(changed))
    if "statement" in ops:
        for first, last, word in stmts:
            if first > last or first in skip:
                continue
            assign = first + 1 <= last and toks[idx[first]].kind in ("word", "qword") and _assigns(toks, idx, first, last)
            call = toks[idx[first]].kind in ("word", "qword") and first + 1 <= last and toks[idx[first + 1]].text in ("(", ".", ";")
            if word in _SIMPLE or assign or (call and word not in _KEYWORDS):
                b.add("statement", toks[idx[first]].start, toks[idx[last]].start + 1, "NULL;")
    if "where" in ops:
        for p, i in enumerate(idx):
            if toks[i].low != "where" or p in skip:
                continue
            depth, q = 0, p + 1
            while q < len(idx):
                u = toks[idx[q]]
                if u.text == "(":
                    depth += 1
                elif u.text == ")":
                    if depth == 0:
                        break
                    depth -= 1
                elif depth == 0 and (u.text == ";" or (u.kind == "word" and u.low.split()[0] in _WHERE_END)):
                    break
                q += 1
            if q > p + 1:
                b.add("where", toks[i].start, toks[idx[q - 1]].start + len(toks[idx[q - 1]].text), "")


def _assigns(toks: list[Tok], idx: list[int], first: int, last: int) -> bool:
    """``name := ...`` / ``rec.field := ...`` / ``arr(i) := ...`` at the start of a statement."""
    depth = 0
    for p in range(first, min(last, first + 12) + 1):
        t = toks[idx[p]].text
        depth += {"(": 1, ")": -1, "[": 1, "]": -1}.get(t, 0)
        if depth == 0 and t == ":=":
            return True
        if depth == 0 and toks[idx[p]].kind == "word" and p > first:
            return False
    return False


def _is_assignment(toks: list[Tok], idx: list[int], p: int) -> bool:
    """``=`` that assigns (``SET col = ...``, ``USING ERRCODE = ...``, ``x = 1`` as a statement)."""
    q = p - 1
    while q >= 0 and (toks[idx[q]].kind in ("word", "qword") and toks[idx[q]].low not in _KEYWORDS or toks[idx[q]].text == "."):
        q -= 1
    if q == p - 1 or q < 0:
        return False
    before = toks[idx[q]]
    if before.low in ("set", "using", ";", "then", "else", "loop", "begin"):
        return True
    if before.text == ",":  # a list: SET a = 1, b = 2 or USING a = .., b = ..
        depth = cases = 0  # parentheses and CASE ... END around the scan (an earlier item's CASE WHEN)
        for r in range(q, -1, -1):
            u = toks[idx[r]]
            depth += {")": 1, "(": -1}.get(u.text, 0)
            if depth < 0 or u.text == ";":
                return False
            if depth == 0 and u.kind == "word" and u.low in ("end", "case"):
                cases = max(0, cases + (1 if u.low == "end" else -1))
                continue
            if cases:
                continue
            if depth == 0 and u.low in ("set", "using"):
                return True
            if depth == 0 and u.low in ("where", "from", "select", "and", "or", "when", "if"):
                return False
    return False


_KEYWORDS = frozenset(
    """select from where and or not in is null like between case when then else end if elsif loop for while
    update insert delete set values into begin declare exception raise return exit continue perform call
    execute using order by group having limit distinct as on join left right inner outer union all exists
    any some coalesce nullif least greatest true false current_date current_timestamp date interval
    then else elsif open close fetch with returning""".split()
)


# --------------------------------------------------------------------------- running
@dataclass
class MutantResult:
    mutant: Mutant
    status: str  # killed, survived, stillborn, equivalent
    detail: str = ""


@dataclass
class TaskScore:
    task_id: str
    results: list[MutantResult] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # equivalent marks that match no mutant

    def count(self, status: str, operator: str | None = None) -> int:
        return sum(1 for r in self.results if r.status == status and operator in (None, r.mutant.operator))

    @property
    def counted(self) -> int:
        return self.count("killed") + self.count("survived")

    @property
    def score(self) -> float:
        return self.count("killed") / self.counted if self.counted else 1.0

    def survivors(self) -> list[MutantResult]:
        return [r for r in self.results if r.status == "survived"]


def _stillborn(outs: Sequence[outcomes.Verdict]) -> str | None:
    """The install error when the mutant never installed (a syntax or compile error)."""
    if outs and all(not o.passed and o.message.startswith(INSTALL_FAILED) for o in outs):
        return outs[0].message.splitlines()[0][:200]
    return None


def select(mutants: Sequence[Mutant], limit: int | None) -> list[Mutant]:
    """At most ``limit`` mutants, spread over the operators and chosen by a stable hash (quick mode)."""
    if limit is None or len(mutants) <= limit:
        return list(mutants)
    by_op: dict[str, list[Mutant]] = {}
    for m in sorted(mutants, key=lambda m: hashlib.sha256(m.code.encode()).hexdigest()):
        by_op.setdefault(m.operator, []).append(m)
    chosen: list[Mutant] = []
    while len(chosen) < limit:
        for group in by_op.values():
            if group and len(chosen) < limit:
                chosen.append(group.pop(0))
    return chosen


def score_task(backend, task, gold: str, equivalent: dict[str, str], *,  # noqa: ANN001 - Backend, Task
               operators: Sequence[str] = OPERATORS, limit: int | None = None,
               progress: Callable[[int, int], None] | None = None) -> TaskScore:
    """Run every (or ``limit``) mutant of ``gold`` through the judge; equivalent ones are not run.
    ``progress(done, total)`` is called before the first mutant and after each one."""
    from .evaluation import evaluate

    mutants = generate(gold, task.dialect, operators)
    result = TaskScore(task.id)
    ids = {m.id for m in mutants}
    result.stale = sorted(k for k in equivalent if k not in ids)
    chosen = select(mutants, limit)
    for done, mutant in enumerate(chosen):
        if progress is not None:
            progress(done, len(chosen))
        if mutant.id in equivalent:
            result.results.append(MutantResult(mutant, "equivalent", equivalent[mutant.id]))
            continue
        outs = evaluate(backend, task, mutant.code)
        born = _stillborn(outs)
        if born:
            result.results.append(MutantResult(mutant, "stillborn", born))
        elif all(o.passed for o in outs):
            result.results.append(MutantResult(mutant, "survived"))
        else:
            first = next(o for o in outs if not o.passed)
            result.results.append(MutantResult(mutant, "killed", f"{first.test_id}: {first.failure_class}"))
    if progress is not None:
        progress(len(chosen), len(chosen))
    return result


def report_lines(score: TaskScore, gold: str, threshold: float, show_diffs: bool = True) -> list[str]:
    """Per task: the score, per operator counts, each survivor as a diff, stale equivalence marks."""
    ops = [op for op in OPERATORS if any(r.mutant.operator == op for r in score.results)]
    per_op = ", ".join(f"{op} {score.count('killed', op)}/{score.count('killed', op) + score.count('survived', op)}"
                       for op in ops)
    mark = "ok" if score.score >= threshold else "BELOW"
    lines = [f"  {score.task_id}: mutation score {score.score:.1%} ({score.count('killed')} of {score.counted} killed; "
             f"{score.count('stillborn')} stillborn, {score.count('equivalent')} marked equivalent) {mark}",
             f"    by operator: {per_op}"]
    for r in score.results:
        if r.status == "equivalent":
            lines.append(f"    equivalent {r.mutant.id}: {r.detail}")
    for r in score.survivors():
        lines.append(f"    SURVIVOR {r.mutant.id}")
        if show_diffs:
            lines += [f"      {line}" for line in r.mutant.diff(gold).splitlines()]
    for key in score.stale:
        lines.append(f"    STALE equivalent mark {key!r}: no such mutant of the current gold")
    return lines


def ids(mutants: Iterable[Mutant]) -> list[str]:
    return [m.id for m in mutants]

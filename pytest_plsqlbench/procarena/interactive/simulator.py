"""The User Simulator: answers the Solver's questions from the task's elicitation ledger only.

Two kinds, one protocol (ProcArena §3.3.2): first the question is matched to ledger entries,
then the answer is phrased from the matched entries alone; a question no entry matches gets the
fallback channel, which speaks from ``behaviour`` (the plain-language description of gold's
behaviour). The simulator never sees gold's code, the calls or the evaluation.

Two holders answer, each from its own entries (``LedgerEntry.holder``): the *requirement* holder
(omissions, contradictions) and the *knowledge* holder (what injected jargon means). ``ask_user``
goes to the holder of each matched entry; ``ask_selector`` to the holder the Solver names (both
when it names none), so options that mix requirement facts with domain knowledge can be settled
one source at a time, as the paper's protocol lets a Solver do.

* :class:`LedgerSimulator` (``--plsql-simulator=ledger``, the default): deterministic keyword
  matching, no model. The answer is the matched entries' ``answer`` text verbatim.
* :class:`ModelSimulator` (``--plsql-simulator=model --plsql-simulator-model=MODEL``): one fixed
  model for every Solver (the paper uses DeepSeek V4 Flash). Step 1 routes: it asks which entry
  ids (listed with their holder) the question is about (JSON list); step 2 has each holder whose
  entries matched phrase its own answer from those entries only, one request per holder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..spec import HOLDERS, LedgerEntry

_WORD = re.compile(r"[a-z0-9_]+")
STOP = frozenset(
    """a an the of to in on for and or is are be does do what which how where when who whom why it its this that
    these those with by as at from should would could can will there their they them i we you my our your me us
    exactly mean means meant please tell about any some if then than not no into onto per was were has have had
    one all each every so such also just only much many more most other else use used using need needs""".split()
)
#: Said when neither the ledger nor the behaviour description speaks to the question.
NO_ANSWER = "I have nothing to add to the requirement on that point."
SELECTOR_NONE = -1


def words(text: str) -> set[str]:
    """Content words, crudely stemmed (plural s), for overlap scoring."""
    out = set()
    for w in _WORD.findall(text.lower()):
        if w in STOP or len(w) < 2:
            continue
        out.add(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return out


_TERM = re.compile(r"[+\-]?\d+(?:\.\d+)?|[a-z_][a-z0-9_]*")


def terms(text: str) -> set[str]:
    """Words and signed numbers (``- 0.5`` -> ``-0.5``): options differ by their numbers and signs."""
    text = re.sub(r"([+\-])\s+(?=\d)", r"\1", text.lower())
    return {t for t in _TERM.findall(text) if t not in STOP}


def _quoted(text: str) -> list[str]:
    return [q.lower() for q in re.findall(r"['\"`‘’“”]([^'\"`‘’“”]{3,60})['\"`‘’“”]", text)]


def score(question: str, entry: LedgerEntry) -> float:
    """How well ``question`` asks for ``entry``: a quoted term of the key found verbatim wins;
    otherwise the share of the key's content words the question contains."""
    q = question.lower()
    if any(term in q for term in _quoted(entry.key)):
        return 1.0
    key = words(entry.key)
    if not key:
        return 0.0
    hit = key & words(question)
    return len(hit) / len(key) if len(hit) >= 2 or len(key) == 1 else 0.0


MATCH_THRESHOLD = 0.5
#: A question is about a few things at most, as a user answers it: the entries it matches best,
#: no more, and a question longer than this many content words is not answered at all. Without
#: both, one question stuffed with every word of the requirement and the schema matched (and
#: revealed) most of a task's ledger for the price of one question.
MAX_ENTRIES = 2
MAX_QUESTION_WORDS = 40
TOO_BROAD = "Please ask about one thing at a time; I cannot answer all of that at once."


@dataclass
class Reply:
    """What the simulator said, and which entries it drew on (``fallback``: none matched)."""

    text: str
    revealed: list[str] = field(default_factory=list)
    fallback: bool = False
    index: int | None = None
    usage: dict[str, Any] = field(default_factory=dict)


class Simulator:
    kind = "base"

    def __init__(self, ledger: Sequence[LedgerEntry], behaviour: str = "") -> None:
        self.ledger = tuple(ledger)
        self.behaviour = behaviour or ""

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def ask_user(self, question: str) -> Reply:
        raise NotImplementedError

    def ask_selector(self, question: str, options: Sequence[str], holder: str | None = None) -> Reply:
        raise NotImplementedError

    # shared by both kinds
    def entries_of(self, holder: str | None) -> tuple[LedgerEntry, ...]:
        """The entries ``holder`` keeps (every entry for ``None``)."""
        if holder is not None and holder not in HOLDERS:
            raise ValueError(f"unknown holder {holder!r}; the holders are {', '.join(HOLDERS)}")
        return self.ledger if holder is None else tuple(e for e in self.ledger if e.holder == holder)

    @staticmethod
    def too_broad(question: str, options: Sequence[str] = ()) -> bool:
        """More content words than one question holds (options: as many again, all together)."""
        return len(words(question)) > MAX_QUESTION_WORDS or len(words(" ".join(options))) > MAX_QUESTION_WORDS

    def matched(self, question: str, holder: str | None = None) -> list[LedgerEntry]:
        scored = [(score(question, e), n, e) for n, e in enumerate(self.entries_of(holder))]
        return [e for s, _, e in sorted(scored, key=lambda t: (-t[0], t[1])) if s >= MATCH_THRESHOLD][:MAX_ENTRIES]

    def fallback_sentences(self, question: str, limit: int = 2) -> str:
        """The behaviour description's sentences that share most content words with the question."""
        sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(self.behaviour.split())) if s.strip()]
        q = words(question)
        ranked = sorted(((len(words(s) & q), n, s) for n, s in enumerate(sentences)), key=lambda t: (-t[0], t[1]))
        chosen = sorted((n, s) for k, n, s in ranked[:limit] if k >= 2)
        return " ".join(s for _, s in chosen) or NO_ANSWER


class LedgerSimulator(Simulator):
    """Deterministic: keyword matching against each entry's ``key``."""

    kind = "ledger"

    def ask_user(self, question: str) -> Reply:
        if self.too_broad(question):
            return Reply(TOO_BROAD, fallback=True)
        entries = self.matched(question)
        if not entries:
            return Reply(self.fallback_sentences(question), fallback=True)
        return Reply("\n\n".join(e.answer.strip() for e in entries), revealed=[e.id for e in entries])

    def ask_selector(self, question: str, options: Sequence[str], holder: str | None = None) -> Reply:
        if self.too_broad(question, options):
            return Reply(f"{SELECTOR_NONE}: {TOO_BROAD}", fallback=True, index=SELECTOR_NONE)
        entries = self.matched(" ".join([question, *options]), holder)
        if not entries:
            return Reply(f"{SELECTOR_NONE}: none of the options is confirmed", fallback=True, index=SELECTOR_NONE)
        facts = terms(" ".join(e.answer for e in entries))
        scores = [sum(1 if t in facts else -1 for t in terms(o)) for o in options]
        best = max(range(len(options)), key=lambda i: (scores[i], -i))
        if scores[best] <= 0 or scores.count(scores[best]) > 1:
            return Reply(f"{SELECTOR_NONE}: none of the options is confirmed", revealed=[e.id for e in entries],
                         index=SELECTOR_NONE)
        return Reply(str(best), revealed=[e.id for e in entries], index=best)


Complete = Callable[[list[dict[str, str]]], tuple[str, Mapping[str, Any]]]

MATCH_PROMPT = """You route a developer's question to the facts a user knows. Facts (id [holder]: what it is about):
{keys}

Question: {question}

Reply with a JSON list of the ids of the facts the question asks about, e.g. ["M1"], or [] if none."""

PHRASE_PROMPT = """You are the user who asked for a stored procedure. Answer the developer's question in one or two
plain sentences using ONLY these facts. Never write code or SQL, never add facts of your own.
Facts:
{facts}

Question: {question}"""
#: What each holder knows, said before its facts (the phrasing request of that holder).
HOLDER_ROLE = {
    "requirement": "You speak for the details of the request itself: what it left out and how its "
                   "contradictions resolve.",
    "knowledge": "You speak for the domain knowledge behind the request: what its terms and conventions mean.",
}

SELECT_PROMPT = """You are the user who asked for a stored procedure. Using ONLY these facts:
{facts}

Which option agrees with the facts? Question: {question}
Options:
{options}
Reply with the option's number only (0-based), or -1 if no option agrees."""


class ModelSimulator(Simulator):
    """A fixed model matches the question to entries, then phrases from the matched entries only."""

    kind = "model"

    def __init__(self, ledger: Sequence[LedgerEntry], behaviour: str, model: str, complete: Complete) -> None:
        super().__init__(ledger, behaviour)
        self.model = model
        self._complete = complete

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model}

    def _ask(self, prompt: str, usage: dict[str, Any]) -> str:
        text, use = self._complete([{"role": "user", "content": prompt}])
        for k in ("prompt_tokens", "completion_tokens"):
            usage[k] = usage.get(k, 0) + int(use.get(k) or 0)
        usage["requests"] = usage.get("requests", 0) + 1
        return text

    def _match(self, question: str, usage: dict[str, Any], holder: str | None = None) -> list[LedgerEntry]:
        entries = self.entries_of(holder)
        if not entries:
            return []
        keys = "\n".join(f"{e.id} [{e.holder}]: {e.key}" for e in entries)
        text = self._ask(MATCH_PROMPT.format(keys=keys, question=question), usage)
        found = re.search(r"\[.*?\]", text, re.S)
        try:
            ids = json.loads(found.group(0)) if found else []
        except json.JSONDecodeError:
            ids = re.findall(r"\b[A-Z]+\d+\b", found.group(0) if found else "")
        by_id = {e.id: e for e in entries}
        chosen = [by_id[i] for i in dict.fromkeys(str(i) for i in ids if isinstance(i, (str, int))) if i in by_id]
        return chosen[:MAX_ENTRIES]

    def ask_user(self, question: str) -> Reply:
        usage: dict[str, Any] = {}
        if self.too_broad(question):
            return Reply(TOO_BROAD, fallback=True, usage=usage)
        entries = self._match(question, usage)
        if entries:
            answers = []
            for holder in HOLDERS:  # each holder phrases from its own matched entries only
                own = [e for e in entries if e.holder == holder]
                if own:
                    facts = "\n".join(f"- {e.answer.strip()}" for e in own)
                    prompt = f"{HOLDER_ROLE[holder]}\n" + PHRASE_PROMPT.format(facts=facts, question=question)
                    answers.append(self._ask(prompt, usage).strip())
            text = "\n\n".join(a for a in answers if a)
            return Reply(text or NO_ANSWER, revealed=[e.id for e in entries], usage=usage)
        # The fallback speaks from what the ledger simulator's would: the behaviour sentences
        # nearest the question, not the whole description (one "describe everything" question
        # would otherwise have the model retell all of it).
        facts = self.fallback_sentences(question)
        if facts == NO_ANSWER:
            return Reply(NO_ANSWER, fallback=True, usage=usage)
        text = self._ask(PHRASE_PROMPT.format(facts=facts, question=question), usage)
        return Reply(text.strip() or NO_ANSWER, fallback=True, usage=usage)

    def ask_selector(self, question: str, options: Sequence[str], holder: str | None = None) -> Reply:
        usage: dict[str, Any] = {}
        if self.too_broad(question, options):
            return Reply(f"{SELECTOR_NONE}: {TOO_BROAD}", fallback=True, index=SELECTOR_NONE, usage=usage)
        entries = self._match(" ".join([question, *options]), usage, holder)
        if holder is not None and not entries:  # a named holder answers from its own ledger only
            return Reply(f"{SELECTOR_NONE}: none of the options is confirmed", fallback=True, index=SELECTOR_NONE,
                         usage=usage)
        facts = "\n".join(f"- {e.answer.strip()}" for e in entries) or self.fallback_sentences(" ".join([question, *options]))
        listing = "\n".join(f"{n}. {o}" for n, o in enumerate(options))
        role = f"{HOLDER_ROLE[holder]}\n" if holder is not None else ""
        text = self._ask(role + SELECT_PROMPT.format(facts=facts, question=question, options=listing), usage)
        found = re.search(r"-?\d+", text)
        index = int(found.group(0)) if found else SELECTOR_NONE
        if not 0 <= index < len(options):
            index = SELECTOR_NONE
        return Reply(str(index), revealed=[e.id for e in entries], fallback=not entries, index=index, usage=usage)

"""Every word the harness sends to a model, and how a conversation becomes chat messages.

Paper App. F/G: a system prompt that asks for executable PL/SQL only (Oracle: program units
ending with ``/``, no markdown, no explanations; PostgreSQL: its PL/pgSQL counterpart) -- each
dialect's own (``Dialect.system_prompt``, in its plug-in module) -- then the task prompt with the
schema DDL for schema-grounded tasks. Multi-turn rollout: turn *t* sees the
earlier user requests and the model's *own* earlier answers as assistant messages.

Changing any text here changes the cache keys (they hash the messages), so earlier cached
answers are not reused for a different prompt -- which is what a benchmark wants.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import registry
from ..answers import Answer, Exchange
from ..tasks import Task, Turn

SCHEMA_HEADER = "Database schema (DDL):"
TASK_HEADER = "Task:"
#: Stands in for an empty earlier answer: providers reject empty assistant messages, and the
#: model should still see that it answered nothing.
EMPTY_ANSWER = "-- (no code was given in this answer)"


def system_prompt(dialect: str) -> str:
    """The system prompt of a task in ``dialect``: the registered dialect's."""
    found = registry.active().dialects.get(dialect)
    if found is None:
        raise ValueError(f"no system prompt for dialect {dialect!r}: no such dialect is registered")
    return found.system_prompt


def user_message(task: Task, turn: int) -> str:
    """The user's request at ``turn``; the first turn of a schema-grounded task carries the DDL."""
    prompt = task.turns[turn - 1].prompt.strip()
    if turn == 1 and task.schema_ddl and task.schema_ddl.strip():
        return f"{SCHEMA_HEADER}\n{task.schema_ddl.strip()}\n\n{TASK_HEADER}\n{prompt}"
    return prompt


def rollout_exchange(turn: Turn, answer: Answer) -> Exchange:
    """The history entry for a turn the model answered: its own code, as the next turn sees it.

    The prefetcher and the core must build history the same way, or turn 2's cache key differs
    and it is asked twice.
    """
    return Exchange(prompt=turn.prompt, answer=answer.code or "")


def build_messages(task: Task, turn: int, history: Sequence[Exchange] = ()) -> list[dict[str, str]]:
    """Chat messages for ``turn`` (1-based) given the earlier turns' answers.

    The user side is rebuilt from the task so the same conversation always hashes the same way;
    only the answers come from ``history``.
    """
    if not 1 <= turn <= len(task.turns):
        raise ValueError(f"task {task.id!r} has no turn {turn}")
    if len(history) != turn - 1:
        raise ValueError(f"task {task.id!r} turn {turn}: expected {turn - 1} earlier exchanges, got {len(history)}")
    messages = [{"role": "system", "content": system_prompt(task.dialect)}]
    for index, exchange in enumerate(history, 1):
        messages.append({"role": "user", "content": user_message(task, index)})
        messages.append({"role": "assistant", "content": _sendable(exchange.answer.strip()) or EMPTY_ANSWER})
    messages.append({"role": "user", "content": user_message(task, turn)})
    return messages


def _sendable(text: str) -> str:
    """``text`` as a provider can receive it: a lone surrogate (a reply can carry one as a JSON
    escape; it is not UTF-8) becomes U+FFFD. Any other text is returned as it is."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def reference_history(task: Task, turn: int) -> tuple[Exchange, ...]:
    """History of ``turn`` with the reference answers standing in for the model's own."""
    return tuple(Exchange(prompt=t.prompt, answer=t.reference or "") for t in task.turns[: turn - 1])


def render_prompt(task: Task, history: Sequence[Exchange] | None = None, turn: int | None = None) -> str:
    """The exact messages sent for ``task``, as text for ``--plsql-show-prompt``.

    With ``history`` (or for a single-turn task) this is the request of one turn (``turn``
    defaults to the one after the history). Without it, a multi-turn task is shown turn by
    turn with the reference answers standing in for the model's earlier answers, labelled as
    such: at run time those assistant messages are the model's own answers.
    """
    head = f"=== task {task.id} ({task.subset}, {task.dialect}"
    if history is not None or len(task.turns) == 1:
        hist = tuple(history or ())
        t = turn or len(hist) + 1
        lines = [f"{head}, turn {t} of {len(task.turns)}) ==="]
        for msg in build_messages(task, t, hist):
            lines += [f"--- {msg['role']} ---", msg["content"], ""]
        return "\n".join(lines).rstrip() + "\n"
    refs = reference_history(task, len(task.turns))
    lines = [
        f"{head}, {len(task.turns)} turns) ===",
        "Turn t is sent as everything above its user message plus that message. Assistant",
        "messages below are the REFERENCE answers standing in for the model's own earlier",
        "answers; at run time the model sees what it answered itself (rollout).",
        "",
    ]
    messages = build_messages(task, len(task.turns), refs)
    lines += ["--- system ---", messages[0]["content"], ""]
    for index, msg in enumerate(messages[1:]):
        t = index // 2 + 1
        if msg["role"] == "user":
            lines += [f"--- turn {t} of {len(task.turns)}: user ---", msg["content"], ""]
        else:
            lines += [f"--- turn {t}: assistant [reference answer standing in for the model's own] ---",
                      msg["content"], ""]
    return "\n".join(lines).rstrip() + "\n"

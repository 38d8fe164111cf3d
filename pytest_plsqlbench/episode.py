"""One rollout of a task: its turns answered in order, each seeing the earlier answers.

Collection (the task node's setup), the prefetcher and the runner share this object, so the
history a turn is asked with -- and therefore its answer-cache key -- is built one way only.
An interactive episode (ProcArena's Solver with tools) is a subclass that, between turns, runs
tools against the worker's database through :attr:`Episode.tools`; the default has none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .answers import Answer, Exchange
from .generation.prompts import rollout_exchange
from .tasks import Task, Turn

#: Asks for one turn's answer given the conversation so far; None: not available right now
#: (another process is generating it) -- the rollout stops there and can be resumed.
Ask = Callable[[Task, int, "tuple[Exchange, ...]", int], "Answer | None"]


class EpisodeTools(Protocol):
    """What an interactive episode may do on the worker's database between turns (ProcArena)."""

    def call(self, name: str, arguments: dict[str, Any]) -> Any: ...


class Episode:
    """The answers of one task for one sample, turn by turn."""

    def __init__(self, task: Task, sample: int = 0, tools: EpisodeTools | None = None) -> None:
        self.task = task
        self.sample = sample
        self.tools = tools
        self.answers: list[Answer] = []

    @property
    def history(self) -> tuple[Exchange, ...]:
        """The exchanges so far, as the next turn is asked with them."""
        return tuple(rollout_exchange(t, a) for t, a in zip(self.task.turns, self.answers))

    @property
    def done(self) -> bool:
        return len(self.answers) == len(self.task.turns)

    @property
    def failed(self) -> bool:
        """An answer is not usable: later turns cannot be asked (they would need it)."""
        return any(a.status != "ok" for a in self.answers)

    def next_turn(self) -> Turn | None:
        return None if self.done else self.task.turns[len(self.answers)]

    def play(self, ask: Ask, *, carry_failures: bool = True) -> bool:
        """Ask for the remaining turns in order; False only when ``ask`` returned None.

        After a turn without a usable answer the later turns are not asked: with
        ``carry_failures`` they get an answer of the same status naming the failed turn (what
        the runner scores), without it the rollout ends there (the prefetcher's choice).
        """
        while (turn := self.next_turn()) is not None:
            if self.answers and self.answers[-1].status != "ok":
                if not carry_failures:
                    return True
                prev = self.answers[-1]
                self.answers.append(
                    Answer(code=None, status=prev.status, error=f"turn {turn.index - 1}: {prev.error}", source=prev.source)
                )
                continue
            answer = ask(self.task, turn.index, self.history, self.sample)
            if answer is None:
                return False
            self.answers.append(answer)
        return True

    @classmethod
    def of(cls, task: Task, answers: Sequence[Answer | str | None], sample: int = 0) -> Episode:
        """An episode whose answers are already known (scripts, ``evaluate_task``)."""
        if len(answers) != len(task.turns):
            raise ValueError(f"task {task.id}: {len(answers)} answers for {len(task.turns)} turns")
        episode = cls(task, sample)
        episode.answers = [as_answer(a) for a in answers]
        return episode


def as_answer(answer: Answer | str | None) -> Answer:
    if isinstance(answer, Answer):
        return answer
    if answer is None:
        return Answer.missing("no answer given")
    return Answer(code=answer, source="given")

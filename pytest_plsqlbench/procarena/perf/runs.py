"""What one run of a B2 bench gives back, shared by every bench (:mod:`.timing`, :mod:`.fresh`,
:mod:`.oracle`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .work import Work


class NotMeasured(Exception):
    """The bench cannot measure on this database (the message says why and what to do)."""


@dataclass
class Run:
    """One contender's run: time, work, what each call raised (None: nothing), and the state."""

    seconds: float
    work: Work
    raised: tuple[str | None, ...] = ()
    install_error: str | None = None
    state: Any = None
    #: A statement ran past the statement timeout: the contender is not run again.
    timed_out: bool = False
    #: Wall-clock seconds of the run (``seconds`` is the bench's clock: CPU time where it can).
    wall_s: float | None = None
    #: A run of the checked contender (the answer) came before this one.
    after_checked: bool = False

"""Built-in answer sources: ``--plsql-model=reference`` and ``--plsql-answers FILE``.

Both are ``trylast`` implementations of ``pytest_plsql_generate``; they answer only when
their option is in use and return None otherwise, so model plugins and users' conftests
take over everything else.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from .answers import Answer, AnswersFile, Exchange
from .state import get_settings
from .tasks import Task

ANSWERS_FILE_KEY = pytest.StashKey[AnswersFile]()


@pytest.hookimpl(trylast=True)
def pytest_plsql_generate(
    config: pytest.Config, task: Task, turn: int, history: Sequence[Exchange], sample: int
) -> Answer | None:
    settings = get_settings(config)
    if settings.answers.file is not None:
        if ANSWERS_FILE_KEY not in config.stash:
            config.stash[ANSWERS_FILE_KEY] = AnswersFile(settings.answers.file)
        code = config.stash[ANSWERS_FILE_KEY].get(task.subset, task.id, turn)
        if code is None:
            return Answer.missing(f"{task.id} turn {turn} is not in {settings.answers.file}", source="answers-file")
        return Answer(code=code, source="answers-file")
    if settings.model.name == "reference":
        reference = task.turns[turn - 1].reference
        if reference is None:
            return Answer.missing(f"{task.id} turn {turn} has no reference answer", source="reference")
        return Answer(code=reference, source="reference")
    return None

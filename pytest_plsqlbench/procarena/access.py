"""What the call-suite judge needs from a dialect beyond ``Session.run``: the base of each
dialect adapter's access (:mod:`.dialects`), in a leaf module so the adapters need not import
the judge that looks them up."""

from __future__ import annotations

from ..dialects.base import Backend
from ..tasks import Task
from . import state as st


class Access:
    """Write grants, snapshots and the clean state of one task's schema, for one worker."""

    def __init__(self, backend: Backend, task: Task) -> None:
        self.backend = backend
        self.task = task
        self.schema = str(task.metadata.get("schema") or task.metadata.get("database"))

    def prepare(self) -> None: ...

    def grant_writes(self) -> None:
        """The candidate may write the task schema's tables (granted once per worker and schema)."""
        done = self.backend.judge_cache.setdefault("procarena-writable", set())
        if self.schema.lower() not in done:
            self.backend.allow_writes([self.schema])
            done.add(self.schema.lower())

    def begin(self) -> None:
        """Right after the session's begin_task: set up the run's scope (e.g. search_path)."""

    def snapshot(self) -> st.State:
        raise NotImplementedError

    def restore(self) -> None:
        """After a run (gold's or the candidate's): bring the database back to the clean state."""

    def before_candidate(self) -> None:
        """Between gold's scope and the candidate's (outside any task scope)."""
        self.fresh_scope()

    def fresh_scope(self) -> None:
        """Before a contender's scope (gold's, the candidate's, B2's gate, an Interactive episode):
        make the next scope start from the task's clean state as no earlier scope left it."""

    def end_scope(self) -> None:
        """After the contender runs that :meth:`fresh_scope` started (outside any task scope)."""

    def scratch_prefix(self) -> str:
        """State keys of tables in the candidate's own schema (``answers.``)."""
        return self.backend.candidate_schema.lower() + "."

    def hold(self) -> None:
        """Keep the task's tables to this worker for the task (a database workers share)."""

    def release(self) -> None: ...

"""Exceptions with a meaning for the user, so the plugin can print one clear line."""

from __future__ import annotations


class PlsqlBenchError(Exception):
    """Base class: anything the harness reports without a traceback."""


class UsageError(PlsqlBenchError):
    """Bad options, unknown subsets, malformed task or data files."""


class DataError(UsageError):
    """A dataset file or line that cannot be read; the message names file and line."""


class InfrastructureError(PlsqlBenchError):
    """The harness could not evaluate something (database down, provider failure).

    Never the model's fault: items failing with it are excluded from the metrics.
    """


class FixtureError(InfrastructureError):
    """A fixture's own statements fail to load: the data's fault, not the database's.

    Not retried; the backend remembers it, and every test of the tasks needing the fixture is an
    error naming the script's file and line and the database's message (never judged, never a
    skip: the run fails, so a broken own subset cannot go green).
    """

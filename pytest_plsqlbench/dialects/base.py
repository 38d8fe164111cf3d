"""The old home of the dialect interface, kept for one release: everything moved to
:mod:`pytest_plsqlbench.protocols`. ``Backend`` and ``Session`` here still name the abstract
bases (what dialects subclass); the Protocols of the same names are in ``protocols``."""

from __future__ import annotations

from ..protocols import (
    BackendBase,
    BatchResult,
    DbError,
    Execution,
    OutputCapture,
    Params,
    Phase,
    SessionBase,
    SharedStep,
)

Backend = BackendBase
Session = SessionBase

__all__ = [
    "Backend",
    "BackendBase",
    "BatchResult",
    "DbError",
    "Execution",
    "OutputCapture",
    "Params",
    "Phase",
    "Session",
    "SessionBase",
    "SharedStep",
]

"""Errors of savepoints.

The tree::

    SluicegateError
    └── FatalError
        └── SavepointError              root of every savepoint error
            ├── CorruptSavepointError   bytes that are not a valid savepoint (checksum, length,
            │                           a name that is not allowed, an unknown format version)
            ├── SavepointNotFoundError  no savepoint of that name
            └── SavepointRefusedError   a valid savepoint that cannot restore this pipeline
                                        (state newer than the code, an operator missing, ...)

A savepoint is untrusted input (it may have been copied between clusters or edited): every
error names what is wrong and, where a person can act, what to do.
"""

from __future__ import annotations

from sluicegate.operators.exceptions import FatalError

__all__ = [
    "CorruptSavepointError",
    "SavepointError",
    "SavepointNotFoundError",
    "SavepointRefusedError",
]


class SavepointError(FatalError):
    """Root of every savepoint error."""


class CorruptSavepointError(SavepointError):
    """``what`` (a file of the savepoint) is not valid: ``problem`` says why."""

    def __init__(self, what: str, problem: str) -> None:
        super().__init__(f"savepoint {what} is corrupt or not a savepoint: {problem}")
        self.what = what
        self.problem = problem


class SavepointNotFoundError(SavepointError):
    """No savepoint named ``name`` in checkpoint storage."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"no savepoint named {name!r} in checkpoint storage; `sluicegate savepoint list` "
            "shows the savepoints there"
        )
        self.name = name


class SavepointRefusedError(SavepointError):
    """A valid savepoint that cannot restore this pipeline; ``what_to_do`` says how to go on."""

    def __init__(self, problem: str, what_to_do: str) -> None:
        super().__init__(f"{problem}. {what_to_do}")
        self.problem = problem
        self.what_to_do = what_to_do

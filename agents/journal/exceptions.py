"""Errors of the effect journal, under the tree drawn in ``operators.exceptions``::

    SluicegateError
    ├── RetryableError
    │   ├── JournalUnavailableError   a journal write was not acknowledged, or a rebuild stalled
    │   └── CallOutcomeUnknownError   a call's connection failed: it may or may not have happened
    └── FatalError
        ├── JournalCorruptError       a journal record cannot be read (garbage, or a newer schema)
        └── JournalTransitionError    a driver broke the effect state table (a bug)

A subtask that cannot write the journal must not perform the effect; it retries later, and the
entry it may or may not have written is resolved by the journal's rules on the next attempt.
"""

from __future__ import annotations

from sluicegate.operators.exceptions import FatalError, RetryableError

__all__ = [
    "CallOutcomeUnknownError",
    "JournalCorruptError",
    "JournalTransitionError",
    "JournalUnavailableError",
]

_PREVIEW_BYTES = 64


class JournalCorruptError(FatalError):
    """A journal record does not decode as a :class:`~agents.journal.entries.JournalEntry`.

    ``problem`` says why (not JSON, a missing field, a ``schema_version`` newer than this code
    reads); ``raw`` is the record's value as found.
    """

    def __init__(self, problem: str, raw: bytes) -> None:
        preview = raw[:_PREVIEW_BYTES]
        more = "…" if len(raw) > _PREVIEW_BYTES else ""
        super().__init__(f"corrupt journal record ({problem}): {preview!r}{more}")
        self.problem = problem
        self.raw = raw


class JournalUnavailableError(RetryableError):
    """A journal operation on ``partition`` (``None``: on several) did not complete: the broker
    did not acknowledge a write, or the journal's partitions could not be read to their end.

    After a failed write the entry may or may not be durable, and the local index does not show
    it. Retry the step: the journal's rules treat an unacknowledged ``issued`` as possibly
    written.
    """

    def __init__(self, operation: str, partition: int | None, cause: str) -> None:
        where = "" if partition is None else f" on partition {partition}"
        super().__init__(f"journal {operation}{where} failed: {cause}")
        self.operation = operation
        self.partition = partition
        self.cause = cause


class CallOutcomeUnknownError(RetryableError):
    """The call of effect ``key`` failed in transport (``cause``: a connection reset, a read
    timeout; `agents.journal.transport`), so it may or may not have happened.

    No ``done`` is written: the step is retried later and finds ``issued`` without ``done``,
    which the tool's ``on_unknown`` settles, as after a crash during the call.
    """

    def __init__(self, key: str, cause: str) -> None:
        super().__init__(f"effect {key!r}: outcome unknown after a transport error: {cause}")
        self.key = key
        self.cause = cause


class JournalTransitionError(FatalError):
    """A driver moved effect ``key`` by ``event`` from ``state``, which the table forbids."""

    def __init__(self, key: str, state: str, event: str) -> None:
        super().__init__(f"effect {key!r}: no transition on {event!r} from state {state!r}")
        self.key = key
        self.state = state
        self.event = event

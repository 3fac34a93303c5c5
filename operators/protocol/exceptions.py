"""Errors of the barrier protocol cores, under the tree drawn in ``operators.exceptions``::

    FatalError
    └── ProtocolError               the barrier protocol cannot go on as fed
        ├── MalformedHeadersError   a record's ``sg-*`` headers cannot be read
        ├── UnknownChannelError     an event names a channel the job graph does not give
        └── ProtocolViolationError  an event breaks a rule of the protocol, or the API's order

All of them are fatal: retrying the same event gives the same answer. A subtask that meets one
exits non-zero, so that a global recovery rewinds the pipeline.
"""

from __future__ import annotations

from sluicegate.operators.exceptions import FatalError
from sluicegate.operators.protocol.channels import Channel

__all__ = [
    "MalformedHeadersError",
    "ProtocolError",
    "ProtocolViolationError",
    "UnknownChannelError",
]


class ProtocolError(FatalError):
    """Root of the errors of the barrier protocol cores."""


class MalformedHeadersError(ProtocolError):
    """The ``sg-*`` headers of a record are missing, repeated or unreadable.

    ``header`` names the offending header, or is ``None`` when the set as a whole is wrong.
    """

    def __init__(self, header: str | None, problem: str) -> None:
        super().__init__(f"{header}: {problem}" if header else problem)
        self.header = header
        self.problem = problem


class UnknownChannelError(ProtocolError):
    """A record or barrier arrived on a channel that is not among the subtask's channels."""

    def __init__(self, channel: Channel) -> None:
        super().__init__(
            f"channel ({channel.partition.topic}[{channel.partition.partition}], "
            f"writer {channel.writer!r}) is not an input channel of this subtask"
        )
        self.channel = channel


class ProtocolViolationError(ProtocolError):
    """An event breaks a rule of the barrier protocol, or the API was called out of order."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem

"""Where records come from: a partition of a topic, and a channel (a partition and one writer).

Plain values with no imports of the protocol, so the error types can carry them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Channel", "TopicPartition"]


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """One partition of a topic."""

    topic: str
    partition: int


@dataclass(frozen=True, slots=True, order=True)
class Channel:
    """An input partition together with one writer that appends to it."""

    partition: TopicPartition
    writer: str

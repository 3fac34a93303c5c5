"""What a process function sees of its subtask's keyed state.

State is kept separable per input partition: the partition count of an input
topic is the operator's max parallelism (Flink's key groups), so every row
belongs to exactly one ``(topic, partition)`` and a savepoint can hand the
rows of each partition to whichever subtask owns that partition after a
rescale. A process function handling a record read from ``topic[p]`` reads
and writes ``store.partition(topic, p)`` only.

Keys and values are raw ``bytes``; the store never serialises Python objects
(no pickle anywhere). Encoding is the caller's job, through a versioned
format of its own (pydantic models serialised to JSON, for instance).

Consistency contract, shared by every implementation:

* A read sees every earlier write of this subtask, flushed or not.
* ``items()`` yields rows in ascending bytewise key order and reflects the
  state at the moment iteration began; writes made while iterating are not
  seen by that iteration.
* Writes become part of a snapshot only if they happened before the snapshot
  was taken; the barrier protocol guarantees nothing else runs meanwhile.

:class:`PendingWrites` is the read-your-writes overlay implementations share.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import Protocol

from sluicegate.operators.state.exceptions import InvalidPartitionError

__all__ = ["MAX_PARTITION", "PartitionId", "PartitionState", "PendingWrites", "StateStore"]

#: Kafka partition numbers are non-negative int32.
MAX_PARTITION = 2**31 - 1

# Kafka's own rule for topic names (kafka.common.internals.Topic).
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


@dataclass(frozen=True, slots=True, order=True)
class PartitionId:
    """One input partition: ``topic`` and ``partition`` as Kafka names them.

    Raises :class:`InvalidPartitionError` if the pair could not name a Kafka
    partition, so that every stored row can be mapped back to one.
    """

    topic: str
    partition: int

    def __post_init__(self) -> None:
        if not _TOPIC_NAME.fullmatch(self.topic) or self.topic in {".", ".."}:
            raise InvalidPartitionError(
                self.topic, self.partition, "topic names are 1-249 of [a-zA-Z0-9._-]"
            )
        if not 0 <= self.partition <= MAX_PARTITION:
            raise InvalidPartitionError(
                self.topic, self.partition, f"partition must be in [0, {MAX_PARTITION}]"
            )

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


class PartitionState(Protocol):
    """The rows of one input partition (or of the store's metadata area).

    Keys and values must be ``bytes``; anything else raises ``TypeError``.
    """

    def get(self, key: bytes) -> bytes | None:
        """Return the value stored under ``key``, or None if there is none."""
        ...

    def put(self, key: bytes, value: bytes) -> None:
        """Store ``value`` under ``key``, replacing any earlier value."""
        ...

    def delete(self, key: bytes) -> None:
        """Remove ``key``; removing a missing key is not an error."""
        ...

    def items(self, *, prefix: bytes = b"") -> Generator[tuple[bytes, bytes], None, None]:
        """Yield ``(key, value)`` of every row whose key starts with ``prefix``, in key order.

        Unflushed writes are included. The iteration sees the state as of its
        start; exhaust or ``close()`` the iterator before closing the store.
        """
        ...


class StateStore(Protocol):
    """The keyed state of one subtask, as its process functions see it."""

    def partition(self, topic: str, partition: int) -> PartitionState:
        """Return the rows of input partition ``topic[partition]``.

        The handle stays valid for the life of the store; a partition with no
        rows is simply empty.
        """
        ...


class PendingWrites(dict[bytes, bytes | None]):
    """Writes not yet applied to the database: the last write per key, ``None`` for a delete.

    It gives an implementation read-your-writes: point reads consult it first,
    and :meth:`overlay` merges it over a sorted scan of stored rows. Keeping
    only the last write per key also deduplicates the batch that applies it.

    A ``dict`` of stored key -> value: a point read is ``key in`` then ``[key]``, a write an
    item assignment, all in C (the per-record path makes one or two of each).
    """

    __slots__ = ()

    def writes(self) -> list[tuple[bytes, bytes | None]]:
        """Return the pending writes, in no particular order."""
        return list(self.items())

    def overlay(
        self, stored: Iterator[tuple[bytes, bytes]], start: bytes, stop: bytes | None, strip: int
    ) -> Generator[tuple[bytes, bytes], None, None]:
        """Merge ``stored`` rows (sorted, from ``start``) with the pending writes in range.

        Pending writes win, deletes hide rows; iteration ends before ``stop``
        (None: at the end) and the first ``strip`` bytes of every key are cut.
        The pending writes are copied now, so later writes are not seen.
        """
        pending = sorted(
            ((k, v) for k, v in self.items() if k >= start and (stop is None or k < stop)),
            key=itemgetter(0),
        )
        return _merge(stored, pending, stop, strip)


def _merge(
    stored: Iterator[tuple[bytes, bytes]],
    pending: list[tuple[bytes, bytes | None]],
    stop: bytes | None,
    strip: int,
) -> Generator[tuple[bytes, bytes], None, None]:
    overlay = iter(pending)
    head = next(overlay, None)
    for key, value in stored:
        if stop is not None and key >= stop:
            break
        while head is not None and head[0] < key:
            if head[1] is not None:
                yield head[0][strip:], head[1]
            head = next(overlay, None)
        if head is not None and head[0] == key:
            if head[1] is not None:
                yield key[strip:], head[1]
            head = next(overlay, None)
            continue
        yield key[strip:], value
    while head is not None:
        if head[1] is not None:
            yield head[0][strip:], head[1]
        head = next(overlay, None)

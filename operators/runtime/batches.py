"""Records bound for a topic between operators, gathered into one Kafka batch per partition.

aiokafka's ``send`` costs about 10 µs of Python per record (a future, a metadata check and
an accumulator lookup each); appending to a `BatchBuilder` and handing the whole batch over
with ``send_batch`` costs about 2.5 µs. `PartitionBatches` keeps one open batch per output
partition: `add` appends a record without any I/O (so a synchronous process function's
outputs need no coroutine), `ship` hands every batch over. Records reach Kafka only once
shipped, so the subtask ships after its barrier markers (which go through `add` too, keeping
records and markers of a partition in order), at the end of every fetch cycle, and after each
call of an asynchronous operator.

Batches are handed over in the order they filled, whatever awaits in between: the producer
queues a partition's batches in the order ``send_batch`` is called, and one `ship` at a time
hands over full batches first, oldest first, then the open ones.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["Batch", "BatchProducer", "PartitionBatches"]


class Batch(Protocol):
    """What `PartitionBatches` needs of a batch (an aiokafka ``BatchBuilder``)."""

    def append(
        self, *, timestamp: int | None, key: bytes | None, value: bytes, headers: Sequence[Any]
    ) -> object | None:
        """Add a record; None when the batch is full."""
        ...


class BatchProducer(Protocol):
    """What `PartitionBatches` needs of a producer (an ``AIOKafkaProducer``)."""

    def create_batch(self) -> Any:
        """An empty `Batch`."""
        ...

    async def send_batch(self, batch: Any, topic: str, *, partition: int) -> Any:
        """Queue ``batch`` for ``topic[partition]``, after the batches queued before it."""
        ...


class PartitionBatches:
    """The open batches of one producer, by (topic, partition), and the full ones not yet
    handed over, in the order they filled."""

    def __init__(self, producer: BatchProducer) -> None:
        self._producer = producer
        self._open: dict[tuple[str, int], Batch] = {}
        self._full: deque[tuple[str, int, Batch]] = deque()
        self._turns = asyncio.Lock()

    def add(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes,
        headers: Sequence[tuple[str, bytes]],
    ) -> None:
        """Append one record to the open batch of ``topic[partition]`` (no I/O: a full batch
        waits for `ship`)."""
        where = (topic, partition)
        batch = self._open.get(where)
        if batch is None:
            batch = self._open[where] = self._producer.create_batch()
        if batch.append(key=key, value=value, timestamp=None, headers=headers) is not None:
            return
        self._full.append((topic, partition, batch))
        fresh = self._open[where] = self._producer.create_batch()
        # An empty batch takes any record; one too large for Kafka fails when it is sent.
        fresh.append(key=key, value=value, timestamp=None, headers=headers)

    async def ship(self) -> None:
        """Hand every batch to the producer (it sends them as its linger allows): the full
        ones in the order they filled, then the open ones."""
        async with self._turns:
            while self._full or self._open:
                if self._full:
                    topic, partition, batch = self._full.popleft()
                else:
                    (topic, partition), batch = self._open.popitem()
                await self._producer.send_batch(batch, topic, partition=partition)

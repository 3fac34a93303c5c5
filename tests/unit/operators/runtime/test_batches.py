"""`PartitionBatches`: records gathered per partition reach the producer in order, all of them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from sluicegate.operators.runtime.batches import PartitionBatches

HEADERS = [("sg-writer", b"op#0")]


class SmallBatch:
    """Holds at most ``size`` records, like a full aiokafka batch (an empty one takes any)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.records: list[bytes] = []

    def append(
        self, *, timestamp: int | None, key: bytes | None, value: bytes, headers: Sequence[Any]
    ) -> object | None:
        if len(self.records) >= self.size:
            return None
        self.records.append(value)
        return object()


class SlowProducer:
    """Queues batches per partition as ``send_batch`` is called; the first call of all waits
    until ``release`` is set (a partition whose previous batch is not drained yet)."""

    def __init__(self) -> None:
        self.queued: dict[tuple[str, int], list[list[bytes]]] = {}
        self.release = asyncio.Event()
        self._calls = 0

    def create_batch(self) -> SmallBatch:
        return SmallBatch(2)

    async def send_batch(self, batch: SmallBatch, topic: str, *, partition: int) -> None:
        self._calls += 1
        if self._calls == 1:
            await self.release.wait()
        self.queued.setdefault((topic, partition), []).append(batch.records)


def test_nothing_reaches_the_producer_before_a_ship() -> None:
    async def scenario() -> None:
        producer = SlowProducer()
        producer.release.set()
        batches = PartitionBatches(producer)
        for value in (b"a", b"b", b"c"):  # the first batch fills
            batches.add("words", 0, b"k", value, HEADERS)
        batches.add("words", 1, b"k", b"d", HEADERS)
        assert producer.queued == {}
        await batches.ship()
        assert producer.queued == {("words", 0): [[b"a", b"b"], [b"c"]], ("words", 1): [[b"d"]]}
        await batches.ship()  # nothing left
        assert sum(len(b) for b in producer.queued.values()) == 3

    asyncio.run(scenario())


def test_concurrent_ships_queue_a_partitions_batches_in_the_order_they_filled() -> None:
    async def scenario() -> None:
        producer = SlowProducer()
        batches = PartitionBatches(producer)
        for value in (b"1", b"2", b"3"):
            batches.add("words", 0, None, value, HEADERS)
        # The first batch handed over waits in the producer (its partition is not drained);
        # what is added and shipped meanwhile must queue behind it.
        first = asyncio.create_task(batches.ship())
        await asyncio.sleep(0)
        for value in (b"4", b"5", b"6", b"7"):
            batches.add("words", 0, None, value, HEADERS)
        second = asyncio.create_task(batches.ship())
        await asyncio.sleep(0.01)
        producer.release.set()
        await asyncio.gather(first, second)
        queued = producer.queued[("words", 0)]
        assert [v for batch in queued for v in batch] == [b"1", b"2", b"3", b"4", b"5", b"6", b"7"]

    asyncio.run(scenario())

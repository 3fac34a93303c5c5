"""Reading a topic's committed records from its beginning, outside any consumer group: what
the demos, the approver and the tests do to follow a sink."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiokafka import AIOKafkaConsumer, TopicPartition

from sluicegate.operators.kafka import KafkaLike, clients as kafka_clients

__all__ = ["committed_from_start"]


@contextlib.asynccontextmanager
async def committed_from_start(
    bootstrap: KafkaLike, topic: str, partitions: int
) -> AsyncIterator[AIOKafkaConsumer]:
    """A ``read_committed`` consumer of every partition of ``topic``, at the beginning.

    Stopped on exit, also when a cancel interrupts its start.
    """
    consumer = kafka_clients.consumer(
        bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",  # records deleted under it: go on from the oldest left
    )
    try:
        await consumer.start()
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        yield consumer
    finally:
        await consumer.stop()

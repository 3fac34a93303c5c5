"""Regression: a sink subtask's progress read stopped at another subtask's open transaction.

Every sink subtask of a pipeline writes its "published up to n" record to one partition of the
sink-progress topic; a ``read_committed`` reader sees only up to the first transaction still
open there. A subtask killed mid-publication leaves one open until its successor fences it. If
another subtask's successor read its progress meanwhile, it missed its own newer committed
record and published those outputs again (every result of one agent subtask twice, seen in
the agent chaos test). Now the read waits until the open transactions before its own record
are settled.
"""

from __future__ import annotations

import asyncio
import json
import uuid

from aiokafka import AIOKafkaProducer

from sluicegate.operators.runtime.sinks.kafka_transactions import KafkaTransactions
from tests.conftest import TopicFactory


async def test_progress_read_waits_for_a_foreign_open_transaction(
    kafka_bootstrap: str, new_topic: TopicFactory
) -> None:
    progress = await new_topic(1, hint="progress")
    tag = uuid.uuid4().hex[:8]

    def transactions(subtask: str) -> KafkaTransactions:
        return KafkaTransactions(
            kafka_bootstrap, transactional_id=f"{tag}.{subtask}", progress_topic=progress,
            subtask=subtask,
        )  # fmt: skip

    # Subtask a is "killed" mid-publication: its transaction stays open.
    killed = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=f"{tag}.a")
    await killed.start()
    await killed.begin_transaction()
    await killed.send_and_wait(progress, json.dumps({"published": 9}).encode(), key=b"a")
    # Subtask b commits "published up to 5" after it.
    b = transactions("b")
    await b.start()
    await b.publish([], 5)
    await b.stop()
    successor_a = transactions("a")
    successor_b = transactions("b")
    try:
        await successor_b.start()
        reading = asyncio.create_task(successor_b.read_published())
        await asyncio.sleep(1.0)  # the open transaction holds the committed end back
        assert not reading.done(), "read past an open transaction: it would miss its own 5"
        await successor_a.start()  # fences a: its open transaction is aborted
        assert await asyncio.wait_for(reading, 30) == 5
        assert await successor_a.read_published() == 0  # the aborted 9 never counted
    finally:
        await successor_a.stop()
        await successor_b.stop()
        await killed.stop()

"""`bench.peers_wordcount.transaction_markers` on the real broker: it counts the commit markers
a transactional producer leaves in a topic, and none for a plain producer (how the peers
benchmark tells an exactly-once output from one only labelled so)."""

from __future__ import annotations

import uuid

from aiokafka.structs import ConsumerRecord

from bench.peers_wordcount import transaction_markers
from sluicegate.operators.kafka import clients as kafka_clients
from sluicegate.operators.runtime.readers import committed_from_start
from tests.conftest import TopicFactory


async def _write(bootstrap: str, topic: str, batches: int, *, transactional: bool) -> None:
    options = {"transactional_id": f"markers-{uuid.uuid4().hex[:8]}"} if transactional else {}
    producer = kafka_clients.producer(bootstrap, enable_idempotence=True, **options)
    await producer.start()
    try:
        for batch in range(batches):
            if transactional:
                await producer.begin_transaction()
            for n in range(2):
                await producer.send_and_wait(topic, f"{batch}-{n}".encode(), partition=n % 2)
            if transactional:
                await producer.commit_transaction()
    finally:
        await producer.stop()


async def _markers(bootstrap: str, topic: str) -> tuple[int, int]:
    async with committed_from_start(bootstrap, topic, 2) as sink:
        records: list[ConsumerRecord[bytes, bytes]] = []
        while len(records) < 6:
            for batch in (await sink.getmany(timeout_ms=1000)).values():
                records.extend(batch)
        return await transaction_markers(sink, records), len(records)


async def test_markers_are_counted_for_transactions_only(
    kafka_bootstrap: str, new_topic: TopicFactory
) -> None:
    transactional, plain = await new_topic(2), await new_topic(2)
    await _write(kafka_bootstrap, transactional, 3, transactional=True)
    await _write(kafka_bootstrap, plain, 3, transactional=False)
    # three transactions over two partitions: a commit marker in each partition per transaction
    assert await _markers(kafka_bootstrap, transactional) == (6, 6)
    assert await _markers(kafka_bootstrap, plain) == (0, 6)

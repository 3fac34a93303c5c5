"""What sluicegate needs from Kafka, proven against the real broker of the test session.

This is the evidence for the broker version pinned in deploy/kafka/pom.xml
(docs/kafka-broker.md): aiokafka's idempotent producer, transactional producer with
send_offsets_to_transaction, zombie fencing, read_committed consumption, assign/seek and admin
topic creation.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import ProducerFenced

from tests.conftest import TopicFactory


async def _read(
    bootstrap: str, tp: TopicPartition, count: int, *, isolation: str = "read_committed"
) -> list[ConsumerRecord[bytes, bytes]]:
    """Read ``count`` records of one partition from offset 0, within 20 s."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False
    )
    await consumer.start()
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got: list[ConsumerRecord[bytes, bytes]] = []
        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(batch)
        return got
    finally:
        await consumer.stop()


async def test_admin_creates_topics_with_partitions(
    kafka_bootstrap: str, new_topic: TopicFactory
) -> None:
    name = await new_topic(4)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        assert name in await admin.list_topics()
        (description,) = await admin.describe_topics([name])
        assert len(description["partitions"]) == 4
    finally:
        await admin.close()


async def test_idempotent_producer_keeps_order_without_duplicates(
    kafka_bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(2)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        for i in range(500):
            await producer.send(topic, str(i).encode(), partition=i % 2, headers=[("n", b"1")])
        await producer.flush()
    finally:
        await producer.stop()
    evens = await _read(kafka_bootstrap, TopicPartition(topic, 0), 250)
    assert [int(r.value) for r in evens] == list(range(0, 500, 2))
    assert all(r.headers == (("n", b"1"),) for r in evens)


async def test_transactions_commit_abort_and_offsets(
    kafka_bootstrap: str, new_topic: TopicFactory
) -> None:
    source, sink = await new_topic(1), await new_topic(1)
    group = f"group-{sink}"
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=f"tx-{sink}")
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send(sink, b"first", partition=0)
            await producer.send_offsets_to_transaction({TopicPartition(source, 0): 7}, group)
        await producer.begin_transaction()
        await producer.send(sink, b"aborted", partition=0)
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send(sink, b"second", partition=0)
    finally:
        await producer.stop()

    tp = TopicPartition(sink, 0)
    committed = await _read(kafka_bootstrap, tp, 2)
    assert [r.value for r in committed] == [b"first", b"second"]
    uncommitted = await _read(kafka_bootstrap, tp, 3, isolation="read_uncommitted")
    assert [r.value for r in uncommitted] == [b"first", b"aborted", b"second"]

    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group)
    await consumer.start()
    try:
        assert await consumer.committed(TopicPartition(source, 0)) == 7
    finally:
        await consumer.stop()


async def test_a_new_producer_with_the_same_transactional_id_fences_the_zombie(
    kafka_bootstrap: str, new_topic: TopicFactory
) -> None:
    sink = await new_topic(1)
    zombie = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=f"tx-{sink}")
    successor = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=f"tx-{sink}")
    await zombie.start()
    try:
        await zombie.begin_transaction()
        await zombie.send_and_wait(sink, b"zombie", partition=0)
        await successor.start()  # InitProducerId bumps the epoch and aborts the open transaction
        async with successor.transaction():
            await successor.send(sink, b"successor", partition=0)
        with pytest.raises(ProducerFenced):
            await zombie.commit_transaction()
    finally:
        await successor.stop()
        await asyncio.shield(zombie.stop())
    assert [r.value for r in await _read(kafka_bootstrap, TopicPartition(sink, 0), 1)] == [
        b"successor"
    ]


async def test_assign_and_seek_read_from_a_chosen_offset(
    kafka_bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(3)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        for i in range(30):
            await producer.send(topic, str(i).encode(), partition=i % 3)
        await producer.flush()
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 1)
        consumer.assign([tp])
        assert await consumer.end_offsets([tp]) == {tp: 10}
        consumer.seek(tp, 6)
        got: list[int] = []
        deadline = time.monotonic() + 20
        while len(got) < 4 and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(r.offset for r in batch)
        assert got == [6, 7, 8, 9]
        assert consumer.assignment() == {tp}
    finally:
        await consumer.stop()

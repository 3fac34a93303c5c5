"""An exactly-once sink ends a transaction Kafka left hanging, as its coordinator recorded it.

Seen in CI: the single-node broker was stopped (SIGTERM) while a sink subtask committed; the
controlled shutdown made every partition leaderless, the transaction coordinator took them for
deleted, dropped the commit markers and recorded ``CompleteCommit``. After the restart the
transaction stayed open on the sink-progress partition and two output partitions for good: the
subtask's progress read waited, failed, and the job recovered in a loop, and no
``read_committed`` reader of those output partitions got past it.

That shutdown race is rare, so these tests build the same state directly: a transaction
completes at its coordinator, then a record of the same producer id and epoch is written to
a partition behind the coordinator's back (a raw produce request, with the broker's
transaction verification turned off, which otherwise refuses it). The partition holds an open
transaction the coordinator knows nothing of, exactly what the dropped marker leaves.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.protocol.produce import ProduceRequest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from sluicegate.devkafka.broker import DevBroker
from sluicegate.operators.kafka import clients
from sluicegate.operators.kafka.hanging_transactions import TransactionRecord, _describe_transaction
from sluicegate.operators.runtime.sinks.kafka_transactions import KafkaTransactions
from tests.helpers import wait_for

pytestmark = pytest.mark.integration

OUT_PARTITIONS = 2


@pytest.fixture(scope="module")
def unverified_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A broker of its own that accepts transactional writes its coordinator never saw."""
    broker = DevBroker(port=0, data_dir=tmp_path_factory.mktemp("kafka"))
    broker.start()
    try:
        asyncio.run(_turn_verification_off(broker.bootstrap))
        yield broker.bootstrap
    finally:
        broker.stop()


async def _turn_verification_off(bootstrap: str) -> None:
    admin = clients.admin(bootstrap)
    try:
        await admin.start()
        setting = {"transaction.partition.verification.enable": "false"}
        await admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1", setting)])
    finally:
        await admin.close()


async def _topics(bootstrap: str, tag: str) -> tuple[str, str]:
    out, progress = f"out-{tag}", f"progress-{tag}"
    admin = clients.admin(bootstrap)
    try:
        await admin.start()
        await admin.create_topics([NewTopic(out, OUT_PARTITIONS, 1), NewTopic(progress, 1, 1)])
    finally:
        await admin.close()
    return out, progress


async def _write_behind_coordinator(
    bootstrap: str,
    transactional_id: str,
    record: TransactionRecord,
    writes: list[tuple[str, int, bytes, bytes]],
) -> None:
    """Append each ``(topic, partition, key, value)`` as a transactional batch of the producer
    id and epoch of ``record``, after the one record that producer wrote there before."""
    client = clients.bare_client(bootstrap)
    try:
        await client.bootstrap()
        for topic, partition, key, value in writes:
            builder = DefaultRecordBatchBuilder(
                magic=2, compression_type=0, is_transactional=1,
                producer_id=record.producer_id, producer_epoch=record.producer_epoch,
                base_sequence=1, batch_size=16384,
            )  # fmt: skip
            builder.append(0, timestamp=None, key=key, value=value, headers=[])
            request = ProduceRequest(
                transactional_id=transactional_id, required_acks=-1, timeout=10_000,
                topics=[(topic, [(partition, bytes(builder.build()))])],
            )  # fmt: skip
            await client._wait_on_metadata(topic)
            leader = client.cluster.leader_for_partition(TopicPartition(topic, partition))
            response: Any = await client.send(leader, request)
            (_, ((_, error_code, *_),)), *_ = response.topics
            assert error_code == 0, f"the raw write was refused: error {error_code}"
    finally:
        await client.close()


async def _committed_and_open(bootstrap: str, tps: list[TopicPartition]) -> dict[str, Any]:
    """Per partition: the last stable offset and the end, and what read_committed sees."""
    consumer = clients.consumer(
        bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    try:
        await consumer.start()
        stable = await consumer.end_offsets(tps)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        values: list[bytes] = []
        while [tp for tp in tps if await consumer.position(tp) < stable[tp]]:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                values += [r.value for r in records if r.value is not None]
    finally:
        await consumer.stop()
    plain = clients.consumer(bootstrap, enable_auto_commit=False)
    try:
        await plain.start()
        ends = await plain.end_offsets(tps)
    finally:
        await plain.stop()
    return {"stable": stable, "ends": ends, "values": sorted(values)}


@pytest.mark.parametrize("completed", ["CompleteCommit", "CompleteAbort"])
async def test_a_hanging_transaction_is_ended_as_its_coordinator_recorded(
    unverified_broker: str, completed: str
) -> None:
    bootstrap = unverified_broker
    tag = uuid.uuid4().hex[:8]
    out, progress = await _topics(bootstrap, tag)
    tid = f"sluicegate.hanging-{tag}.counter#0"

    def transactions() -> KafkaTransactions:
        return KafkaTransactions(
            bootstrap, transactional_id=tid, progress_topic=progress, subtask="counter#0",
            topics=[out],
        )  # fmt: skip

    outputs = [(out, p, b"k", f"first-{p}".encode()) for p in range(OUT_PARTITIONS)]
    if completed == "CompleteCommit":
        first = transactions()
        try:
            await first.start()
            await first.publish(outputs, 1)
        finally:
            await first.stop()
    else:  # the same records, aborted
        producer = clients.producer(bootstrap, transactional_id=tid)
        try:
            await producer.start()
            await producer.begin_transaction()
            for topic, partition, key, value in outputs:
                await producer.send_and_wait(topic, value, key=key, partition=partition)
            first_progress = json.dumps({"schema_version": 1, "published": 1}).encode()
            await producer.send_and_wait(progress, first_progress, key=b"counter#0", partition=0)
            await producer.abort_transaction()
        finally:
            await producer.stop()
    client = clients.bare_client(bootstrap)
    try:
        await client.bootstrap()

        async def completed_record() -> TransactionRecord | None:
            found = await _describe_transaction(client, tid)
            return found if found is not None and found.state == completed else None

        record = await wait_for(completed_record, timeout_s=30, what=f"the record {completed}")
    finally:
        await client.close()

    # What a dropped marker leaves: output 0 and "published up to 2" open behind the coordinator.
    progress_value = json.dumps({"schema_version": 1, "published": 2}).encode()
    await _write_behind_coordinator(
        bootstrap,
        tid,
        record,
        [(out, 0, b"k", b"hanging"), (progress, 0, b"counter#0", progress_value)],
    )
    tps = [TopicPartition(out, p) for p in range(OUT_PARTITIONS)] + [TopicPartition(progress, 0)]
    stuck = await _committed_and_open(bootstrap, tps)
    assert stuck["stable"][tps[0]] < stuck["ends"][tps[0]], "the write did not hang"

    successor = transactions()
    try:
        await successor.start()
        published = await successor.read_published()
    finally:
        await successor.stop()

    after = await _committed_and_open(bootstrap, tps)
    assert after["stable"] == after["ends"], "a transaction is still open"
    if completed == "CompleteCommit":
        assert published == 2
        assert {b"first-0", b"first-1", b"hanging"} <= set(after["values"])
    else:
        assert published == 0
        assert not {b"first-0", b"first-1", b"hanging"} & set(after["values"])

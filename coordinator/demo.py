"""The demo pipeline (``make demo``): a word count over real Kafka topics.

Until the engine lands this is a plain consume-transform-produce loop on aiokafka: sentences in,
word counts out, published in one Kafka transaction together with the consumed offsets, then
read back with ``read_committed`` and checked against what was produced. Later issues replace
the loop with a checkpointed pipeline and then with the agent demo.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

__all__ = ["run_demo"]

_WORDS = ("kafka", "barrier", "snapshot", "agent", "tool", "model", "offset", "journal")
_PARTITIONS = 3


async def run_demo(bootstrap: str, records: int, seed: int = 7) -> int:
    """Run the word count end to end and print what happened; 0 when the counts check out."""
    prefix = f"sluicegate-demo-{uuid.uuid4().hex[:8]}"
    sentences, counts = f"{prefix}.sentences", f"{prefix}.counts"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, _PARTITIONS, 1) for name in (sentences, counts)])
    finally:
        await admin.close()
    print(f"topics: {sentences} -> {counts} ({_PARTITIONS} partitions each)")

    started = time.monotonic()
    expected = await _produce(bootstrap, sentences, records, random.Random(seed))
    produced_s = time.monotonic() - started
    print(f"produced {records} sentences ({sum(expected.values())} words) in {produced_s:.2f}s")

    started = time.monotonic()
    await _count(bootstrap, sentences, counts, records, group=prefix)
    print(f"counted and published in one transaction in {time.monotonic() - started:.2f}s")

    published = await _read_committed(bootstrap, counts, len(expected))
    for word, count in Counter(published).most_common():
        print(f"  {word:<10} {count:>8}")
    if published != dict(expected):
        print("MISMATCH: the published counts differ from what was produced")
        return 1
    print("OK: every word counted exactly once")
    return 0


async def _produce(bootstrap: str, topic: str, records: int, rng: random.Random) -> Counter[str]:
    expected: Counter[str] = Counter()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5)
    await producer.start()
    try:
        for i in range(records):
            words = rng.choices(_WORDS, k=rng.randint(1, 6))
            expected.update(words)
            await producer.send(topic, " ".join(words).encode(), key=str(i).encode())
        await producer.flush()
    finally:
        await producer.stop()
    return expected


async def _count(bootstrap: str, source: str, sink: str, records: int, group: str) -> None:
    partitions = [TopicPartition(source, p) for p in range(_PARTITIONS)]
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{group}-counter")
    await consumer.start()
    await producer.start()
    try:
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        totals: Counter[str] = Counter()
        positions: dict[TopicPartition, int] = {}
        seen = 0
        while seen < records:
            batches = await consumer.getmany(timeout_ms=1000)
            for tp, batch in batches.items():
                for message in batch:
                    totals.update(message.value.decode().split())
                    positions[tp] = message.offset + 1
                    seen += 1
        async with producer.transaction():
            for word, count in totals.items():
                await producer.send(sink, str(count).encode(), key=word.encode())
            await producer.send_offsets_to_transaction(positions, group)
    finally:
        await producer.stop()
        await consumer.stop()


async def _read_committed(bootstrap: str, topic: str, expected_keys: int) -> dict[str, int]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(_PARTITIONS)]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        published: dict[str, int] = {}
        deadline = asyncio.get_running_loop().time() + 30
        while len(published) < expected_keys and asyncio.get_running_loop().time() < deadline:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                for message in batch:
                    published[message.key.decode()] = int(message.value)
        return published
    finally:
        await consumer.stop()

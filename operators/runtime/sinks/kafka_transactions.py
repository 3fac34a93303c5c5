"""The Kafka side of an exactly-once sink: one transactional producer per sink subtask, and the
compacted sink-progress topic that records, in the same transaction as the outputs, the last
checkpoint whose outputs are published.

1. ``start()`` initialises the transactional producer, which fences any zombie holding the same
   transactional id and aborts its open transaction;
2. ``read_published()`` reads this sink subtask's last progress record with ``read_committed``
   (0 when there is none);
3. ``publish(outputs, up_to)`` sends, in one transaction, the outputs and the progress record
   ``published = up_to``; if it raises, the transaction is aborted and nothing is visible.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.producer.message_accumulator import BatchBuilder

from operators.runtime.sinks.write_ahead import SinkOutput

__all__ = ["KafkaTransactions"]


class KafkaTransactions:
    """Implements `Transactions` on a real broker; steps in the module docstring."""

    def __init__(
        self, bootstrap: str, *, transactional_id: str, progress_topic: str, subtask: str
    ) -> None:
        self._bootstrap = bootstrap
        self._transactional_id = transactional_id
        self._progress = TopicPartition(progress_topic, 0)
        self._subtask = subtask
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap,
            transactional_id=self._transactional_id,
            linger_ms=5,
        )
        await self._producer.start()

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    async def publish(self, outputs: Sequence[SinkOutput], up_to: int) -> None:
        assert self._producer is not None, "start() the transactions first"
        progress = json.dumps({"schema_version": 1, "published": up_to}).encode()
        async with self._producer.transaction():
            # Whole batches per partition: a send per record costs more than the rest together.
            batches: dict[tuple[str, int], BatchBuilder] = {}
            for topic, partition, out_key, value in outputs:
                batch = batches.get((topic, partition)) or self._producer.create_batch()
                if batch.append(key=out_key, value=value, timestamp=None) is None:
                    await self._producer.send_batch(batch, topic, partition=partition)
                    batch = self._producer.create_batch()
                    batch.append(key=out_key, value=value, timestamp=None)
                batches[(topic, partition)] = batch
            for (topic, partition), batch in batches.items():
                await self._producer.send_batch(batch, topic, partition=partition)
            await self._producer.send(
                self._progress.topic, progress, key=self._subtask.encode(), partition=0
            )

    async def read_published(self) -> int:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            isolation_level="read_committed",
            enable_auto_commit=False,
        )
        try:  # started inside: a cancel during start must still stop it
            await consumer.start()
            consumer.assign([self._progress])
            await consumer.seek_to_beginning(self._progress)
            end = (await consumer.end_offsets([self._progress]))[self._progress]
            published = 0
            while await consumer.position(self._progress) < end:
                batches = await consumer.getmany(self._progress, timeout_ms=500)
                for record in batches.get(self._progress, []):
                    if record.key == self._subtask.encode() and record.value is not None:
                        published = int(json.loads(record.value)["published"])
            return published
        finally:
            await consumer.stop()

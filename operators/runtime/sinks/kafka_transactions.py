"""The Kafka side of an exactly-once sink: one transactional producer per sink subtask, and the
compacted sink-progress topic that records, in the same transaction as the outputs, the last
checkpoint whose outputs are published.

1. ``start()`` first ends what Kafka left hanging of this transactional id on the progress
   partition and the sink topics, as its coordinator recorded it
   (`operators.kafka.hanging_transactions`: a broker stopped during a commit can lose the
   markers, and the next step would erase the record of how the transaction ended); then it
   initialises the transactional producer, which fences any zombie holding the same
   transactional id and aborts its open transaction;
2. ``read_published()`` reads this sink subtask's last progress record with ``read_committed``
   (0 when there is none). Every sink subtask of the pipeline writes progress to the same
   partition, whose committed end (the last stable offset) stops at the first transaction still
   open there: another subtask's, killed mid-publication and not yet aborted by its successor.
   A read up to that end could miss this subtask's own newer, committed progress record and
   publish its outputs again (seen in the agent chaos test: every result of one subtask twice).
   So it first finds, reading uncommitted, the offset of this subtask's last progress record
   (its own transaction is settled: ``start()`` fenced it), waits until the committed end has
   passed it, and only then reads committed records;
3. ``publish(outputs, up_to)`` sends, in one transaction, the outputs and the progress record
   ``published = up_to``; if it raises, the transaction is aborted and nothing is visible.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Sequence
from typing import Literal

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    IncompatibleBrokerVersion,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
)
from aiokafka.producer.message_accumulator import BatchBuilder

from sluicegate.operators.exceptions import RetryableError
from sluicegate.operators.kafka import KafkaLike, clients as kafka_clients
from sluicegate.operators.kafka.hanging_transactions import end_hanging
from sluicegate.operators.runtime.sinks.write_ahead import SinkOutput

__all__ = ["KafkaTransactions", "SinkProgressUnsettledError"]

logger = logging.getLogger(__name__)

_STABLE_WAIT_S = 120.0
"""Longer than a transaction may stay open: the broker aborts one after the producer's
transaction timeout (60 s by default) when no successor fenced it first."""

_CANNOT_LOOK = (
    IncompatibleBrokerVersion,
    NotImplementedError,  # the broker lacks the request versions
    ClusterAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
)


class SinkProgressUnsettledError(RetryableError):
    """A transaction on the sink-progress topic stayed open: the subtask's own progress cannot
    be read yet. Retryable: the recovery that follows tries again."""

    def __init__(self, subtask: str, own_offset: int, stable_end: int) -> None:
        super().__init__(
            f"{subtask}: the sink-progress topic's committed end stayed at {stable_end}, before "
            f"its own progress record at {own_offset}: a transaction is still open there (if it "
            "stays open, see docs/kafka-broker.md, 'A sink stalls after a broker restart')"
        )
        self.subtask, self.own_offset, self.stable_end = subtask, own_offset, stable_end


class KafkaTransactions:
    """Implements `Transactions` on a real broker; steps in the module docstring."""

    def __init__(
        self,
        bootstrap: KafkaLike,
        *,
        transactional_id: str,
        progress_topic: str,
        subtask: str,
        topics: Sequence[str] = (),
    ) -> None:
        self._bootstrap = bootstrap
        self._transactional_id = transactional_id
        self._progress = TopicPartition(progress_topic, 0)
        self._subtask = subtask
        self._topics = tuple(topics)
        """The sink topics the transactions write."""
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        await self._end_hanging()
        self._producer = kafka_clients.producer(
            self._bootstrap,
            transactional_id=self._transactional_id,
            linger_ms=5,
            max_batch_size=kafka_clients.BATCH_BYTES,
        )
        await self._producer.start()

    async def _end_hanging(self) -> None:
        client = kafka_clients.bare_client(self._bootstrap)
        try:  # started inside: a cancel during the bootstrap must still close it
            await client.bootstrap()
            topics = [self._progress.topic, *self._topics]
            await end_hanging(client, self._transactional_id, topics)
        except _CANNOT_LOOK as exc:
            logger.warning(
                "%s cannot look for transactions Kafka left open (%r); should one stall its "
                "sink, see docs/kafka-broker.md, 'A sink stalls after a broker restart'",
                self._subtask, exc,
            )  # fmt: skip
        finally:
            await client.close()

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
        last_own, _ = await self._scan("read_uncommitted")
        if last_own is None:
            return 0
        _, published = await self._scan("read_committed", past=last_own)
        return published

    async def _scan(
        self, isolation: Literal["read_committed", "read_uncommitted"], *, past: int = -1
    ) -> tuple[int | None, int]:
        """Read the progress partition from its start to its end (with ``past``: once that end
        is beyond offset ``past``): the offset of this subtask's last progress record and the
        checkpoint it names (None and 0 when there is none)."""
        consumer = kafka_clients.consumer(
            self._bootstrap,
            isolation_level=isolation,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=kafka_clients.READ_TO_END_WAIT_MS,
        )
        try:  # started inside: a cancel during start must still stop it
            await _start(consumer)
            consumer.assign([self._progress])
            await consumer.seek_to_beginning(self._progress)
            end = await self._stable_end_past(consumer, past)
            last: int | None = None
            published = 0
            while await consumer.position(self._progress) < end:
                batches = await consumer.getmany(self._progress, timeout_ms=500)
                for record in batches.get(self._progress, []):
                    if record.key == self._subtask.encode() and record.value is not None:
                        last, published = record.offset, int(json.loads(record.value)["published"])
            return last, published
        finally:
            await consumer.stop()

    async def _stable_end_past(self, consumer: AIOKafkaConsumer, offset: int) -> int:
        """Wait until the committed end of the progress partition is past ``offset`` (the
        transactions open before it are settled) and return it."""
        deadline = time.monotonic() + _STABLE_WAIT_S
        while True:
            end: int = (await consumer.end_offsets([self._progress]))[self._progress]
            if end > offset:
                return end
            if time.monotonic() > deadline:
                raise SinkProgressUnsettledError(self._subtask, offset, end)
            logger.info(
                "%s waits for an open transaction on the sink-progress topic to settle "
                "(committed end %s, own progress at %s)", self._subtask, end, offset,
            )  # fmt: skip
            await asyncio.sleep(0.5)


async def _start(consumer: AIOKafkaConsumer) -> None:
    """Start ``consumer``; a cancel lets the start finish first (a start cut off midway leaves
    a connection that `stop` does not close), then propagates."""
    starting = asyncio.ensure_future(consumer.start())
    try:
        await asyncio.shield(starting)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await starting
        raise

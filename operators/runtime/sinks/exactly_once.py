"""Exactly-once publication of a subtask's sink outputs.

Outputs bound for a sink are *written ahead* into the subtask's state, tagged with their
interval, and published only when the checkpoint that holds them completes:

1. ``write_ahead(interval, ...)`` stores the output under ``sink-wal/<interval><seq>`` in the
   state's metadata area, so checkpoint ``n`` holds every output of intervals ≤ n;
2. ``publish(n)`` (on ``completed(n)``, and on restore from ``n``) sends, in one Kafka
   transaction, every stored output of an interval in ``(published, n]`` together with a record
   ``published = n`` in the compacted sink-progress topic; then deletes those outputs from state;
3. ``start()`` initialises the transactional producer, which fences any zombie holding the same
   transactional id and aborts its open transaction, then reads ``published`` back from the
   progress topic with ``read_committed``.

A ``read_committed`` consumer of the sink therefore sees each output exactly once, one
checkpoint interval after it was produced.
"""

from __future__ import annotations

import json
import logging
import struct
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.producer.message_accumulator import BatchBuilder

from operators.state.store import PartitionState

__all__ = ["SinkOutput", "SinkPublisher", "decode_output", "encode_output"]

logger = logging.getLogger(__name__)

_WAL = b"sink-wal/"
_FORMAT = 1  # the first byte of every stored output; bump when the layout changes
_HEAD = struct.Struct(">BHIi")  # format, topic length, partition, key length (-1: no key)

SinkOutput = tuple[str, int, bytes | None, bytes]
"""(topic, partition, key, value) of one output."""


def encode_output(topic: str, partition: int, key: bytes | None, value: bytes) -> bytes:
    """The stored form of one sink output."""
    name = topic.encode()
    head = _HEAD.pack(_FORMAT, len(name), partition, -1 if key is None else len(key))
    return head + name + (key or b"") + value


def decode_output(data: bytes) -> SinkOutput:
    """Inverse of `encode_output`; refuses an unknown format."""
    fmt, name_len, partition, key_len = _HEAD.unpack_from(data)
    if fmt != _FORMAT:
        raise ValueError(f"sink output stored in format {fmt}; this build reads {_FORMAT}")
    at = _HEAD.size
    topic = data[at : at + name_len].decode()
    at += name_len
    key = None if key_len < 0 else data[at : at + key_len]
    at += max(key_len, 0)
    return topic, partition, key, data[at:]


def _wal_key(interval: int, seq: int) -> bytes:
    return _WAL + struct.pack(">QQ", interval, seq)


def _interval_of(key: bytes) -> int:
    interval: int = struct.unpack_from(">Q", key, len(_WAL))[0]
    return interval


class SinkPublisher:
    """Publishes one subtask's sink outputs in Kafka transactions; steps in the module doc."""

    def __init__(
        self,
        bootstrap: str,
        *,
        transactional_id: str,
        progress_topic: str,
        subtask: str,
        wal: PartitionState,
    ) -> None:
        self._bootstrap = bootstrap
        self._transactional_id = transactional_id
        self._progress = TopicPartition(progress_topic, 0)
        self._subtask = subtask
        self._wal = wal
        self._producer: AIOKafkaProducer | None = None
        self._seq: dict[int, int] = {}
        self.published = 0
        """The newest checkpoint whose outputs are published."""

    async def start(self) -> None:
        """Fence zombies of this transactional id, then read how far publication got."""
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap,
            transactional_id=self._transactional_id,
            linger_ms=5,
        )
        await self._producer.start()
        self.published = await self._read_progress()
        logger.info("sink publisher %s: published up to %s", self._subtask, self.published)

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    def write_ahead(
        self, interval: int, topic: str, partition: int, key: bytes | None, value: bytes
    ) -> None:
        """Keep one output of ``interval`` in state until its checkpoint completes."""
        seq = self._seq.get(interval, 0)
        self._seq[interval] = seq + 1
        self._wal.put(_wal_key(interval, seq), encode_output(topic, partition, key, value))

    async def publish(self, up_to: int) -> int:
        """Publish the outputs of intervals in ``(published, up_to]``; return how many."""
        assert self._producer is not None, "start() the publisher first"
        if up_to <= self.published:
            return 0
        rows = [(k, v) for k, v in self._wal.items(prefix=_WAL) if _interval_of(k) <= up_to]
        started = time.perf_counter()
        progress = json.dumps({"schema_version": 1, "published": up_to}).encode()
        async with self._producer.transaction():
            # Whole batches per partition: a send per record costs more than the rest together.
            batches: dict[tuple[str, int], BatchBuilder] = {}
            for key, stored in rows:
                if _interval_of(key) <= self.published:
                    continue
                topic, partition, out_key, value = decode_output(stored)
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
        for key, _ in rows:
            self._wal.delete(key)
        for interval in [i for i in self._seq if i <= up_to]:
            del self._seq[interval]
        count = sum(1 for key, _ in rows if _interval_of(key) > self.published)
        logger.debug(
            "published %s sink outputs up to checkpoint %s in %.3fs",
            count,
            up_to,
            time.perf_counter() - started,
        )
        self.published = up_to
        return count

    async def _read_progress(self) -> int:
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

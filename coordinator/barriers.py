"""Starting a checkpoint: barrier ``n`` into every partition of every source topic.

The coordinator is the only marker writer of a source; it keeps the id durably first
(`mark_triggered`), so ids never repeat even if it dies right after.
"""

from __future__ import annotations

from aiokafka import AIOKafkaProducer

from coordinator.numbering import mark_triggered
from operators.graph import JobGraph
from operators.protocol.records import COORDINATOR_WRITER, RecordKind, RecordMeta, encode_headers
from operators.storage import Storage

__all__ = ["inject_barriers"]


async def inject_barriers(
    producer: AIOKafkaProducer, storage: Storage, graph: JobGraph, checkpoint_id: int, attempt: int
) -> None:
    """1. record ``checkpoint_id`` as used; 2. write its barrier to every source partition;
    3. flush, so the barrier is in Kafka when this returns."""
    await mark_triggered(storage, checkpoint_id)
    meta = RecordMeta(attempt, checkpoint_id, COORDINATOR_WRITER, RecordKind.BARRIER, checkpoint_id)
    headers = encode_headers(meta)
    for source in graph.sources():
        for p in range(source.partitions):
            await producer.send(source.name, b"", partition=p, headers=headers)
    await producer.flush()

"""The at-least-once sink: records sent at once, each with a deterministic id for dedup.

`AtLeastOnceSink` sends every record through the subtask's idempotent producer as soon as it is
written, with header ``sg-id`` = `record_id`: ``<uid>/<topic>/<partition>/<offset>/<index>``
of the input record that emitted it, or ``<uid>/wake/<sha256 of key and value>`` for a
wake-up. A replay after a restore emits the same records with the same ids, so a consumer that
drops ids it has seen sees each record once. The subtask flushes its producer before it acks a
checkpoint, so a record of interval ≤ n is in Kafka before checkpoint ``n`` can complete (it
would never be replayed after that). The other steps of the `Sink` lifecycle have nothing to
do: nothing is kept in state, nothing waits for a completion.
"""

from __future__ import annotations

import hashlib
from typing import Protocol

from operators.contract import Record
from operators.runtime.sinks.contract import Sink, SinkRecord

__all__ = ["RECORD_ID_HEADER", "AtLeastOnceSink", "RecordSender", "record_id"]

RECORD_ID_HEADER = "sg-id"
"""On at-least-once sink records: a deterministic id to drop duplicates by."""


def record_id(
    operator: str, source: Record | None, index: int, key: bytes | None, value: bytes
) -> str:
    """The id of the ``index``-th output of ``operator`` for ``source``: the same input record
    yields the same id in every replay."""
    if source is not None:
        return f"{operator}/{source.topic}/{source.partition}/{source.offset}/{index}"
    # a wake-up: the content names it (replays emit the same content)
    digest = hashlib.sha256((key or b"") + b"\0" + value).hexdigest()
    return f"{operator}/wake/{digest[:32]}"


class RecordSender(Protocol):
    """What the sink needs of the subtask's producer (an ``AIOKafkaProducer``)."""

    async def send(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None,
        partition: int,
        headers: list[tuple[str, bytes]],
    ) -> object:
        """Queue one record; the returned future resolves when Kafka has it."""
        ...


class AtLeastOnceSink(Sink):
    """Every at-least-once sink topic of one subtask (operator ``operator``); see the module
    docstring. The producer is the subtask's: the sink neither starts nor stops it."""

    def __init__(self, producer: RecordSender, *, operator: str) -> None:
        self._producer = producer
        self._operator = operator

    async def open(self, restored: int | None) -> None:
        """Nothing to take up: what was sent is in Kafka, what was not is replayed."""

    async def write(self, record: SinkRecord, interval: int) -> None:
        rid = record_id(self._operator, record.source, record.emit_index, record.key, record.value)
        await self._producer.send(
            record.topic,
            record.value,
            key=record.key,
            partition=record.partition,
            headers=[(RECORD_ID_HEADER, rid.encode())],
        )

    def on_snapshot(self, checkpoint_id: int) -> None:
        """Nothing to keep in state."""

    async def on_completed(self, checkpoint_id: int) -> None:
        """Nothing waits for a completion."""

    async def close(self) -> None:
        """Nothing of its own to release."""

"""The at-least-once sink: records sent at once, each with a deterministic id for dedup.

`AtLeastOnceSink` sends every record through the subtask's idempotent producer as soon as it is
written (appended to the subtask's `PartitionBatches`, shipped with the fetch cycle), with
header ``sg-id`` = `record_id`: ``<uid>/<topic>/<partition>/<offset>/<index>``
of the input record that emitted it, or ``<uid>/wake/<sha256 of key and value>`` for a
wake-up. A replay after a restore emits the same records with the same ids, so a consumer that
drops ids it has seen sees each record once. The subtask flushes its producer before it acks a
checkpoint, so a record of interval ≤ n is in Kafka before checkpoint ``n`` can complete (it
would never be replayed after that). The other steps of the `Sink` lifecycle have nothing to
do: nothing is kept in state, nothing waits for a completion.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol

from sluicegate.operators.contract import Record
from sluicegate.operators.runtime.sinks.contract import Sink, SinkRecord

__all__ = ["RECORD_ID_HEADER", "AtLeastOnceSink", "RecordAppender", "record_id"]

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


class RecordAppender(Protocol):
    """Where the sink puts records (the subtask's `PartitionBatches`, shipped by the subtask)."""

    def add(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes,
        headers: Sequence[tuple[str, bytes]],
    ) -> None:
        """Queue one record for ``topic[partition]``."""
        ...


class AtLeastOnceSink(Sink):
    """Every at-least-once sink topic of one subtask (operator ``operator``); see the module
    docstring. The appender is the subtask's: the sink neither ships nor flushes it."""

    def __init__(self, appender: RecordAppender, *, operator: str) -> None:
        self._appender = appender
        self._operator = operator

    async def open(self, restored: int | None) -> None:
        """Nothing to take up: what was sent is in Kafka, what was not is replayed."""

    def write(self, record: SinkRecord, interval: int) -> None:
        rid = record_id(self._operator, record.source, record.emit_index, record.key, record.value)
        headers = [(RECORD_ID_HEADER, rid.encode())]
        self._appender.add(record.topic, record.partition, record.key, record.value, headers)

    def on_snapshot(self, checkpoint_id: int) -> None:
        """Nothing to keep in state."""

    async def on_completed(self, checkpoint_id: int) -> None:
        """Nothing waits for a completion."""

    def poll(self) -> None:
        """Nothing runs in the background: the subtask's producer sends."""

    async def close(self) -> None:
        """Nothing of its own to release."""

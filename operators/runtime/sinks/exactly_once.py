"""The exactly-once sink: outputs written ahead into state, published when their checkpoint
completes, in one Kafka transaction that also records "published up to n".

`ExactlyOnceSink` drives the `Sink` lifecycle this way:

1. ``open(restored)``: start the `Transactions` (which fences any zombie holding this sink
   subtask's transactional id) and read ``published``, the last checkpoint whose outputs were
   published; refuse to start without a checkpoint when it is above 0 (`SinkProgressError`),
   warn when it is above ``restored`` (outputs replayed in between are published again); then
   publish what ``restored`` holds up to it;
2. ``write(record, interval)``: append the record to the `WriteAheadLog` under ``interval``;
3. ``on_snapshot(n)``: flush the log into the state, so checkpoint ``n`` holds every output of
   intervals ≤ n;
4. ``on_completed(n)``: start publishing, in one transaction in a background task, every
   stored output of an interval in ``(published, n]`` and the progress record
   ``published = n``; the subtask goes on meanwhile (a transaction takes 15-60 ms on the
   development broker, which the subtask's loop used to wait out at every checkpoint);
5. ``poll()``, on every turn of the subtask's loop: once the transaction is committed, delete
   the outputs it published from state (here, never from the task: the loop owns the state)
   and start the next publication if a later checkpoint completed meanwhile; a failed
   transaction raises here and fails the subtask;
6. ``close()``: wait for the publication in flight, then stop the transactional producer.

A ``read_committed`` consumer of the sink therefore sees each output exactly once, one
checkpoint interval after it was produced. A snapshot taken while a publication is in flight
still holds the outputs being published; a restore from it publishes only what the progress
record says was not (`WriteAheadLog.due` drops the rest unsent).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Protocol

from sluicegate.operators.runtime.exceptions import SinkProgressError
from sluicegate.operators.runtime.sinks.contract import Sink, SinkRecord
from sluicegate.operators.runtime.sinks.write_ahead import Due, SinkOutput, WriteAheadLog

__all__ = ["ExactlyOnceSink", "Transactions"]

logger = logging.getLogger(__name__)


class Transactions(Protocol):
    """What the exactly-once sink needs of Kafka (`KafkaTransactions` on a broker)."""

    async def start(self) -> None:
        """Fence older producers of this sink subtask; abort their open transaction."""
        ...

    async def read_published(self) -> int:
        """The last checkpoint whose outputs a committed transaction published; 0 if none."""
        ...

    async def publish(self, outputs: Sequence[SinkOutput], up_to: int) -> None:
        """Send ``outputs`` and "published up to ``up_to``" in one transaction; atomically."""
        ...

    async def stop(self) -> None:
        """Release the producer; safe when `start` failed or never ran."""
        ...


class ExactlyOnceSink(Sink):
    """Every exactly-once sink topic of one subtask; steps in the module docstring."""

    def __init__(self, wal: WriteAheadLog, transactions: Transactions, *, subtask: str) -> None:
        self._wal = wal
        self._transactions = transactions
        self._subtask = subtask
        self.published = 0
        """The newest checkpoint whose outputs are published and gone from state."""
        self._completed = 0
        """The newest checkpoint heard completed."""
        self._publishing: asyncio.Task[Due] | None = None
        """The transaction in flight, and what it publishes."""

    async def open(self, restored: int | None) -> None:
        await self._transactions.start()
        self.published = await self._transactions.read_published()
        logger.info("sink publisher %s: published up to %s", self._subtask, self.published)
        if self.published > (restored or 0):
            if restored is None:
                raise SinkProgressError(self._subtask, self.published)
            logger.warning(
                "%s restores checkpoint %s but checkpoint %s was published: the outputs "
                "replayed in between are published again (duplicates)",
                self._subtask, restored, self.published,
            )  # fmt: skip
        if restored is not None:
            await self._publish(restored)

    def write(self, record: SinkRecord, interval: int) -> None:
        self._wal.append(interval, record.topic, record.partition, record.key, record.value)

    def on_snapshot(self, checkpoint_id: int) -> None:
        """Put every output written so far into the state, which checkpoint
        ``checkpoint_id`` is about to take."""
        self._wal.flush()

    async def on_completed(self, checkpoint_id: int) -> None:
        self._completed = max(self._completed, checkpoint_id)
        self.poll()

    def poll(self) -> None:
        """Settle a finished publication (its failure raises here) and start the next one."""
        if self._publishing is not None:
            if not self._publishing.done():
                return
            publishing, self._publishing = self._publishing, None
            self._settle(publishing.result())
        if self._completed > self.published:
            due = self._wal.due(self._completed, published=self.published)
            self._publishing = asyncio.create_task(self._send(due))

    async def close(self) -> None:
        try:
            if self._publishing is not None:
                # A stop after the final checkpoint: its outputs show before the job stops.
                (outcome,) = await asyncio.gather(self._publishing, return_exceptions=True)
                if isinstance(outcome, BaseException):
                    logger.warning(
                        "%s: publishing up to checkpoint %s failed at close (%r); the next "
                        "attempt publishes it", self._subtask, self._completed, outcome,
                    )  # fmt: skip
        finally:
            await self._transactions.stop()

    async def _publish(self, up_to: int) -> None:
        """Publish the outputs of intervals in ``(published, up_to]`` and wait for it."""
        if up_to > self.published:
            self._settle(await self._send(self._wal.due(up_to, published=self.published)))

    async def _send(self, due: Due) -> Due:
        started = time.perf_counter()
        await self._transactions.publish(due.outputs, due.up_to)
        logger.debug(
            "published %s sink outputs up to checkpoint %s in %.3fs",
            len(due.outputs),
            due.up_to,
            time.perf_counter() - started,
        )
        return due

    def _settle(self, due: Due) -> None:
        """``due`` is committed: its rows leave the state."""
        self._wal.remove(due)
        self.published = due.up_to

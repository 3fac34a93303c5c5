"""The exactly-once sink: outputs written ahead into state, published when their checkpoint
completes, in one Kafka transaction that also records "published up to n".

`ExactlyOnceSink` drives the `Sink` lifecycle this way:

1. ``open(restored)``: start the `Transactions` (which fences any zombie holding this sink
   subtask's transactional id) and read ``published``, the last checkpoint whose outputs were
   published; refuse to start without a checkpoint when it is above 0 (`SinkProgressError`),
   warn when it is above ``restored`` (outputs replayed in between are published again); then
   publish what ``restored`` holds up to it;
2. ``write(record, interval)``: append the record to the `WriteAheadLog` under ``interval``, so
   checkpoint ``n`` holds every output of intervals ≤ n;
3. ``on_snapshot(n)``: nothing; every output is in state since it was written;
4. ``on_completed(n)``: in one transaction, every stored output of an interval in
   ``(published, n]`` and the progress record ``published = n``; then delete the outputs of
   intervals ≤ n from state;
5. ``close()``: stop the transactional producer.

A ``read_committed`` consumer of the sink therefore sees each output exactly once, one
checkpoint interval after it was produced.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Protocol

from operators.runtime.exceptions import SinkProgressError
from operators.runtime.sinks.contract import Sink, SinkRecord
from operators.runtime.sinks.write_ahead import SinkOutput, WriteAheadLog

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
        """The newest checkpoint whose outputs are published."""

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
        """Nothing to do: `write` put every output in state already."""

    async def on_completed(self, checkpoint_id: int) -> None:
        await self._publish(checkpoint_id)

    async def close(self) -> None:
        await self._transactions.stop()

    async def _publish(self, up_to: int) -> int:
        """Publish the outputs of intervals in ``(published, up_to]``; return how many."""
        if up_to <= self.published:
            return 0
        started = time.perf_counter()
        due = self._wal.due(up_to, published=self.published)
        await self._transactions.publish(due.outputs, up_to)
        self._wal.remove(due)
        logger.debug(
            "published %s sink outputs up to checkpoint %s in %.3fs",
            len(due.outputs),
            up_to,
            time.perf_counter() - started,
        )
        self.published = up_to
        return len(due.outputs)

"""How the Kafka journal hands its entries to the producer: one batch per partition a turn.

aiokafka's ``send`` costs about 10 µs of Python a record (a coroutine, a future, a metadata
check, an accumulator lookup); a durable agent step writes four entries (``issued`` and
``done`` of its model call and of its tool call) and twenty runs step at once. `Outbox.add`
queues an entry without I/O and returns the future of its acknowledgement; the entries added
in one turn of the event loop are handed over together by one task, as one ``BatchBuilder`` a
partition (``send_batch``), and each batch's acknowledgement settles its entries in one
callback. What reaches Kafka is the same records in the same order: the turns hand over one
after another, and a partition's entries go in the order they were added.

Every entry is reported to ``settle`` exactly once, with the error its batch met (``None``:
acknowledged by every in-sync replica), whether or not its writer still awaits it: a writer
cancelled while its entry is in flight does not stop the journal from learning the entry's
fate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from aiokafka.errors import KafkaError

from sluicegate.agents.journal.entries import JournalEntry, record_key
from sluicegate.operators.runtime.batches import BatchProducer

__all__ = ["Outbox", "Settle"]

Settle = Callable[[JournalEntry, int, BaseException | None], BaseException | None]
"""Called for every entry once its batch is acknowledged (error ``None``) or failed; returns
the error its writer sees (``None``: the write succeeded)."""

_Item = tuple[JournalEntry, "asyncio.Future[None]"]


class Outbox:
    """Entries for ``topic``, gathered for one hand-over a turn; see the module docstring."""

    def __init__(self, producer: BatchProducer, topic: str, settle: Settle) -> None:
        self._producer, self._topic, self._settle = producer, topic, settle
        self._turn: dict[int, list[_Item]] = {}
        self._turns = asyncio.Lock()  # turns hand over one at a time, in the order they began
        self._handing: set[asyncio.Task[None]] = set()

    def add(self, entry: JournalEntry, partition: int) -> asyncio.Future[None]:
        """Queue ``entry`` for ``partition`` behind every entry added before it; the future
        completes once it is settled (with the error ``settle`` returned, if any)."""
        written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self._turn:
            task = asyncio.ensure_future(self._hand_over())
            self._handing.add(task)
            task.add_done_callback(self._handing.discard)
        self._turn.setdefault(partition, []).append((entry, written))
        return written

    async def _hand_over(self) -> None:
        turn, self._turn = self._turn, {}
        async with self._turns:
            batches = [
                b for partition, items in turn.items() for b in self._batches(partition, items)
            ]
            for n, (partition, batch, members) in enumerate(batches):
                try:
                    acked = await self._producer.send_batch(batch, self._topic, partition=partition)
                except KafkaError as exc:  # refused at hand-over: this batch is not sent
                    self._settle_all(partition, members, exc)
                    continue
                except BaseException as exc:  # cancelled, or a defect: settle what is left
                    for partition_left, _, members_left in batches[n:]:
                        self._settle_all(partition_left, members_left, exc)
                    raise
                acked.add_done_callback(partial(self._acknowledged, partition, members))

    def _batches(
        self, partition: int, items: list[_Item]
    ) -> Iterator[tuple[int, Any, list[_Item]]]:
        """``items`` in batches for ``partition``, in order, each as full as it takes."""
        batch, members = self._producer.create_batch(), list[_Item]()
        for entry, written in items:
            key, value = record_key(entry.key, entry.status), entry.encode()
            if batch.append(key=key, value=value, timestamp=None, headers=[]) is None:
                yield partition, batch, members
                batch, members = self._producer.create_batch(), []
                # An empty batch takes any record; one too large for Kafka fails when sent.
                batch.append(key=key, value=value, timestamp=None, headers=[])
            members.append((entry, written))
        yield partition, batch, members

    def _acknowledged(
        self, partition: int, members: list[_Item], acked: asyncio.Future[Any]
    ) -> None:
        if acked.cancelled():  # the producer dropped the batch (it was stopped)
            self._settle_all(partition, members, asyncio.CancelledError("batch dropped"))
        else:
            self._settle_all(partition, members, acked.exception())

    def _settle_all(
        self, partition: int, members: list[_Item], error: BaseException | None
    ) -> None:
        for entry, written in members:
            seen = self._settle(entry, partition, error)
            if written.done():  # its writer gave up waiting
                continue
            if seen is None:
                written.set_result(None)
            else:
                written.set_exception(seen)

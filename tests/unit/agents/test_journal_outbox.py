"""`Outbox`: the journal's entries of one turn go as one batch a partition, in order, and each
entry is settled exactly once with its batch's fate, whether or not its writer still waits."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError

from sluicegate.agents.journal import EffectKind, JournalEntry, effect_key, record_key
from sluicegate.agents.journal.outbox import Outbox


def entry(run: str, status: str = "issued") -> JournalEntry:
    return JournalEntry.model_validate(
        {"key": effect_key(run, 0, 0), "run_id": run, "status": status,
         "kind": EffectKind.TOOL, "name": "refund", "attempt": 1, "written_at": 1.0}
    )  # fmt: skip


class Batch:
    """Holds at most ``size`` records, like a full aiokafka batch (an empty one takes any)."""

    def __init__(self, size: int) -> None:
        self.size, self.keys = size, list[bytes]()

    def append(
        self, *, timestamp: int | None, key: bytes | None, value: bytes, headers: Sequence[Any]
    ) -> object | None:
        if len(self.keys) >= self.size:
            return None
        assert key is not None
        assert JournalEntry.decode(value).key in key.decode()
        self.keys.append(key)
        return object()


class Producer:
    """Records each batch handed over; acknowledges them when told (``ack``), or fails them."""

    def __init__(self, size: int = 3) -> None:
        self.size = size
        self.sent: list[tuple[int, list[bytes]]] = []
        self.acks: list[asyncio.Future[None]] = []

    def create_batch(self) -> Batch:
        return Batch(self.size)

    async def send_batch(self, batch: Batch, topic: str, *, partition: int) -> Any:
        assert topic == "journal"
        self.sent.append((partition, batch.keys))
        self.acks.append(asyncio.get_running_loop().create_future())
        return self.acks[-1]


class Settled:
    """The ``settle`` callback: records every call; the writer sees a wrapped error."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, str | None]] = []

    def __call__(
        self, e: JournalEntry, partition: int, error: BaseException | None
    ) -> BaseException | None:
        self.calls.append((e.run_id, partition, None if error is None else type(error).__name__))
        return None if error is None else RuntimeError(f"seen: {error!r}")


async def turn() -> None:
    for _ in range(3):  # the hand-over task runs on the next turn
        await asyncio.sleep(0)


async def test_one_turn_goes_as_one_batch_a_partition_in_the_order_added() -> None:
    producer, settled = Producer(size=3), Settled()
    outbox = Outbox(producer, "journal", settled)
    entries = [(entry(f"r{n}"), n % 2) for n in range(8)]
    writes = [outbox.add(e, p) for e, p in entries]
    assert producer.sent == []  # nothing is handed over before the turn ends
    await turn()
    keys = {p: [record_key(e.key, e.status) for e, q in entries if q == p] for p in (0, 1)}
    # Partition 0's four entries fill a batch of three and start another, in order.
    assert producer.sent == [(0, keys[0][:3]), (0, keys[0][3:]), (1, keys[1][:3]), (1, keys[1][3:])]
    assert not any(w.done() for w in writes)
    for ack in producer.acks:
        ack.set_result(None)
    await asyncio.gather(*writes)
    assert sorted(settled.calls) == sorted((e.run_id, p, None) for e, p in entries)


async def test_a_later_turn_is_handed_over_after_the_earlier_one() -> None:
    producer, settled = Producer(), Settled()
    outbox = Outbox(producer, "journal", settled)
    first = outbox.add(entry("a"), 0)
    await turn()
    second = outbox.add(entry("b"), 0)
    await turn()
    assert [keys for _, keys in producer.sent] == [
        [record_key(entry("a").key, "issued")], [record_key(entry("b").key, "issued")]
    ]  # fmt: skip
    for ack in producer.acks:
        ack.set_result(None)
    await asyncio.gather(first, second)


async def test_a_failed_batch_fails_its_entries_only_and_each_is_settled_once() -> None:
    producer, settled = Producer(), Settled()
    outbox = Outbox(producer, "journal", settled)
    lost, kept = outbox.add(entry("lost"), 0), outbox.add(entry("kept"), 1)
    await turn()
    producer.acks[0].set_exception(KafkaTimeoutError())
    producer.acks[1].set_result(None)
    with pytest.raises(RuntimeError, match="seen: KafkaTimeoutError"):
        await lost
    await kept
    assert sorted(settled.calls) == [("kept", 1, None), ("lost", 0, "KafkaTimeoutError")]


async def test_a_writer_that_stops_waiting_does_not_stop_the_entry_being_settled() -> None:
    producer, settled = Producer(), Settled()
    outbox = Outbox(producer, "journal", settled)
    waiting = asyncio.ensure_future(outbox.add(entry("gone", "done"), 0))
    await turn()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    producer.acks[0].set_result(None)
    await turn()
    assert settled.calls == [("gone", 0, None)]  # durable: the journal learns it all the same


async def test_a_dropped_batch_settles_its_entries_with_an_error() -> None:
    producer, settled = Producer(), Settled()
    outbox = Outbox(producer, "journal", settled)
    write = outbox.add(entry("dropped"), 0)
    await turn()
    producer.acks[0].cancel()  # what a stopped producer does to the batches it held
    with pytest.raises(RuntimeError, match="seen: CancelledError"):
        await write
    assert settled.calls == [("dropped", 0, "CancelledError")]

"""`ExactlyOnceSink` against an in-memory state and fake transactions: outputs become visible
only on completion, once, with "published up to n" in the same transaction; the transaction
runs beside the subtask's loop, and only the loop (``poll``) changes the state."""

from __future__ import annotations

import asyncio
import logging

import pytest

from sluicegate.operators.runtime.exceptions import SinkProgressError
from sluicegate.operators.runtime.sinks.contract import SinkRecord
from sluicegate.operators.runtime.sinks.exactly_once import ExactlyOnceSink
from sluicegate.operators.runtime.sinks.write_ahead import WriteAheadLog
from tests.unit.operators.runtime.sinks.fakes import FakeTransactions, MemoryState


def sink_over(state: MemoryState, published: int = 0) -> tuple[ExactlyOnceSink, FakeTransactions]:
    transactions = FakeTransactions(published=published)
    return ExactlyOnceSink(WriteAheadLog(state), transactions, subtask="op#0"), transactions


def out(value: bytes, topic: str = "out", partition: int = 0) -> SinkRecord:
    return SinkRecord(topic, partition, b"k", value, source=None, emit_index=0)


async def complete(sink: ExactlyOnceSink, checkpoint_id: int) -> None:
    """``completed(checkpoint_id)``, then turns of the subtask's loop until it is published."""
    await sink.on_completed(checkpoint_id)
    for _ in range(10):
        await asyncio.sleep(0)  # the publication's task runs
        sink.poll()
        if sink.published >= checkpoint_id:
            return


async def test_outputs_are_published_when_their_checkpoint_completes() -> None:
    sink, kafka = sink_over(MemoryState())
    await sink.open(None)
    sink.write(out(b"a"), 1)
    sink.write(out(b"b", topic="other", partition=2), 1)
    sink.on_snapshot(1)
    sink.write(out(b"c"), 2)
    assert kafka.committed == []  # nothing shows before completion

    await complete(sink, 1)
    assert kafka.committed == [([("out", 0, b"k", b"a"), ("other", 2, b"k", b"b")], 1)]
    await complete(sink, 2)
    assert kafka.committed[1] == ([("out", 0, b"k", b"c")], 2)
    assert sink.published == 2


async def test_outputs_are_in_the_state_when_a_snapshot_takes_it() -> None:
    state = MemoryState()
    sink, _ = sink_over(state)
    await sink.open(None)
    sink.write(out(b"a"), 1)
    sink.write(out(b"b"), 1)
    assert state.rows == {}  # kept in memory until the checkpoint's sync phase
    sink.on_snapshot(1)
    assert [v for *_, v in WriteAheadLog(state).due(1, published=0).outputs] == [b"a", b"b"]
    assert len(state.rows) == 1  # one row for the interval's outputs


async def test_published_outputs_leave_the_state() -> None:
    state = MemoryState()
    sink, _ = sink_over(state)
    await sink.open(None)
    sink.write(out(b"a"), 1)
    sink.write(out(b"b"), 2)
    await complete(sink, 1)
    assert len(state.rows) == 1
    await complete(sink, 2)
    assert state.rows == {}


async def test_an_aborted_checkpoint_is_published_with_the_next_completed_one() -> None:
    sink, kafka = sink_over(MemoryState())
    await sink.open(None)
    sink.write(out(b"a"), 1)
    sink.write(out(b"b"), 2)  # checkpoint 1 was aborted: no completed(1)
    await complete(sink, 2)
    assert kafka.committed == [([("out", 0, b"k", b"a"), ("out", 0, b"k", b"b")], 2)]


async def test_a_completion_at_or_below_published_sends_nothing() -> None:
    sink, kafka = sink_over(MemoryState())
    await sink.open(None)
    sink.write(out(b"a"), 1)
    await complete(sink, 1)
    await complete(sink, 1)
    assert len(kafka.committed) == 1


async def test_a_failed_transaction_keeps_the_outputs_for_the_next_attempt() -> None:
    state = MemoryState()
    sink, kafka = sink_over(state)
    await sink.open(None)
    sink.write(out(b"a"), 1)
    kafka.fail = True
    await sink.on_completed(1)  # the transaction runs beside the loop: no failure known yet
    await asyncio.sleep(0)
    with pytest.raises(ConnectionError):
        sink.poll()  # the loop's next turn
    assert sink.published == 0
    assert len(state.rows) == 1

    # The next attempt restores checkpoint 1 (which holds the output) and publishes it.
    successor, kafka2 = sink_over(state, published=kafka.published)
    await successor.open(1)
    assert kafka2.committed == [([("out", 0, b"k", b"a")], 1)]
    assert state.rows == {}


async def test_a_restore_publishes_what_its_checkpoint_holds_unpublished() -> None:
    state = MemoryState()
    sink, _ = sink_over(state)
    await sink.open(None)
    sink.write(out(b"a"), 1)
    sink.write(out(b"b"), 2)
    await complete(sink, 1)
    # Crash after checkpoint 2 completed, before its outputs were published.
    successor, kafka = sink_over(state, published=1)
    await successor.open(2)
    assert kafka.started
    assert kafka.committed == [([("out", 0, b"k", b"b")], 2)]
    assert successor.published == 2


async def test_a_restore_behind_the_published_mark_drops_published_outputs_unsent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = MemoryState()
    sink, _ = sink_over(state)
    await sink.open(None)
    sink.write(out(b"a"), 1)
    # Checkpoint 1 is restored although 3 was published (its manifest was found corrupt).
    successor, kafka = sink_over(state, published=3)
    with caplog.at_level(logging.WARNING):
        await successor.open(1)
    assert "published again (duplicates)" in caplog.text
    assert kafka.committed == []
    successor.write(out(b"replayed"), 4)
    await complete(successor, 4)
    assert kafka.committed == [([("out", 0, b"k", b"replayed")], 4)]
    assert state.rows == {}


async def test_starting_without_a_checkpoint_after_a_publication_is_refused() -> None:
    sink, _ = sink_over(MemoryState(), published=5)
    with pytest.raises(SinkProgressError) as raised:
        await sink.open(None)
    assert (raised.value.subtask, raised.value.published) == ("op#0", 5)


async def test_close_stops_the_transactions_also_without_open() -> None:
    sink, kafka = sink_over(MemoryState())
    await sink.close()
    assert kafka.stopped


async def test_the_loop_goes_on_while_the_transaction_is_in_flight() -> None:
    state = MemoryState()
    sink, kafka = sink_over(state)
    await sink.open(None)
    sink.write(out(b"a"), 1)
    kafka.hold = asyncio.Event()
    await sink.on_completed(1)  # returns with the transaction open
    await asyncio.sleep(0)
    sink.write(out(b"b"), 2)  # the operator keeps writing meanwhile
    sink.on_snapshot(2)  # and the next checkpoint takes its state
    sink.poll()
    assert kafka.committed == []
    assert sink.published == 0
    assert len(state.rows) == 2  # nothing leaves the state before the commit

    kafka.hold.set()
    await asyncio.sleep(0)
    assert kafka.committed == [([("out", 0, b"k", b"a")], 1)]
    assert len(state.rows) == 2  # committed, but the state waits for the loop
    sink.poll()
    assert sink.published == 1
    assert len(state.rows) == 1


async def test_completions_during_a_transaction_are_published_together_after_it() -> None:
    sink, kafka = sink_over(MemoryState())
    await sink.open(None)
    kafka.hold = asyncio.Event()
    for interval in (1, 2, 3):
        sink.write(out(b"%d" % interval), interval)
    await sink.on_completed(1)
    await asyncio.sleep(0)
    await sink.on_completed(2)
    await sink.on_completed(3)
    kafka.hold.set()
    await complete(sink, 3)
    assert kafka.committed == [
        ([("out", 0, b"k", b"1")], 1),
        ([("out", 0, b"k", b"2"), ("out", 0, b"k", b"3")], 3),
    ]


async def test_close_waits_for_the_transaction_in_flight() -> None:
    sink, kafka = sink_over(MemoryState())
    await sink.open(None)
    sink.write(out(b"final"), 1)
    kafka.hold = asyncio.Event()
    await sink.on_completed(1)  # the final checkpoint of a graceful stop
    closing = asyncio.create_task(sink.close())
    await asyncio.sleep(0)
    assert not closing.done()
    assert not kafka.stopped
    kafka.hold.set()
    await closing
    assert kafka.committed == [([("out", 0, b"k", b"final")], 1)]
    assert kafka.stopped


async def test_close_reports_a_failed_transaction_and_still_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink, kafka = sink_over(MemoryState())
    await sink.open(None)
    sink.write(out(b"a"), 1)
    kafka.fail = True
    await sink.on_completed(1)
    with caplog.at_level(logging.WARNING):
        await sink.close()
    assert "publishing up to checkpoint 1 failed at close" in caplog.text
    assert "the next attempt publishes it" in caplog.text
    assert kafka.stopped
    assert kafka.committed == []

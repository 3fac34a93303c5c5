"""`AtLeastOnceSink` against a fake producer: records go out at once, each with an id that a
replay reproduces."""

from __future__ import annotations

from sluicegate.operators.contract import Record
from sluicegate.operators.runtime.sinks.at_least_once import (
    RECORD_ID_HEADER,
    AtLeastOnceSink,
    record_id,
)
from sluicegate.operators.runtime.sinks.contract import SinkRecord
from tests.unit.operators.runtime.sinks.fakes import FakeSender

SOURCE = Record(topic="in", partition=3, offset=41, key=b"k", value=b"v", timestamp_ms=0)


async def test_records_go_out_at_once_with_their_id() -> None:
    producer = FakeSender()
    sink = AtLeastOnceSink(producer, operator="op")
    await sink.open(None)
    sink.write(SinkRecord("out", 1, b"k", b"A", source=SOURCE, emit_index=2), 7)
    assert producer.sent == [("out", 1, b"k", b"A", [(RECORD_ID_HEADER, b"op/in/3/41/2")])]


async def test_the_lifecycle_sends_nothing_more() -> None:
    producer = FakeSender()
    sink = AtLeastOnceSink(producer, operator="op")
    await sink.open(4)
    sink.on_snapshot(5)
    await sink.on_completed(5)
    await sink.close()
    assert producer.sent == []


async def test_a_replay_sends_the_same_ids() -> None:
    def ids(producer: FakeSender) -> list[bytes]:
        return [dict(headers)[RECORD_ID_HEADER] for *_, headers in producer.sent]

    first, replay = FakeSender(), FakeSender()
    for producer, interval in ((first, 3), (replay, 9)):  # another attempt, another interval
        sink = AtLeastOnceSink(producer, operator="op")
        sink.write(SinkRecord("out", 0, None, b"x", source=SOURCE, emit_index=0), interval)
        sink.write(SinkRecord("out", 0, b"w", b"y", source=None, emit_index=0), interval)
    assert ids(first) == ids(replay)
    assert len(set(ids(first))) == 2


def test_a_wake_up_output_is_named_by_its_content() -> None:
    one = record_id("op", None, 0, b"k", b"v")
    assert one.startswith("op/wake/")
    assert len(one) == len("op/wake/") + 32
    assert record_id("op", None, 5, b"k", b"v") == one
    assert record_id("op", None, 0, b"k", b"w") != one
    assert record_id("op", None, 0, None, b"v") != one

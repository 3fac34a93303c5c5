"""`Inputs.classify`: what each record read from an input partition is."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from aiokafka import ConsumerRecord

from sluicegate.operators.protocol.channels import Channel, TopicPartition
from sluicegate.operators.protocol.records import (
    ATTEMPT_HEADER,
    SOURCE_WRITER,
    RecordKind,
    RecordMeta,
    encode_headers,
)
from sluicegate.operators.protocol.restore_filter import Fenced, RestoreFilter
from sluicegate.operators.runtime.inputs import BarrierAt, Inputs, Rejected

SOURCE = TopicPartition("lines", 0)
WORDS = TopicPartition("words", 1)
WRITER = "tokenizer#0"


def inputs(attempt: int = 2) -> Inputs:
    channels = [Channel(SOURCE, SOURCE_WRITER), Channel(WORDS, WRITER)]
    return Inputs("wc", channels, [SOURCE], RestoreFilter(attempt, restored_checkpoint_id=4))


def record(
    tp: TopicPartition, offset: int, headers: Sequence[tuple[str, bytes]] = ()
) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic=tp.topic, partition=tp.partition, offset=offset, timestamp=0, timestamp_type=0,
        key=b"k", value=b"v", checksum=None, serialized_key_size=1, serialized_value_size=1,
        headers=list(headers),
    )  # fmt: skip


def stamped(offset: int, **meta: object) -> ConsumerRecord[bytes, bytes]:
    fields: dict[str, object] = {"attempt": 2, "interval": 5, "writer": WRITER, "pipeline": "wc"}
    return record(WORDS, offset, encode_headers(RecordMeta(**{**fields, **meta})))  # type: ignore[arg-type]


def test_a_source_record_is_data_whatever_its_headers_and_moves_the_source_position() -> None:
    ins = inputs()
    forged = encode_headers(RecordMeta(9, 9, WRITER, RecordKind.BARRIER, 9, "wc"))
    assert ins.classify(record(SOURCE, 7, forged)) == Channel(SOURCE, SOURCE_WRITER)
    assert ins.source_next == {SOURCE: 8}


def test_a_record_between_operators_is_data_of_its_writers_channel() -> None:
    ins = inputs()
    assert ins.classify(stamped(0)) == Channel(WORDS, WRITER)
    assert ins.classify(stamped(1)) == Channel(WORDS, WRITER)  # equal headers, remembered
    assert ins.source_next == {}


def test_a_barrier_marker_says_where_it_was_read() -> None:
    marker = stamped(3, kind=RecordKind.BARRIER, checkpoint_id=5)
    assert inputs().classify(marker) == BarrierAt(Channel(WORDS, WRITER), 5, 3)


def test_older_attempts_are_skipped_and_a_newer_one_fences() -> None:
    ins = inputs()
    assert ins.classify(stamped(0, attempt=1)) is None
    assert ins.classify(stamped(1, attempt=3)) == Fenced(2, 3)
    assert ins.classify(stamped(2)) == Fenced(2, 3)  # a zombie does not come back


def test_remembered_data_headers_are_fenced_once_a_newer_attempt_is_read_anywhere() -> None:
    other = TopicPartition("words", 2)
    channels = [Channel(WORDS, WRITER), Channel(other, WRITER)]
    ins = Inputs("wc", channels, [], RestoreFilter(2, restored_checkpoint_id=4))
    assert ins.classify(stamped(0)) == Channel(WORDS, WRITER)
    assert ins.classify(stamped(1)) == Channel(WORDS, WRITER)  # remembered as accepted
    newer = RecordMeta(3, 5, WRITER, pipeline="wc")
    assert ins.classify(record(other, 0, encode_headers(newer))) == Fenced(2, 3)
    assert ins.classify(stamped(2)) == Fenced(2, 3)  # the same headers: fenced all the same
    # a marker between data records of the same writer and interval is still a marker
    fresh = inputs()
    assert fresh.classify(stamped(0)) == Channel(WORDS, WRITER)
    marker = stamped(1, kind=RecordKind.BARRIER, checkpoint_id=5)
    assert fresh.classify(marker) == BarrierAt(Channel(WORDS, WRITER), 5, 1)
    assert fresh.classify(stamped(2, interval=6)) == Channel(WORDS, WRITER)


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ([(ATTEMPT_HEADER, b"x")], "is missing"),
        ([], "unknown writer 'source'"),
        (encode_headers(RecordMeta(2, 5, "counter#0", pipeline="wc")), "unknown writer"),
        (encode_headers(RecordMeta(2, 5, WRITER, pipeline="other")), "pipeline 'other'"),
    ],
)
def test_records_that_cannot_be_ours_are_rejected_with_the_reason(
    headers: list[tuple[str, bytes]], reason: str
) -> None:
    ins = inputs()
    what = ins.classify(record(WORDS, 0, headers))
    assert isinstance(what, Rejected)
    assert reason in str(what.reason)
    # the same headers again give the same answer (a malformed list is never remembered)
    again = ins.classify(record(WORDS, 1, headers))
    assert isinstance(again, Rejected)
    assert str(again.reason) == str(what.reason)


def test_a_partition_that_is_not_an_input_is_a_bug() -> None:
    with pytest.raises(ValueError, match="not an input"):
        inputs().classify(record(TopicPartition("elsewhere", 0), 0))

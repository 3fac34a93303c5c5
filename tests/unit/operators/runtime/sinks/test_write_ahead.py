"""The write-ahead log of an exactly-once sink: its stored form and what publishing takes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from sluicegate.operators.runtime.sinks.write_ahead import (
    CHUNK_OUTPUTS,
    SinkOutput,
    WriteAheadLog,
    decode_chunk,
    decode_output,
    encode_chunk,
    encode_output,
)
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.state.store import PartitionState
from tests.unit.operators.runtime.sinks.fakes import MemoryState


@given(
    topic=st.from_regex(r"[a-zA-Z0-9._-]{1,249}", fullmatch=True),
    partition=st.integers(0, 2**31 - 1),
    key=st.none() | st.binary(max_size=64),
    value=st.binary(max_size=256),
)
def test_an_output_reads_back_as_written(
    topic: str, partition: int, key: bytes | None, value: bytes
) -> None:
    assert decode_output(encode_output(topic, partition, key, value)) == (
        topic,
        partition,
        key,
        value,
    )


def test_an_empty_key_is_not_no_key() -> None:
    assert decode_output(encode_output("t", 0, b"", b"v"))[2] == b""
    assert decode_output(encode_output("t", 0, None, b"v"))[2] is None


def test_an_unknown_format_is_refused() -> None:
    stored = bytearray(encode_output("t", 0, b"k", b"v"))
    stored[0] = 2
    with pytest.raises(ValueError, match="format 2"):
        decode_output(bytes(stored))


_OUTPUT = st.tuples(
    st.from_regex(r"[a-zA-Z0-9._-]{1,249}", fullmatch=True),
    st.integers(0, 2**31 - 1),
    st.none() | st.binary(max_size=64),
    st.binary(max_size=256),
)


@given(outputs=st.lists(_OUTPUT, min_size=1, max_size=20))
def test_a_chunk_reads_back_as_written(outputs: list[SinkOutput]) -> None:
    assert decode_chunk(encode_chunk(outputs)) == outputs


@given(outputs=st.lists(_OUTPUT, min_size=1, max_size=5), data=st.data())
def test_a_chunk_cut_anywhere_or_extended_is_refused(
    outputs: list[SinkOutput], data: st.DataObject
) -> None:
    stored = encode_chunk(outputs)
    cut = data.draw(st.integers(0, len(stored) - 1))
    with pytest.raises(ValueError, match=r"cut short|not a chunk"):
        decode_chunk(stored[:cut])
    with pytest.raises(ValueError, match="overlong"):
        decode_chunk(stored + data.draw(st.binary(min_size=1, max_size=8)))


def test_rows_of_one_output_a_row_are_still_read() -> None:
    """Checkpoints of builds before chunks hold format 1 rows; they publish as before."""
    state = MemoryState()
    old = WriteAheadLog(state)
    old._state.put(b"sink-wal/" + (1).to_bytes(8, "big") + (0).to_bytes(8, "big"),
                   encode_output("out", 0, b"a", b"1a"))  # fmt: skip
    old._state.put(b"sink-wal/" + (1).to_bytes(8, "big") + (1).to_bytes(8, "big"),
                   encode_output("out", 1, None, b"1b"))  # fmt: skip
    wal = WriteAheadLog(state)
    wal.append(2, "out", 0, b"b", b"2a")
    due = wal.due(2, published=0)
    assert due.outputs == [
        ("out", 0, b"a", b"1a"),
        ("out", 1, None, b"1b"),
        ("out", 0, b"b", b"2a"),
    ]
    wal.remove(due)
    assert state.rows == {}


def test_a_full_chunk_goes_into_the_state_at_once() -> None:
    state = MemoryState()
    wal = WriteAheadLog(state)
    for i in range(CHUNK_OUTPUTS + 1):
        wal.append(1, "out", 0, None, b"%d" % i)
    assert len(state.rows) == 1  # the full chunk; the last output waits for a flush
    wal.flush()
    assert len(state.rows) == 2
    assert [int(v) for *_, v in wal.due(1, published=0).outputs] == list(range(CHUNK_OUTPUTS + 1))


def fill(wal: WriteAheadLog) -> None:
    # Written out of interval order, as a restore followed by new writes may leave them.
    wal.append(3, "out", 0, b"c", b"3a")
    wal.append(1, "out", 1, b"a", b"1a")
    wal.append(1, "other", 0, None, b"1b")
    wal.append(2, "out", 0, b"b", b"2a")
    wal.append(3, "out", 0, b"c", b"3b")


def test_due_lists_outputs_by_interval_then_write_order() -> None:
    wal = WriteAheadLog(MemoryState())
    fill(wal)
    due = wal.due(3, published=0)
    assert [value for *_, value in due.outputs] == [b"1a", b"1b", b"2a", b"3a", b"3b"]
    assert due.outputs[1] == ("other", 0, None, b"1b")


def test_due_takes_intervals_up_to_and_skips_published_ones() -> None:
    wal = WriteAheadLog(MemoryState())
    fill(wal)
    due = wal.due(2, published=1)
    assert [value for *_, value in due.outputs] == [b"2a"]
    assert len(due.keys) == 2  # the row of interval 1 goes too: it was published before


def test_remove_deletes_what_was_due_and_keeps_later_intervals() -> None:
    state = MemoryState()
    wal = WriteAheadLog(state)
    fill(wal)
    wal.remove(wal.due(2, published=0))
    assert [value for *_, value in wal.due(10, published=0).outputs] == [b"3a", b"3b"]
    wal.append(3, "out", 0, None, b"3c")  # the sequence of a kept interval goes on
    wal.append(2, "out", 0, None, b"2b")  # a removed interval starts again at 0
    assert [value for *_, value in wal.due(10, published=0).outputs] == [
        b"2b",
        b"3a",
        b"3b",
        b"3c",
    ]
    wal.remove(wal.due(10, published=0))
    assert state.rows == {}


def test_the_log_lives_in_the_state_it_is_given(tmp_path: Path) -> None:
    """The same rows in RocksDB's metadata area, where a snapshot takes them, and back."""
    store = RocksDBStateStore.open(tmp_path / "db")
    try:
        metadata: PartitionState = store.metadata()
        written = WriteAheadLog(metadata)
        fill(written)
        written.flush()  # as the sink's on_snapshot does
        restored = WriteAheadLog(store.metadata())  # a new log over the same state
        assert len(restored.due(3, published=0).outputs) == 5
        restored.append(4, "out", 0, None, b"4a")
        assert [v for *_, v in restored.due(4, published=2).outputs] == [b"3a", b"3b", b"4a"]
    finally:
        store.close()


def test_due_decodes_only_rows_it_did_not_put() -> None:
    """The rows this log put are published from the outputs it kept (no decoding); a row
    restored from a checkpoint, which a new log finds, is decoded (and refused if it does not
    read)."""
    state = MemoryState()
    wal = WriteAheadLog(state)
    fill(wal)
    wal.flush()
    for key in state.rows:
        state.rows[key] = b"\x02 not a chunk"
    assert [value for *_, value in wal.due(3, published=0).outputs] == [
        b"1a", b"1b", b"2a", b"3a", b"3b"
    ]  # fmt: skip
    with pytest.raises(ValueError, match="cut short"):
        WriteAheadLog(state).due(3, published=0)

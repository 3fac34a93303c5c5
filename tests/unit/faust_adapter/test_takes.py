"""The buffer of ``stream.take`` as rows of keyed state (`faust_adapter.takes`): records kept
byte for byte in offset order, the header, and rows that do not parse refused."""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import given, strategies as st

from sluicegate.faust_adapter.batching import EMPTY, Pending
from sluicegate.faust_adapter.exceptions import AgentStepError
from sluicegate.faust_adapter.takes import TAKE_PREFIX, TakeBuffer
from sluicegate.operators.contract import Record
from tests.unit.faust_adapter.runner import DictState


def record(offset: int, key: bytes | None, value: bytes, ts: int = 1_700_000_000_123) -> Record:
    return Record("numbers", 2, offset, key, value, ts)


def test_records_come_back_oldest_first_as_read_and_leave_the_buffer() -> None:
    state = DictState()
    buffer = TakeBuffer(state, "agent")
    # offsets out of their byte order as text (9 < 10 < 256): the row key orders them as numbers
    for r in (record(256, b"k", b"3"), record(9, None, b"1"), record(10, b"", b"2")):
        buffer.append(r)
    assert buffer.take(2, "numbers", 2) == [record(9, None, b"1"), record(10, b"", b"2")]
    assert buffer.take(1, "numbers", 2) == [record(256, b"k", b"3")]
    assert [k for k in state.rows if k.startswith(TAKE_PREFIX + b"values/")] == []


def test_the_header_round_trips_and_an_empty_buffer_has_no_row() -> None:
    state = DictState()
    buffer = TakeBuffer(state, "agent")
    assert buffer.pending() == EMPTY
    buffer.save(Pending(4, 1_700_000_001.25))
    assert buffer.pending() == Pending(4, 1_700_000_001.25)
    buffer.save(Pending(2, None))
    assert buffer.pending() == Pending(2, None)
    buffer.save(EMPTY)
    assert state.rows == {}


@given(
    st.lists(
        st.tuples(st.one_of(st.none(), st.binary(max_size=20)), st.binary(max_size=40),
                  st.integers(-(2**40), 2**40)),
        max_size=20,
    )
)  # fmt: skip
def test_any_key_value_and_timestamp_round_trip(
    rows: list[tuple[bytes | None, bytes, int]],
) -> None:
    buffer = TakeBuffer(DictState(), "agent")
    records = [record(i, key, value, ts) for i, (key, value, ts) in enumerate(rows)]
    for r in records:
        buffer.append(r)
    assert buffer.take(len(records), "numbers", 2) == records


@pytest.mark.parametrize(
    ("row", "data", "problem"),
    [
        (b"pending", b"\x00\x00", "a header of 2 bytes"),
        (b"values/" + struct.pack(">Q", 1), b"\x00" * 5, "a value row of 8+5 bytes"),
        (b"values/\x01", b"\x00" * 12, "a value row of 1+12 bytes"),
        (b"values/" + struct.pack(">Q", 1), struct.pack(">qI", 0, 99) + b"ab", "a key of 98"),
    ],
)
def test_rows_that_do_not_parse_are_an_error_not_a_guess(
    row: bytes, data: bytes, problem: str
) -> None:
    state = DictState()
    state.put(TAKE_PREFIX + row, data)
    buffer = TakeBuffer(state, "agent")
    read = buffer.pending if row == b"pending" else lambda: buffer.take(1, "numbers", 2)
    with pytest.raises(AgentStepError, match=re.escape(problem)):
        read()


def test_a_header_counting_more_than_the_rows_is_an_error() -> None:
    buffer = TakeBuffer(DictState(), "agent")
    buffer.append(record(1, None, b"1"))
    with pytest.raises(AgentStepError, match="1 values buffered, the header says 2"):
        buffer.take(2, "numbers", 2)

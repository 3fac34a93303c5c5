"""The buffer of ``stream.take(...)``: the records not yet yielded, as rows of keyed state.

A barrier snapshots a partition's state together with its read position, which is past every
record the buffer holds. So the buffer must be in the snapshot, or a crash would lose the
values buffered before it (the restored position is past them) and the checkpoint would not
hold the effects of every record before its position. Flushing the buffer at each barrier
would keep that too, but would make batch contents depend on when checkpoints happen; keeping
the buffer in state makes batches the same with checkpoints or without, and a restored
buffer continues where it was (its deadline re-armed, `batching.TakeRule.restored`).

Rows of the partition's state (beside the tables' ``faust-table/`` rows):

* ``faust-take/pending``: the `batching.Pending` header, 4 bytes count + 8 bytes deadline
  (a big-endian double; NaN: none);
* ``faust-take/values/<offset, 8 bytes big-endian>``: one per buffered record, in offset
  order: 8 bytes timestamp (ms), 4 bytes key length + 1 (0: no key), the key, the value.

The record's bytes are kept as read, and decoded again when its batch is yielded (a record
that does not decode is dead-lettered when it arrives, before it is buffered). Rows that do
not parse are an `AgentStepError`, never a guess.
"""

from __future__ import annotations

import math
import struct

from sluicegate.faust_adapter.batching import EMPTY, Pending
from sluicegate.faust_adapter.exceptions import AgentStepError
from sluicegate.operators.contract import Record
from sluicegate.operators.state.store import PartitionState

__all__ = ["TAKE_PREFIX", "TakeBuffer"]

TAKE_PREFIX = b"faust-take/"
_PENDING = TAKE_PREFIX + b"pending"
_VALUES = TAKE_PREFIX + b"values/"
_HEADER = struct.Struct(">Id")
_ROW = struct.Struct(">qI")
_OFFSET = struct.Struct(">Q")


class TakeBuffer:
    """The take buffer of one partition's ``state`` (module docstring); ``agent`` names the
    agent in errors."""

    def __init__(self, state: PartitionState, agent: str) -> None:
        self._state, self._agent = state, agent

    def pending(self) -> Pending:
        raw = self._state.get(_PENDING)
        if raw is None:
            return EMPTY
        if len(raw) != _HEADER.size:
            raise self._corrupt(f"a header of {len(raw)} bytes, not {_HEADER.size}")
        count, deadline = _HEADER.unpack(raw)
        return Pending(count, None if math.isnan(deadline) else deadline)

    def save(self, pending: Pending) -> None:
        if pending.count == 0:
            self._state.delete(_PENDING)
            return
        deadline = math.nan if pending.deadline is None else pending.deadline
        self._state.put(_PENDING, _HEADER.pack(pending.count, deadline))

    def append(self, record: Record) -> None:
        """Buffer ``record`` (its offset orders it)."""
        key = record.key
        head = _ROW.pack(record.timestamp_ms, 0 if key is None else len(key) + 1)
        self._state.put(_VALUES + _OFFSET.pack(record.offset), head + (key or b"") + record.value)

    def take(self, n: int, topic: str, partition: int) -> list[Record]:
        """Remove and return the ``n`` oldest buffered records, as read from
        ``topic[partition]``."""
        found: list[tuple[bytes, Record]] = []
        rows = self._state.items(prefix=_VALUES)
        try:
            for row, data in rows:
                if len(found) == n:
                    break
                found.append((row, self._record(row, data, topic, partition)))
        finally:
            rows.close()
        if len(found) != n:
            raise self._corrupt(f"{len(found)} values buffered, the header says {n} or more")
        for row, _ in found:
            self._state.delete(row)
        return [record for _, record in found]

    def _record(self, row: bytes, data: bytes, topic: str, partition: int) -> Record:
        offset_bytes = row[len(_VALUES) :]
        if len(offset_bytes) != _OFFSET.size or len(data) < _ROW.size:
            raise self._corrupt(f"a value row of {len(offset_bytes)}+{len(data)} bytes")
        (offset,) = _OFFSET.unpack(offset_bytes)
        timestamp_ms, key_field = _ROW.unpack_from(data)
        body = data[_ROW.size :]
        key_length = key_field - 1
        if key_length > len(body):
            raise self._corrupt(f"a key of {key_length} bytes in a row of {len(body)}")
        key = None if key_field == 0 else body[:key_length]
        value = body[max(0, key_length) :]
        return Record(topic, partition, offset, key, value, timestamp_ms)

    def _corrupt(self, what: str) -> AgentStepError:
        return AgentStepError(self._agent, f"stream.take's buffer in state holds {what}")

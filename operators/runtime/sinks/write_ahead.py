"""The write-ahead log of an exactly-once sink: outputs kept in the subtask's state, by interval.

Outputs of interval ``n`` are stored in rows ``sink-wal/<interval><seq>`` (both big-endian
``u64``, so rows sort by interval, then in write order) in the state's metadata area. `append`
keeps an output in memory; `flush` puts what was appended as one row per interval (a chunk of
up to `CHUNK_OUTPUTS` outputs; a full chunk goes into the state at once). The sink flushes in
its ``on_snapshot``, so the snapshot of checkpoint ``n`` holds every output of intervals ≤ n
not yet published, as the state's own pending writes are applied before a snapshot; `due`
flushes first too. A row per chunk instead of a row per output spares RocksDB a put, a read
and a delete per output (the exactly-once sink cost 23% more CPU than the at-least-once one
in the word count with a row each, performance.md). The log also keeps the outputs of each
row it put, so that `due` decodes only the rows it did not put (restored from a checkpoint).

Every stored form starts with a format byte, so that a checkpoint written by another build is
read correctly or refused, never misread:

* 1, one output a row (`encode_output`; builds before chunks wrote it, and it is still read):
  ``>BHIi`` (format, topic length, partition, key length or -1 for no key), the topic, the
  key, the value;
* 2, a chunk (`encode_chunk`): the format byte, the number of outputs (``>I``), then per
  output ``>HIiI`` (topic length, partition, key length or -1, value length), the topic, the
  key, the value. A chunk cut anywhere is refused.
"""

from __future__ import annotations

import contextlib
import struct
from dataclasses import dataclass
from functools import lru_cache

from sluicegate.operators.state.store import PartitionState

__all__ = [
    "CHUNK_OUTPUTS",
    "Due",
    "SinkOutput",
    "WriteAheadLog",
    "decode_chunk",
    "decode_output",
    "encode_chunk",
    "encode_output",
]

_WAL = b"sink-wal/"
_FORMAT = 1  # one output a row
_CHUNK = b"\x02"  # a chunk of outputs a row: the format this build writes
_HEAD = struct.Struct(">BHIi")  # format, topic length, partition, key length (-1: no key)
_ENTRY = struct.Struct(">HIiI")  # topic length, partition, key length (-1: no key), value length

CHUNK_OUTPUTS = 4096
"""The most outputs a row holds (a chunk is put into the state as soon as it is full)."""

SinkOutput = tuple[str, int, bytes | None, bytes]
"""(topic, partition, key, value) of one output."""


def encode_output(topic: str, partition: int, key: bytes | None, value: bytes) -> bytes:
    """The stored form of one sink output."""
    name = _encoded(topic)
    head = _pack_head(_FORMAT, len(name), partition, -1 if key is None else len(key))
    return b"".join((head, name, key or b"", value))


_pack_head = _HEAD.pack
_encoded = lru_cache(maxsize=256)(str.encode)  # a subtask writes a few sink topics


def encode_chunk(outputs: list[SinkOutput]) -> bytes:
    """The stored form of ``outputs``, in order, as one row."""
    parts = [_CHUNK, _pack_count(len(outputs))]
    for topic, partition, key, value in outputs:
        name = _encoded(topic)
        parts += (
            _pack_entry(len(name), partition, -1 if key is None else len(key), len(value)),
            name,
            key or b"",
            value,
        )
    return b"".join(parts)


_pack_entry = _ENTRY.pack
_COUNT = struct.Struct(">I")
_pack_count = _COUNT.pack


def decode_chunk(data: bytes) -> list[SinkOutput]:
    """Inverse of `encode_chunk`; refuses a row that is not a whole chunk."""
    if data[:1] != _CHUNK:
        raise ValueError(f"sink outputs stored in format {data[:1]!r}; not a chunk")
    outputs: list[SinkOutput] = []
    at, end, size, names = 1 + _COUNT.size, len(data), _ENTRY.size, _decoded_names
    unpack = _ENTRY.unpack_from
    try:
        (count,) = _COUNT.unpack_from(data, 1)
        for _ in range(count):
            name_len, partition, key_len, value_len = unpack(data, at)
            at += size
            topic = names(data[at : at + name_len])
            at += name_len
            key = None if key_len < 0 else data[at : at + key_len]
            at += max(key_len, 0)
            outputs.append((topic, partition, key, data[at : at + value_len]))
            at += value_len
    except struct.error as exc:
        raise ValueError(f"sink output chunk cut short at byte {at} of {end}") from exc
    if at != end:  # a slice past the end is short, but ``at`` counts what was declared
        raise ValueError(f"sink output chunk cut short or overlong: {at} bytes of {end}")
    return outputs


_decoded_names = lru_cache(maxsize=256)(bytes.decode)


def decode_output(data: bytes) -> SinkOutput:
    """Inverse of `encode_output`; refuses an unknown format."""
    fmt, name_len, partition, key_len = _HEAD.unpack_from(data)
    if fmt != _FORMAT:
        raise ValueError(f"sink output stored in format {fmt}; this build reads {_FORMAT}")
    at = _HEAD.size
    topic = data[at : at + name_len].decode()
    at += name_len
    key = None if key_len < 0 else data[at : at + key_len]
    at += max(key_len, 0)
    return topic, partition, key, data[at:]


def _wal_key(interval: int, seq: int) -> bytes:
    return _WAL + _pack_position(interval, seq)


_pack_position = struct.Struct(">QQ").pack


def _interval_of(key: bytes) -> int:
    interval: int = struct.unpack_from(">Q", key, len(_WAL))[0]
    return interval


@dataclass(frozen=True, slots=True)
class Due:
    """What publishing up to checkpoint ``up_to`` takes from the log."""

    up_to: int
    outputs: list[SinkOutput]
    """The outputs to publish, in interval and write order."""
    keys: list[bytes]
    """Every row of an interval ≤ ``up_to``: published now, or already before."""


def _decoded(row: bytes) -> list[SinkOutput]:
    return decode_chunk(row) if row[:1] == _CHUNK else [decode_output(row)]


class WriteAheadLog:
    """The sink outputs of one subtask not yet published, kept in ``state``."""

    def __init__(self, state: PartitionState) -> None:
        self._state = state
        self._seq: dict[int, int] = {}
        self._pending: dict[int, list[SinkOutput]] = {}
        """Outputs appended and not yet in the state, by interval."""
        self._put_rows: dict[bytes, list[SinkOutput]] = {}
        """The outputs of each row this log put and has not removed, by row key: what
        decoding the row would give."""

    def append(
        self, interval: int, topic: str, partition: int, key: bytes | None, value: bytes
    ) -> None:
        """Keep one output of ``interval`` until its checkpoint completes (in the state from
        the next `flush` on)."""
        pending = self._pending.get(interval)
        if pending is None:
            pending = self._pending[interval] = []
        pending.append((topic, partition, key, value))
        if len(pending) >= CHUNK_OUTPUTS:
            self._put(interval, self._pending.pop(interval))

    def flush(self) -> None:
        """Put every output appended so far into the state (a row per interval)."""
        pending, self._pending = self._pending, {}
        for interval, outputs in pending.items():
            self._put(interval, outputs)

    def _put(self, interval: int, outputs: list[SinkOutput]) -> None:
        seq = self._seq.get(interval, 0)
        self._seq[interval] = seq + 1
        key = _wal_key(interval, seq)
        self._state.put(key, encode_chunk(outputs))
        self._put_rows[key] = outputs

    def due(self, up_to: int, *, published: int) -> Due:
        """The outputs of intervals in ``(published, up_to]`` (after a `flush`); rows of
        intervals ≤ ``published`` (restored from a checkpoint older than the last
        publication) are listed for removal and never decoded."""
        self.flush()
        rows: list[tuple[bytes, bytes]] = []
        with contextlib.closing(self._state.items(prefix=_WAL)) as stored:
            for key, value in stored:  # in interval order: stop at the first one after up_to
                if _interval_of(key) > up_to:
                    break
                rows.append((key, value))
        put, outputs = self._put_rows, []
        for key, value in rows:
            if _interval_of(key) > published:
                kept = put.get(key)
                outputs += _decoded(value) if kept is None else kept
        return Due(up_to, outputs, [k for k, _ in rows])

    def remove(self, due: Due) -> None:
        """Delete the rows of ``due`` once its outputs are published."""
        for key in due.keys:
            self._state.delete(key)
            self._put_rows.pop(key, None)
        for interval in [i for i in self._seq if i <= due.up_to]:
            del self._seq[interval]

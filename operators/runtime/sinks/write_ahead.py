"""The write-ahead log of an exactly-once sink: outputs kept in the subtask's state, by interval.

An output of interval ``n`` is stored under ``sink-wal/<interval><seq>`` (both big-endian
``u64``, so rows sort by interval, then in write order) in the state's metadata area; the
snapshot of checkpoint ``n`` therefore holds every output of intervals ≤ n not yet published.
The stored form starts with a format byte, so that a checkpoint written by another build is
read correctly or refused, never misread.
"""

from __future__ import annotations

import contextlib
import struct
from dataclasses import dataclass
from functools import lru_cache

from sluicegate.operators.state.store import PartitionState

__all__ = ["Due", "SinkOutput", "WriteAheadLog", "decode_output", "encode_output"]

_WAL = b"sink-wal/"
_FORMAT = 1  # the first byte of every stored output; bump when the layout changes
_HEAD = struct.Struct(">BHIi")  # format, topic length, partition, key length (-1: no key)

SinkOutput = tuple[str, int, bytes | None, bytes]
"""(topic, partition, key, value) of one output."""


def encode_output(topic: str, partition: int, key: bytes | None, value: bytes) -> bytes:
    """The stored form of one sink output."""
    name = _encoded(topic)
    head = _pack_head(_FORMAT, len(name), partition, -1 if key is None else len(key))
    return b"".join((head, name, key or b"", value))


_pack_head = _HEAD.pack
_encoded = lru_cache(maxsize=256)(str.encode)  # a subtask writes a few sink topics


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


class WriteAheadLog:
    """The sink outputs of one subtask not yet published, kept in ``state``."""

    def __init__(self, state: PartitionState) -> None:
        self._state = state
        self._seq: dict[int, int] = {}

    def append(
        self, interval: int, topic: str, partition: int, key: bytes | None, value: bytes
    ) -> None:
        """Keep one output of ``interval`` in state until its checkpoint completes."""
        seq = self._seq.get(interval, 0)
        self._seq[interval] = seq + 1
        self._state.put(_wal_key(interval, seq), encode_output(topic, partition, key, value))

    def due(self, up_to: int, *, published: int) -> Due:
        """The outputs of intervals in ``(published, up_to]``; rows of intervals ≤
        ``published`` (restored from a checkpoint older than the last publication) are listed
        for removal and never decoded."""
        rows: list[tuple[bytes, bytes]] = []
        with contextlib.closing(self._state.items(prefix=_WAL)) as stored:
            for key, value in stored:  # in interval order: stop at the first one after up_to
                if _interval_of(key) > up_to:
                    break
                rows.append((key, value))
        outputs = [decode_output(v) for k, v in rows if _interval_of(k) > published]
        return Due(up_to, outputs, [k for k, _ in rows])

    def remove(self, due: Due) -> None:
        """Delete the rows of ``due`` once its outputs are published."""
        for key in due.keys:
            self._state.delete(key)
        for interval in [i for i in self._seq if i <= due.up_to]:
            del self._seq[interval]

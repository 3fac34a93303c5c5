"""The state changelog: every write of a checkpoint interval, in one segment file.

With the changelog on (``SubtaskSettings.state_changelog``), a checkpoint uploads the writes of
its interval (about the changed bytes) instead of the SSTs RocksDB wrote since the last one
(flushes plus whatever compaction rewrote, which at worst is a whole level). The RocksDB files
are uploaded in the background now and then (a *materialization*), and a restore replays the
segments written since onto them: docs/architecture.md, "State changelog".

A segment is a file named ``changelog-<checkpoint id, 12 digits>`` (so names sort in replay
order) holding the writes applied to RocksDB in that interval, oldest first::

    b"SGCL" 0x01                                  magic and format version
    0x01 <u32 key length> key <u32 value length> value    put
    0x02 <u32 key length> key                             delete
    0x03 <u32 start length> start <u32 stop length> stop  delete every key in [start, stop)

Lengths are big-endian. A segment comes back from storage verified against its sha256, but the
manifest naming it is read from storage too, so :func:`read_segment` treats the bytes as hostile:
any length past the end of the file, an unknown operation or a wrong header raises
:class:`ChangelogFormatError` before anything is allocated for it.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Generator, Iterable
from enum import IntEnum
from pathlib import Path
from typing import BinaryIO, Final, TypeAlias

from sluicegate.operators.protocol.messages import SEGMENT_NAME
from sluicegate.operators.state.exceptions import StateError, StateIOError

__all__ = [
    "ChangelogFormatError",
    "ChangelogWriter",
    "Op",
    "Write",
    "encode_writes",
    "read_segment",
    "segment_checkpoint_id",
    "segment_name",
]

_PREFIX: Final = "changelog-"
_HEADER: Final = b"SGCL\x01"
_LENGTH = struct.Struct(">I")
_BUFFER = 1 << 16

Write: TypeAlias = tuple[bytes, bytes | None]
"""One write: ``(key, value)``, or ``(key, None)`` for a delete."""
RangeDelete: TypeAlias = tuple[bytes, bytes]
"""Every key in ``[start, stop)`` deleted."""


class Op(IntEnum):
    """A record's operation."""

    PUT = 1
    DELETE = 2
    DELETE_RANGE = 3


class ChangelogFormatError(StateError):
    """A changelog segment is not in the format this build writes."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        super().__init__(f"changelog segment {path.name} is damaged: {reason}")


def segment_name(checkpoint_id: int) -> str:
    """The file name of the segment sealed at checkpoint ``checkpoint_id``."""
    if checkpoint_id < 0:
        raise ValueError(f"checkpoint_id must be >= 0, got {checkpoint_id}")
    return f"{_PREFIX}{checkpoint_id:012d}"


def segment_checkpoint_id(name: str) -> int | None:
    """The checkpoint id in a segment's file name, or None if ``name`` is not one."""
    found = SEGMENT_NAME.match(name)
    return int(found.group(1)) if found else None


def encode_writes(writes: Iterable[Write], ranges: Iterable[RangeDelete] = ()) -> bytes:
    """The records of ``writes`` then ``ranges``, in order (no header)."""
    out = bytearray()
    for key, value in writes:
        if value is None:
            out += b"\x02" + _LENGTH.pack(len(key)) + key
        else:
            out += b"\x01" + _LENGTH.pack(len(key)) + key + _LENGTH.pack(len(value)) + value
    for start, stop in ranges:
        out += b"\x03" + _LENGTH.pack(len(start)) + start + _LENGTH.pack(len(stop)) + stop
    return bytes(out)


Record: TypeAlias = tuple[Op, bytes, bytes | None]
"""``(operation, key or start, value or stop)``, as :func:`read_segment` yields them."""


def read_segment(path: Path) -> Generator[Record, None, None]:
    """Yield the records of the segment at ``path``, oldest first; see the module docstring."""
    size = path.stat().st_size
    with path.open("rb", buffering=_BUFFER) as stream:
        reader = _Reader(stream, size, path)
        if reader.take(len(_HEADER)) != _HEADER:
            raise ChangelogFormatError(path, "not a changelog segment of format 1")
        while reader.left:
            operation = reader.take(1)[0]
            if operation == Op.PUT:
                yield Op.PUT, reader.field(), reader.field()
            elif operation == Op.DELETE:
                yield Op.DELETE, reader.field(), None
            elif operation == Op.DELETE_RANGE:
                yield Op.DELETE_RANGE, reader.field(), reader.field()
            else:
                raise ChangelogFormatError(path, f"unknown operation {operation}")


class _Reader:
    __slots__ = ("_path", "_stream", "left")

    def __init__(self, stream: BinaryIO, size: int, path: Path) -> None:
        self._stream, self.left, self._path = stream, size, path

    def take(self, count: int) -> bytes:
        if count > self.left:
            raise ChangelogFormatError(self._path, f"{count} bytes announced, {self.left} left")
        data = self._stream.read(count)
        if len(data) != count:
            raise ChangelogFormatError(self._path, "the file ended early")
        self.left -= count
        return data

    def field(self) -> bytes:
        (length,) = _LENGTH.unpack(self.take(_LENGTH.size))
        return self.take(length)


class ChangelogWriter:
    """Appends the writes of the current interval to ``directory/current``; :meth:`seal` closes
    it as the interval's segment. Memory stays bounded: records go to the file as they come."""

    def __init__(self, directory: Path) -> None:
        """Start with an empty interval in ``directory`` (created; a leftover ``current`` of an
        earlier process is discarded: its writes belong to no checkpoint)."""
        self._directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._current = directory / "current"
        self._stream: BinaryIO | None = None
        self._written = 0
        self._closed = False
        self._current.unlink(missing_ok=True)

    @property
    def pending_bytes(self) -> int:
        """Bytes of records appended since the last :meth:`seal`."""
        return self._written

    def append(self, writes: Iterable[Write], ranges: Iterable[RangeDelete] = ()) -> None:
        """Append ``writes`` then ``ranges`` (before RocksDB applies them); after :meth:`close`,
        nothing (the writes of a closing store belong to no checkpoint)."""
        records = encode_writes(writes, ranges)
        if not records or self._closed:
            return
        try:
            if self._stream is None:
                self._stream = self._current.open("wb", buffering=_BUFFER)
                self._stream.write(_HEADER)
            self._stream.write(records)
        except OSError as exc:
            raise StateIOError("changelog append", self._current, str(exc)) from exc
        self._written += len(records)

    def seal(self, checkpoint_id: int) -> Path | None:
        """End the interval: its segment, renamed ``segment_name(checkpoint_id)``, or None if
        nothing was written."""
        if self._stream is None:
            return None
        target = self._directory / segment_name(checkpoint_id)
        try:
            self._stream.close()
            os.replace(self._current, target)
        except OSError as exc:
            raise StateIOError("changelog seal", self._current, str(exc)) from exc
        finally:
            self._stream, self._written = None, 0
        return target

    def close(self) -> None:
        """Close the file of the current interval (its writes belong to no checkpoint) and
        take no more."""
        self._closed = True
        if self._stream is not None:
            self._stream.close()
            self._stream = None

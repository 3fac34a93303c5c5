"""The rows file of a savepoint: the key/value rows of one input partition (or one subtask's
metadata), in a canonical binary form that depends on no RocksDB file. Sans-IO: bytes in,
bytes out.

Layout (all integers big-endian)::

    header   b"SGRW" | u16 format version (1) | u16 flags
    body     the rows section, zlib-compressed when flags is 1 (0: stored as it is)
    digest   sha256 of header and body, as stored

    rows section:
    row      u32 key length | key | u32 value length | value       (repeated)
    end      u32 0xFFFFFFFF | u64 row count

Rows are in strictly ascending bytewise key order (RocksDB's order; a duplicate key is an
error). A key is at most `MAX_KEY_BYTES`, a value at most `MAX_VALUE_BYTES`: a length above
either, or beyond the end of the section, is refused before anything is allocated. The digest
is checked before anything is decompressed, and a compressed body may expand to at most
`MAX_EXPANSION` times its size (and `MAX_SECTION_BYTES`): a zip bomb is refused, not
inflated. The file is untrusted: every violation raises `CorruptSavepointError` naming the file
and the problem.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Iterable, Iterator

from sluicegate.operators.savepoints.exceptions import CorruptSavepointError

__all__ = [
    "MAGIC",
    "MAX_EXPANSION",
    "MAX_KEY_BYTES",
    "MAX_SECTION_BYTES",
    "MAX_VALUE_BYTES",
    "ROWS_VERSION",
    "decode_rows",
    "encode_rows",
]

MAGIC = b"SGRW"
ROWS_VERSION = 1
MAX_KEY_BYTES = 1 << 20
"""1 MiB: a longer key is refused (RocksDB keys of state are short)."""
MAX_VALUE_BYTES = 256 << 20
"""256 MiB: a longer value is refused (blobs are stored by reference, not in state)."""

MAX_EXPANSION = 200
"""A compressed body may expand to at most this many times its stored size (plus 1 MiB)."""
MAX_SECTION_BYTES = 4 << 30
"""4 GiB: the largest rows section a reader inflates."""

_ZLIB = 1
_HEADER = struct.Struct(">4sHH")
_LENGTH = struct.Struct(">I")
_COUNT = struct.Struct(">Q")
_END = 0xFFFFFFFF
_DIGEST = 32


def encode_rows(rows: Iterable[tuple[bytes, bytes]], *, compress: bool = True) -> bytes:
    """Encode ``rows`` (ascending, unique keys) as a rows file, its body zlib-compressed
    unless ``compress`` is False.

    Raises ``ValueError`` for rows out of order, duplicate keys or oversized keys or values:
    the writer must never produce a file the reader would refuse.
    """
    section = bytearray()
    previous: bytes | None = None
    count = 0
    for key, value in rows:
        if previous is not None and key <= previous:
            raise ValueError(f"rows must be in strictly ascending key order ({key!r})")
        if len(key) > MAX_KEY_BYTES or len(value) > MAX_VALUE_BYTES:
            raise ValueError(f"key or value too large for a savepoint ({len(key)}, {len(value)})")
        section += _LENGTH.pack(len(key)) + key + _LENGTH.pack(len(value)) + value
        previous = key
        count += 1
    section += _LENGTH.pack(_END) + _COUNT.pack(count)
    body = zlib.compress(section, 1) if compress else bytes(section)
    out = _HEADER.pack(MAGIC, ROWS_VERSION, _ZLIB if compress else 0) + body
    return out + hashlib.sha256(out).digest()


def decode_rows(data: bytes, *, what: str = "rows file") -> Iterator[tuple[bytes, bytes]]:
    """Check ``data`` whole (checksum, lengths, order, count), then yield its rows.

    The checksum is verified before the first row is yielded, so a caller never sees a row
    of a damaged file. ``what`` names the file in errors.
    """
    return iter(_parse(memoryview(data), what))


def _parse(view: memoryview, what: str) -> list[tuple[bytes, bytes]]:
    def corrupt(problem: str) -> CorruptSavepointError:
        return CorruptSavepointError(what, problem)

    if len(view) < _HEADER.size + _DIGEST:
        raise corrupt(f"{len(view)} bytes is too short for a rows file")
    magic, version, flags = _HEADER.unpack_from(view, 0)
    if magic != MAGIC:
        raise corrupt("it does not start with the rows file magic")
    if version != ROWS_VERSION or flags not in (0, _ZLIB):
        raise corrupt(
            f"rows format version {version} (flags {flags}) is not one this build reads "
            f"({ROWS_VERSION}); restore it with the sluicegate version that wrote it or newer"
        )
    body_end = len(view) - _DIGEST
    if hashlib.sha256(view[:body_end]).digest() != bytes(view[body_end:]):
        raise corrupt("its checksum does not match its content")
    body = view[_HEADER.size : body_end]
    section = memoryview(_inflate(body, what)) if flags == _ZLIB else body
    return _rows(section, what)


def _inflate(body: memoryview, what: str) -> bytes:
    limit = min(len(body) * MAX_EXPANSION + (1 << 20), MAX_SECTION_BYTES)
    inflater = zlib.decompressobj()
    try:
        section = inflater.decompress(body, limit)
    except zlib.error as exc:
        raise CorruptSavepointError(what, f"its body does not decompress ({exc})") from exc
    if inflater.unconsumed_tail:
        raise CorruptSavepointError(what, f"its body expands beyond {limit} bytes")
    if not inflater.eof or inflater.unused_data:
        raise CorruptSavepointError(what, "its compressed body is truncated or has extra bytes")
    return section


def _rows(section: memoryview, what: str) -> list[tuple[bytes, bytes]]:
    def corrupt(problem: str) -> CorruptSavepointError:
        return CorruptSavepointError(what, problem)

    end = len(section)
    position = 0
    rows: list[tuple[bytes, bytes]] = []
    previous: bytes | None = None
    while True:
        if position + _LENGTH.size > end:
            raise corrupt("it ends inside a row (no end marker)")
        (key_length,) = _LENGTH.unpack_from(section, position)
        position += _LENGTH.size
        if key_length == _END:
            break
        if key_length > MAX_KEY_BYTES:
            raise corrupt(f"a key length of {key_length} bytes is over {MAX_KEY_BYTES}")
        key, position = _take(section, position, key_length, end, what)
        if position + _LENGTH.size > end:
            raise corrupt("it ends inside a row (no value length)")
        (value_length,) = _LENGTH.unpack_from(section, position)
        position += _LENGTH.size
        if value_length > MAX_VALUE_BYTES:
            raise corrupt(f"a value length of {value_length} bytes is over {MAX_VALUE_BYTES}")
        value, position = _take(section, position, value_length, end, what)
        if previous is not None and key <= previous:
            raise corrupt("its keys are not in strictly ascending order")
        rows.append((key, value))
        previous = key
    if position + _COUNT.size != end:
        raise corrupt("its trailer has the wrong length")
    (count,) = _COUNT.unpack_from(section, position)
    if count != len(rows):
        raise corrupt(f"its trailer counts {count} rows, the file holds {len(rows)}")
    return rows


def _take(view: memoryview, position: int, length: int, end: int, what: str) -> tuple[bytes, int]:
    if position + length > end:
        raise CorruptSavepointError(what, f"a length of {length} bytes runs past the end")
    return bytes(view[position : position + length]), position + length

"""The rows file of a savepoint: round trips, and refusal of damaged or hostile bytes."""

from __future__ import annotations

import hashlib
import struct
import zlib

import pytest
from hypothesis import given, strategies as st

from sluicegate.operators.savepoints.exceptions import CorruptSavepointError
from sluicegate.operators.savepoints.rows import (
    MAX_KEY_BYTES,
    MAX_VALUE_BYTES,
    decode_rows,
    encode_rows,
)


def _reseal(body: bytes) -> bytes:
    """``body`` (a file without its digest) with a correct digest: a hostile writer's file."""
    return body + hashlib.sha256(body).digest()


@given(st.dictionaries(st.binary(max_size=40), st.binary(max_size=200), max_size=50))
def test_rows_round_trip_in_key_order(rows: dict[bytes, bytes]) -> None:
    ordered = sorted(rows.items())
    assert list(decode_rows(encode_rows(ordered))) == ordered


def test_empty_file_round_trips() -> None:
    assert list(decode_rows(encode_rows([]))) == []
    assert list(decode_rows(encode_rows([], compress=False))) == []


def test_uncompressed_files_read_too_and_compression_pays() -> None:
    rows = [(b"key-%06d" % i, b"value " * 8) for i in range(1000)]
    plain, packed = encode_rows(rows, compress=False), encode_rows(rows)
    assert list(decode_rows(plain)) == list(decode_rows(packed)) == rows
    assert len(packed) * 5 < len(plain)


def test_a_zip_bomb_is_refused_not_inflated() -> None:
    section = struct.pack(">I", 1) + b"k" + struct.pack(">I", MAX_VALUE_BYTES - 1)
    section += bytes(64 << 20)  # compresses to ~64 KiB, would inflate to 64 MiB
    body = b"SGRW" + struct.pack(">HH", 1, 1) + zlib.compress(section, 9)
    with pytest.raises(CorruptSavepointError, match="expands beyond"):
        decode_rows(_reseal(body))


def test_a_damaged_compressed_body_is_refused() -> None:
    packed = encode_rows([(b"a", b"1" * 100)])[:-32]
    with pytest.raises(CorruptSavepointError, match=r"decompress|truncated"):
        decode_rows(_reseal(packed[:-5]))
    with pytest.raises(CorruptSavepointError, match="extra bytes"):
        decode_rows(_reseal(packed + b"zz"))
    with pytest.raises(CorruptSavepointError, match="flags 2"):
        decode_rows(_reseal(packed[:4] + struct.pack(">HH", 1, 2) + packed[8:]))


def test_the_writer_refuses_rows_out_of_order_or_duplicate() -> None:
    with pytest.raises(ValueError, match="ascending"):
        encode_rows([(b"b", b""), (b"a", b"")])
    with pytest.raises(ValueError, match="ascending"):
        encode_rows([(b"a", b"1"), (b"a", b"2")])


@pytest.mark.parametrize("position", [0, 5, 12, -40, -1])
def test_a_flipped_byte_anywhere_is_refused(position: int) -> None:
    data = bytearray(encode_rows([(b"key", b"value"), (b"key2", b"value2")]))
    data[position] ^= 0x01
    with pytest.raises(CorruptSavepointError):
        list(decode_rows(bytes(data), what="data/1"))


def test_a_bad_checksum_is_named() -> None:
    data = bytearray(encode_rows([(b"k", b"v")]))
    data[10] ^= 0xFF
    with pytest.raises(CorruptSavepointError, match="checksum") as raised:
        decode_rows(bytes(data), what="data/7")
    assert raised.value.what == "data/7"


def test_truncated_files_are_refused() -> None:
    data = encode_rows([(b"k", b"v" * 100)])
    for cut in (0, 3, 8, 20, len(data) - 1):
        with pytest.raises(CorruptSavepointError):
            decode_rows(data[:cut])


def test_an_absurd_key_length_is_refused_before_allocating() -> None:
    body = b"SGRW" + struct.pack(">HH", 1, 0) + struct.pack(">I", 0xFFFFFFF0) + b"x" * 8
    with pytest.raises(CorruptSavepointError, match="key length"):
        decode_rows(_reseal(body))


def test_an_absurd_value_length_is_refused() -> None:
    body = b"SGRW" + struct.pack(">HH", 1, 0) + struct.pack(">I", 1) + b"k"
    body += struct.pack(">I", MAX_VALUE_BYTES + 1) + b"v" * 16
    with pytest.raises(CorruptSavepointError, match="value length"):
        decode_rows(_reseal(body))


def test_a_length_past_the_end_is_refused() -> None:
    body = b"SGRW" + struct.pack(">HH", 1, 0) + struct.pack(">I", MAX_KEY_BYTES) + b"k" * 30
    with pytest.raises(CorruptSavepointError, match="past the end"):
        decode_rows(_reseal(body))


def test_a_wrong_row_count_is_refused() -> None:
    body = encode_rows([(b"a", b"1")], compress=False)[:-32]
    forged = body[:-8] + struct.pack(">Q", 2)
    with pytest.raises(CorruptSavepointError, match="counts 2 rows"):
        decode_rows(_reseal(forged))


def test_unordered_rows_of_a_forged_file_are_refused() -> None:
    header = b"SGRW" + struct.pack(">HH", 1, 0)

    def row(key: bytes) -> bytes:
        return struct.pack(">I", 1) + key + struct.pack(">I", 0)

    body = header + row(b"b") + row(b"a") + struct.pack(">I", 0xFFFFFFFF) + struct.pack(">Q", 2)
    with pytest.raises(CorruptSavepointError, match="ascending"):
        decode_rows(_reseal(body))


def test_another_magic_or_a_newer_version_is_refused() -> None:
    good = encode_rows([])[:-32]
    with pytest.raises(CorruptSavepointError, match="magic"):
        decode_rows(_reseal(b"XXXX" + good[4:]))
    with pytest.raises(CorruptSavepointError, match="version 2"):
        decode_rows(_reseal(good[:4] + struct.pack(">HH", 2, 0) + good[8:]))


def test_bytes_after_the_trailer_are_refused() -> None:
    body = encode_rows([(b"a", b"1")], compress=False)[:-32] + b"extra"
    with pytest.raises(CorruptSavepointError, match="trailer"):
        decode_rows(_reseal(body))

"""Record headers: round trips, source records, and every way they can be malformed."""

from __future__ import annotations

import pytest

from sluicegate.operators.exceptions import FatalError
from sluicegate.operators.protocol.exceptions import MalformedHeadersError, ProtocolViolationError
from sluicegate.operators.protocol.records import (
    ATTEMPT_HEADER,
    CHECKPOINT_HEADER,
    INTERVAL_HEADER,
    KIND_HEADER,
    WRITER_HEADER,
    RecordKind,
    RecordMeta,
    decode_headers,
    encode_headers,
)

RECORD = RecordMeta(attempt=3, interval=7, writer="counter#1")
BARRIER = RecordMeta(4, 12, "tokenizer#0", RecordKind.BARRIER, 12)


@pytest.mark.parametrize("meta", [RECORD, BARRIER])
def test_headers_round_trip(meta: RecordMeta) -> None:
    headers = encode_headers(meta)
    assert all(isinstance(name, str) and isinstance(value, bytes) for name, value in headers)
    assert decode_headers(headers) == meta


def test_header_names_and_values_are_plain_ascii() -> None:
    assert dict(encode_headers(BARRIER)) == {
        ATTEMPT_HEADER: b"4",
        INTERVAL_HEADER: b"12",
        WRITER_HEADER: b"tokenizer#0",
        KIND_HEADER: b"barrier",
        CHECKPOINT_HEADER: b"12",
    }
    assert CHECKPOINT_HEADER not in dict(encode_headers(RECORD))


@pytest.mark.parametrize("headers", [None, [], [("traceparent", b"00-ab")]])
def test_a_record_without_sg_headers_is_a_source_record(
    headers: list[tuple[str, bytes | None]] | None,
) -> None:
    assert decode_headers(headers) is None


def test_user_and_unknown_sg_headers_are_ignored() -> None:
    headers = [("traceparent", b"x"), ("sg-future", b"y"), *encode_headers(RECORD)]
    assert decode_headers(headers) == RECORD


def _with(name: str, value: bytes | None) -> list[tuple[str, bytes | None]]:
    return [(n, value if n == name else v) for n, v in encode_headers(BARRIER)]


@pytest.mark.parametrize(
    ("headers", "culprit"),
    [
        ([(n, v) for n, v in encode_headers(RECORD) if n != WRITER_HEADER], WRITER_HEADER),
        ([*encode_headers(RECORD), (ATTEMPT_HEADER, b"3")], ATTEMPT_HEADER),
        (_with(ATTEMPT_HEADER, None), ATTEMPT_HEADER),
        (_with(ATTEMPT_HEADER, b" 4"), ATTEMPT_HEADER),
        (_with(ATTEMPT_HEADER, b"+4"), ATTEMPT_HEADER),
        (_with(INTERVAL_HEADER, "²".encode()), INTERVAL_HEADER),
        (_with(INTERVAL_HEADER, b""), INTERVAL_HEADER),
        (_with(KIND_HEADER, b"marker"), KIND_HEADER),
        (_with(WRITER_HEADER, b"\xff"), WRITER_HEADER),
        (_with(WRITER_HEADER, b""), WRITER_HEADER),
        (_with(CHECKPOINT_HEADER, b"0"), CHECKPOINT_HEADER),
        ([(n, v) for n, v in encode_headers(BARRIER) if n != CHECKPOINT_HEADER], CHECKPOINT_HEADER),
        ([*encode_headers(RECORD), (CHECKPOINT_HEADER, b"5")], CHECKPOINT_HEADER),
    ],
)
def test_malformed_headers_name_the_culprit(
    headers: list[tuple[str, bytes | None]], culprit: str
) -> None:
    with pytest.raises(MalformedHeadersError) as caught:
        decode_headers(headers)
    assert caught.value.header == culprit
    assert isinstance(caught.value, FatalError)


@pytest.mark.parametrize(
    "arguments",
    [
        {"attempt": -1, "interval": 1, "writer": "w"},
        {"attempt": 1, "interval": 1, "writer": ""},
        {"attempt": 1, "interval": 1, "writer": "w", "kind": RecordKind.BARRIER},
        {"attempt": 1, "interval": 1, "writer": "w", "checkpoint_id": 3},
        {
            "attempt": 1,
            "interval": 1,
            "writer": "w",
            "kind": RecordKind.BARRIER,
            "checkpoint_id": 0,
        },
    ],
)
def test_record_meta_refuses_what_the_protocol_never_writes(arguments: dict[str, object]) -> None:
    with pytest.raises(ProtocolViolationError):
        RecordMeta(**arguments)  # type: ignore[arg-type]


def test_the_pipeline_travels_in_sg_pipeline_and_older_records_have_none() -> None:
    meta = RecordMeta(2, 5, "counter#0", pipeline="wordcount")
    headers = encode_headers(meta)
    assert ("sg-pipeline", b"wordcount") in headers
    assert decode_headers(headers) == meta
    legacy = [h for h in headers if h[0] != "sg-pipeline"]
    decoded = decode_headers(legacy)
    assert decoded is not None
    assert decoded.pipeline is None

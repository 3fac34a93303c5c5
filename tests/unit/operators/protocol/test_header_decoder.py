"""`HeaderDecoder`: `decode_headers` with a memory, giving the same answers."""

from __future__ import annotations

import pytest

from sluicegate.operators.protocol.exceptions import MalformedHeadersError
from sluicegate.operators.protocol.records import (
    HeaderDecoder,
    RecordMeta,
    decode_headers,
    encode_headers,
)


def test_gives_what_decode_headers_gives_and_decodes_each_list_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decoder = HeaderDecoder()
    first = encode_headers(RecordMeta(3, 7, "tokenizer#0", pipeline="wc"))
    second = encode_headers(RecordMeta(3, 8, "tokenizer#0", pipeline="wc"))
    for headers in (first, second, None, [("user", b"x")]):
        assert decoder(headers) == decode_headers(headers)

    calls: list[object] = []

    def counting(headers: object) -> object:
        calls.append(headers)
        return decode_headers(headers)  # type: ignore[arg-type]

    monkeypatch.setattr("sluicegate.operators.protocol.records.decode_headers", counting)
    assert decoder(list(first)) == RecordMeta(3, 7, "tokenizer#0", pipeline="wc")
    assert decoder(tuple(second)) == RecordMeta(3, 8, "tokenizer#0", pipeline="wc")
    assert calls == []  # both remembered, whatever sequence type carries them


def test_an_invalid_list_raises_every_time() -> None:
    decoder = HeaderDecoder()
    forged = [
        ("sg-attempt", b"+1"),
        ("sg-interval", b"1"),
        ("sg-writer", b"w"),
        ("sg-kind", b"record"),
    ]
    for _ in range(2):
        with pytest.raises(MalformedHeadersError):
            decoder(forged)


def test_a_full_memory_starts_over() -> None:
    decoder = HeaderDecoder(size=2)
    lists = [encode_headers(RecordMeta(1, i, "w")) for i in range(5)]
    for headers in lists:
        assert decoder(headers) == RecordMeta(1, lists.index(headers), "w")
    assert len(decoder._known) <= 2

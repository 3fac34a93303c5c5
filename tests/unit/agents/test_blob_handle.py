"""Blob handles: canonical encoding, ids, and parsing that refuses anything not exactly one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, strategies as st

from sluicegate.agents.blobs import BlobHandle, blob_id, handle_of, handle_of_text
from sluicegate.agents.blobs.handle import (
    MAX_HANDLE_TEXT,
    looks_like_handle,
    looks_like_handle_text,
)
from sluicegate.agents.blobs.references import LOST_REASONS
from sluicegate.agents.metrics import BLOB_RESOLUTIONS

HANDLE = BlobHandle(
    id="a" * 32, subject="b" * 32, scope="desk/eu", size=10, sha256="c" * 64,
    expires_at=2000.0, kind="json",
)  # fmt: skip


def test_a_handle_round_trips_through_its_value_and_its_text() -> None:
    assert handle_of(HANDLE.value()) == HANDLE
    assert handle_of_text(HANDLE.text()) == HANDLE
    assert handle_of(json.loads(HANDLE.text())) == HANDLE
    assert HANDLE.text() == json.dumps(HANDLE.value(), sort_keys=True, separators=(",", ":"))


def test_ids_are_deterministic_per_scope_effect_and_part() -> None:
    assert blob_id("desk", "r1/1/0", "result") == blob_id("desk", "r1/1/0", "result")
    others = {
        blob_id("desk/eu", "r1/1/0", "result"),
        blob_id("desk", "r1/1/1", "result"),
        blob_id("desk", "r1/1/0", "content"),
        blob_id("desk", "r1/1/0", "result"),
    }
    assert len(others) == 4
    assert all(len(i) == 32 for i in others)


@pytest.mark.parametrize(
    "value",
    [
        None,
        1,
        "x",
        [],
        {},
        {"$blob": None},
        {"$blob": "a" * 32},
        {"$blob": []},
        {"$blob": {**HANDLE.model_dump(), "extra": 1}},  # unknown field
        {"$blob": HANDLE.model_dump(), "other": 1},  # not exactly one key
        {"$blob": {**HANDLE.model_dump(), "id": "../../etc/passwd"}},
        {"$blob": {**HANDLE.model_dump(), "id": "A" * 32}},
        {"$blob": {**HANDLE.model_dump(), "subject": "b" * 31}},
        {"$blob": {**HANDLE.model_dump(), "sha256": "z" * 64}},
        {"$blob": {**HANDLE.model_dump(), "size": -1}},
        {"$blob": {**HANDLE.model_dump(), "size": 1 << 40}},
        {"$blob": {**HANDLE.model_dump(), "scope": ""}},
        {"$blob": {**HANDLE.model_dump(), "scope": "a\nb"}},
        {"$blob": {**HANDLE.model_dump(), "expires_at": float("inf")}},
        {"$blob": {**HANDLE.model_dump(), "kind": "pickle"}},
    ],
)
def test_anything_but_exactly_a_valid_handle_is_none(value: Any) -> None:
    assert handle_of(value) is None


def test_handle_texts_are_parsed_only_when_short_and_valid() -> None:
    assert handle_of_text(None) is None
    assert handle_of_text("plain text") is None
    assert handle_of_text('{"$blob": ') is None
    assert handle_of_text(HANDLE.text() + " " * MAX_HANDLE_TEXT) is None
    assert handle_of_text("[" + HANDLE.text() + "]") is None


def test_handle_like_values_are_recognised_for_storing_by_reference() -> None:
    assert looks_like_handle({"$blob": 1, "x": 2})
    assert not looks_like_handle({"blob": 1})
    assert looks_like_handle_text('  {"$blob": "forged"}')
    assert not looks_like_handle_text('the key "$blob" in prose')


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
))  # fmt: skip
def test_parsing_never_raises(value: Any) -> None:
    handle_of(value)
    handle_of({"$blob": value})
    handle_of_text(json.dumps(value) if not isinstance(value, str) else value)


def test_every_lost_reason_has_a_resolution_series() -> None:
    assert ("resolved", *LOST_REASONS) == BLOB_RESOLUTIONS

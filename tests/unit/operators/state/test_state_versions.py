"""Upgrader chains of versioned operator state."""

from __future__ import annotations

import pytest

from sluicegate.operators.state.versions import StateVersions, UpgradeError


def _suffix(tag: bytes):  # type: ignore[no-untyped-def]
    def upgrade(key: bytes, value: bytes) -> tuple[bytes, bytes]:
        return key, value + tag

    return upgrade


def test_the_chain_runs_from_the_stored_version_to_the_current_one() -> None:
    versions = StateVersions.of(3, {2: _suffix(b"+3"), 1: _suffix(b"+2")})
    rows = [(b"a", b"v"), (b"b", b"w")]
    assert versions.upgrade(rows, 1) == [(b"a", b"v+2+3"), (b"b", b"w+2+3")]
    assert versions.upgrade(rows, 2) == [(b"a", b"v+3"), (b"b", b"w+3")]
    assert versions.upgrade(rows, 3) == rows


def test_an_upgrader_may_drop_or_rekey_a_row_and_the_result_is_in_key_order() -> None:
    def rekey(key: bytes, value: bytes) -> tuple[bytes, bytes] | None:
        return None if key == b"drop" else (b"z" + key, value)

    versions = StateVersions.of(2, {1: rekey})
    assert versions.upgrade([(b"a", b"1"), (b"drop", b""), (b"0", b"2")], 1) == [
        (b"z0", b"2"),
        (b"za", b"1"),
    ]


def test_gaps_collisions_and_failures_are_errors() -> None:
    versions = StateVersions.of(3, {2: _suffix(b"")})
    assert versions.missing(1) == [1]
    with pytest.raises(UpgradeError, match="no upgrader"):
        versions.upgrade([], 1)
    collide = StateVersions.of(2, {1: lambda k, v: (b"same", v)})
    with pytest.raises(UpgradeError, match="two rows"):
        collide.upgrade([(b"a", b""), (b"b", b"")], 1)

    def broken(key: bytes, value: bytes) -> tuple[bytes, bytes]:
        raise KeyError("field")

    with pytest.raises(UpgradeError, match="version 1 failed on key b'a'"):
        StateVersions.of(2, {1: broken}).upgrade([(b"a", b"")], 1)


def test_declarations_that_make_no_sense_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        StateVersions(0)
    with pytest.raises(ValueError, match="makes no sense"):
        StateVersions.of(2, {2: _suffix(b"")})

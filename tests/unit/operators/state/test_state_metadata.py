"""Metadata rows and schema_version; rows are stored verbatim, never pickled."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from rocksdict import Options, Rdict

from sluicegate.operators.state.codec import META_PREFIX, SCHEMA_VERSION_KEY, partition_prefix
from sluicegate.operators.state.exceptions import (
    ReservedKeyError,
    StateOpenError,
    StateSchemaVersionError,
)
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.state.store import PartitionId


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RocksDBStateStore]:
    with RocksDBStateStore.open(tmp_path / "db") as opened:
        yield opened


def test_rows_are_stored_verbatim_in_raw_mode(tmp_path: Path) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        store.partition("t", 7).put(b"key", b"\x80\x04value")  # looks like a pickle header
    config = json.loads((tmp_path / "db" / "rocksdict-config.json").read_text())
    assert config["raw_mode"] is True
    raw = Rdict(str(tmp_path / "db"), Options(raw_mode=True))
    try:
        stored = dict(raw.items())
    finally:
        raw.close()
        del raw
    assert stored == {
        META_PREFIX + SCHEMA_VERSION_KEY: b"1",
        partition_prefix(PartitionId("t", 7)) + b"key": b"\x80\x04value",
    }


def test_a_new_store_records_schema_version_1(store: RocksDBStateStore) -> None:
    assert store.metadata().get(SCHEMA_VERSION_KEY) == b"1"


def test_schema_version_row_cannot_be_written_through_metadata(store: RocksDBStateStore) -> None:
    metadata = store.metadata()
    metadata.put(b"sink/published", b"41")
    assert metadata.get(b"sink/published") == b"41"
    with pytest.raises(ReservedKeyError):
        metadata.put(SCHEMA_VERSION_KEY, b"2")
    with pytest.raises(ReservedKeyError):
        metadata.delete(SCHEMA_VERSION_KEY)


def _write_raw(path: Path, key: bytes, value: bytes | None) -> None:
    raw = Rdict(str(path), Options(raw_mode=True))
    try:
        if value is None:
            raw.delete(key)
        else:
            raw[key] = value
    finally:
        raw.close()
        del raw


def test_a_newer_schema_version_is_refused_with_advice(tmp_path: Path) -> None:
    RocksDBStateStore.open(tmp_path / "db").close()
    _write_raw(tmp_path / "db", META_PREFIX + SCHEMA_VERSION_KEY, b"2")
    with pytest.raises(StateSchemaVersionError) as caught:
        RocksDBStateStore.open(tmp_path / "db")
    assert (caught.value.found, caught.value.supported) == (2, 1)
    assert "upgrade sluicegate" in str(caught.value)
    assert "savepoint" in str(caught.value)


def test_a_database_without_schema_version_is_refused(tmp_path: Path) -> None:
    _write_raw(tmp_path / "db", b"foreign", b"row")
    with pytest.raises(StateSchemaVersionError) as caught:
        RocksDBStateStore.open(tmp_path / "db")
    assert caught.value.found is None


def test_a_garbled_schema_version_is_refused(tmp_path: Path) -> None:
    RocksDBStateStore.open(tmp_path / "db").close()
    _write_raw(tmp_path / "db", META_PREFIX + SCHEMA_VERSION_KEY, b"one")
    with pytest.raises(StateOpenError, match="not a decimal"):
        RocksDBStateStore.open(tmp_path / "db")

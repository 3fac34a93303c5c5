"""Snapshot upload and restore through real RocksDB and real (local) storage."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest

from sluicegate.operators.runtime.state_transfer import SnapshotStore
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import (
    ContentAddressedUpload,
    CorruptFileError,
    Storage,
    StorageUnavailableError,
    open_storage,
)
from tests.storage_wrappers import DelegatingStorage


async def test_one_percent_of_a_million_keys_uploads_a_small_fraction(tmp_path: Path) -> None:
    storage = open_storage(tmp_path / "storage")
    snapshots = SnapshotStore(storage)
    keys = 1_000_000
    with RocksDBStateStore.open(tmp_path / "db") as store:
        rows = store.partition("words", 0)
        for i in range(keys):
            rows.put(b"key-%07d" % i, b"value-%07d" % i)
        first = await snapshots.upload(store.take_local_checkpoint(1, tmp_path / "cp"))
        for i in random.Random(1).sample(range(keys), keys // 100):
            rows.put(b"key-%07d" % i, b"changed-%07d" % i)
        second = await snapshots.upload(store.take_local_checkpoint(2, tmp_path / "cp"))

    assert first.handle.uploaded_bytes == pytest.approx(first.handle.full_bytes, rel=0.01)
    fraction = second.handle.uploaded_bytes / second.handle.full_bytes
    print(f"1% of {keys} keys changed: uploaded {fraction:.1%} of {second.handle.full_bytes} B")
    assert fraction < 0.15


async def test_restore_prefers_the_local_copy_and_verifies_downloads(tmp_path: Path) -> None:
    storage = open_storage(tmp_path / "storage")
    snapshots = SnapshotStore(storage)
    with RocksDBStateStore.open(tmp_path / "db") as store:
        store.partition("t", 0).put(b"k", b"at checkpoint 1")
        uploaded = await snapshots.upload(store.take_local_checkpoint(1, tmp_path / "cp"))
        store.partition("t", 0).put(b"k", b"after")
    handle = uploaded.handle

    local = await snapshots.fetch(handle, tmp_path / "cp")
    assert local == tmp_path / "cp" / "1"
    downloaded = await snapshots.fetch(handle, tmp_path / "elsewhere")
    assert downloaded != local
    for folder, into in ((local, "r1"), (downloaded, "r2")):
        with RocksDBStateStore.restore(folder, tmp_path / into) as restored:
            assert restored.partition("t", 0).get(b"k") == b"at checkpoint 1"

    victim = next(f for f in handle.files if f.name.endswith(".sst"))
    stored = tmp_path / "storage" / victim.path
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 0xFF
    stored.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError):
        await snapshots.fetch(handle, tmp_path / "third")


class _FailingSstUploads(DelegatingStorage):
    """Refuses every SST upload (a storage outage), counting the calls that started."""

    def __init__(self, inner: Storage) -> None:
        super().__init__(inner)
        self.started = 0

    async def put_content_addressed(
        self, prefix: str, local_path: Path, *, sha256: str | None = None
    ) -> ContentAddressedUpload:
        self.started += 1
        if local_path.name.endswith(".sst"):
            raise StorageUnavailableError("put", prefix, "outage")
        return await super().put_content_addressed(prefix, local_path, sha256=sha256)


async def test_a_failed_file_upload_fails_the_upload_with_the_storage_error(
    tmp_path: Path,
) -> None:
    storage = _FailingSstUploads(open_storage(tmp_path / "storage"))
    snapshots = SnapshotStore(storage)
    with RocksDBStateStore.open(tmp_path / "db") as store:
        for i in range(3):  # three flushes: three SSTs besides the schema version's
            store.partition("t", 0).put(b"k%d" % i, b"v")
            store.flush_memtable()
        local = store.take_local_checkpoint(1, tmp_path / "cp")
    ssts = [f for f in local.inventory.files if f.name.endswith(".sst")]
    assert len(ssts) >= 3
    with pytest.raises(StorageUnavailableError):  # not an ExceptionGroup: the subtask declines
        await snapshots.upload(local)
    assert storage.started == len(ssts)  # the SSTs went first; MANIFEST and the rest never did
    assert snapshots.uploaded == {}


async def test_concurrent_uploads_give_the_same_handle_as_one_by_one(tmp_path: Path) -> None:
    storage = open_storage(tmp_path / "storage")
    snapshots = SnapshotStore(storage)
    with RocksDBStateStore.open(tmp_path / "db") as store:
        for i in range(20):
            store.partition("t", 0).put(b"k%d" % i, b"v%d" % i)
            store.flush_memtable()
        local = store.take_local_checkpoint(1, tmp_path / "cp")
    result = await snapshots.upload(local)
    names = {f.name for f in local.inventory.files}
    assert {f.name for f in result.handle.files} == names
    for f in result.handle.files:
        data = (local.directory / f.name).read_bytes()
        assert (f.size, f.sha256) == (len(data), hashlib.sha256(data).hexdigest())
        assert f.path == f"shared/{f.sha256}"
    assert result.handle.uploaded_bytes == result.handle.full_bytes

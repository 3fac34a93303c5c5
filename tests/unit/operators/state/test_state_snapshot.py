"""Local checkpoints: inventory, hard links, checksums, restore."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from sluicegate.operators.state.exceptions import CheckpointExistsError, RestoreSourceError
from sluicegate.operators.state.local_checkpoint import CheckpointInventory, FileKind, classify
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.state.store import PartitionId

Dump = dict[PartitionId | str, list[tuple[bytes, bytes]]]


def _dump(store: RocksDBStateStore) -> Dump:
    state: Dump = {
        pid: list(store.partition(pid.topic, pid.partition).items()) for pid in store.partitions()
    }
    state["metadata"] = list(store.metadata().items())
    return state


def _fill(store: RocksDBStateStore, rows: int = 500) -> None:
    for number in range(3):
        partition = store.partition("runs", number)
        for i in range(rows):
            partition.put(f"run-{i:05d}".encode(), f"state-{number}-{i}".encode())
    store.metadata().put(b"sink/published", b"0")


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("000012.sst", FileKind.SST),
        ("MANIFEST-000005", FileKind.MANIFEST),
        ("CURRENT", FileKind.CURRENT),
        ("OPTIONS-000009", FileKind.OPTIONS),
        ("000010.log", FileKind.OTHER),
        ("rocksdict-config.json", FileKind.OTHER),
    ],
)
def test_files_are_classified_by_name(name: str, kind: FileKind) -> None:
    assert classify(name) is kind


def test_inventory_lists_every_file_of_the_checkpoint(tmp_path: Path) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _fill(store)  # left pending: step 1 must apply it
        local = store.take_local_checkpoint(7, tmp_path / "checkpoints")
    assert local.directory == tmp_path / "checkpoints" / "7"
    inventory = local.inventory
    assert (inventory.schema_version, inventory.checkpoint_id) == (1, 7)
    assert inventory.sync_duration_seconds > 0
    on_disk = {p.name: p.stat().st_size for p in local.directory.iterdir()}
    assert {f.name: f.size for f in inventory.files} == on_disk
    assert [f.name for f in inventory.files] == sorted(on_disk)
    kinds = {f.kind for f in inventory.files}
    assert {FileKind.SST, FileKind.MANIFEST, FileKind.CURRENT, FileKind.OPTIONS} <= kinds
    assert all(f.new and f.sha256 is None for f in inventory.files)
    # memtables were flushed first, so no state is left in a write-ahead log
    assert all(f.size == 0 for f in inventory.files if f.name.endswith(".log"))


def test_checkpoint_ssts_are_hard_links_to_the_live_files(tmp_path: Path) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _fill(store)
        local = store.take_local_checkpoint(1, tmp_path / "checkpoints")
        for f in local.inventory.files:
            if f.kind is FileKind.SST:
                live = tmp_path / "db" / f.name
                assert os.stat(live).st_ino == os.stat(local.directory / f.name).st_ino


def test_known_ssts_are_not_new_and_keep_their_checksum(tmp_path: Path) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _fill(store)
        first = store.take_local_checkpoint(1, tmp_path / "checkpoints")
        hashed = first.inventory.with_checksums(first.directory)
        store.partition("runs", 0).put(b"run-00001", b"changed")
        second = store.take_local_checkpoint(
            2, tmp_path / "checkpoints", uploaded=hashed.sst_checksums()
        )
    old = hashed.sst_checksums()
    ssts = [f for f in second.inventory.files if f.kind is FileKind.SST]
    assert [f for f in ssts if not f.new]
    for f in ssts:
        assert f.new == ((f.name, f.size) not in old)
        if not f.new:
            assert f.sha256 == old[(f.name, f.size)]
    assert 0 < second.inventory.new_sst_bytes < second.inventory.sst_bytes
    uploads = second.inventory.to_upload()
    kinds = [f.kind for f in uploads]
    assert kinds.index(FileKind.MANIFEST) > max(i for i, k in enumerate(kinds) if k is FileKind.SST)
    assert {f.name for f in uploads} == {
        f.name for f in second.inventory.files if f.new or f.kind is not FileKind.SST
    }


def test_with_checksums_hashes_every_file(tmp_path: Path) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _fill(store)
        local = store.take_local_checkpoint(1, tmp_path / "checkpoints")
    hashed = local.inventory.with_checksums(local.directory)
    for f in hashed.files:
        assert f.sha256 == hashlib.sha256((local.directory / f.name).read_bytes()).hexdigest()
    assert local.inventory.files[0].sha256 is None  # the original is unchanged


def test_inventory_round_trips_through_json_and_refuses_newer_versions(tmp_path: Path) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _fill(store, rows=10)
        local = store.take_local_checkpoint(3, tmp_path / "checkpoints")
    inventory = local.inventory.with_checksums(local.directory)
    raw = inventory.model_dump_json()
    assert CheckpointInventory.model_validate_json(raw) == inventory
    newer = inventory.model_dump(mode="json") | {"schema_version": 2}
    with pytest.raises(ValidationError, match="upgrade sluicegate"):
        CheckpointInventory.model_validate(newer)


def test_a_taken_checkpoint_id_is_refused(tmp_path: Path) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        store.take_local_checkpoint(1, tmp_path / "checkpoints")
        with pytest.raises(CheckpointExistsError) as caught:
            store.take_local_checkpoint(1, tmp_path / "checkpoints")
    assert caught.value.checkpoint_id == 1


def test_restore_yields_exactly_the_state_at_the_checkpoint(tmp_path: Path) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _fill(store)
        store.flush_batch()
        store.partition("runs", 0).delete(b"run-00003")
        store.partition("events", 4).put(b"pending-only", b"x")
        at_checkpoint = _dump(store)
        local = store.take_local_checkpoint(1, tmp_path / "checkpoints")
        # later writes of every kind must not leak into the restored state
        store.partition("runs", 1).put(b"run-00001", b"later")
        store.partition("runs", 2).delete(b"run-00002")
        store.partition("late", 0).put(b"k", b"v")
        store.metadata().put(b"sink/published", b"1")
        store.drop_partition("events", 4)
        store.take_local_checkpoint(2, tmp_path / "checkpoints")
        assert _dump(store) != at_checkpoint
    with RocksDBStateStore.restore(local.directory, tmp_path / "restored") as restored:
        assert _dump(restored) == at_checkpoint


def test_restore_never_alters_the_checkpoint_folder(tmp_path: Path) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _fill(store)
        local = store.take_local_checkpoint(1, tmp_path / "checkpoints")
    before = local.inventory.with_checksums(local.directory)
    with RocksDBStateStore.restore(local.directory, tmp_path / "restored") as restored:
        _fill(restored, rows=2000)
        restored.take_local_checkpoint(2, tmp_path / "checkpoints")
    after = local.inventory.with_checksums(local.directory)
    assert after == before
    assert sorted(p.name for p in local.directory.iterdir()) == [f.name for f in before.files]


def test_restored_ssts_count_as_uploaded_when_seeded_from_the_restored_inventory(
    tmp_path: Path,
) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _fill(store)
        local = store.take_local_checkpoint(1, tmp_path / "checkpoints")
    known = local.inventory.with_checksums(local.directory).sst_checksums()
    with RocksDBStateStore.restore(local.directory, tmp_path / "restored") as restored:
        again = restored.take_local_checkpoint(2, tmp_path / "checkpoints", uploaded=known)
    assert again.inventory.new_sst_bytes == 0


def test_restore_copies_when_hard_links_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _fill(store)
        expected = _dump(store)
        local = store.take_local_checkpoint(1, tmp_path / "checkpoints")

    def cross_device(source: object, target: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", cross_device)
    with RocksDBStateStore.restore(local.directory, tmp_path / "restored") as restored:
        assert _dump(restored) == expected
    sst = next(f.name for f in local.inventory.files if f.kind is FileKind.SST)
    assert os.stat(local.directory / sst).st_ino != os.stat(tmp_path / "restored" / sst).st_ino


def test_restore_refuses_a_folder_that_is_not_a_checkpoint(tmp_path: Path) -> None:
    """(An empty folder is a new database: with the state changelog, a subtask that never
    wrote checkpoints no file; ``test_changelog.py``.)"""
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "000012.sst").write_bytes(b"")
    with pytest.raises(RestoreSourceError, match="CURRENT"):
        RocksDBStateStore.restore(tmp_path / "other", tmp_path / "restored")


def test_restore_refuses_a_target_that_is_not_empty(tmp_path: Path) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        local = store.take_local_checkpoint(1, tmp_path / "checkpoints")
    (tmp_path / "restored").mkdir()
    (tmp_path / "restored" / "stray").write_bytes(b"")
    with pytest.raises(RestoreSourceError, match="not empty") as caught:
        RocksDBStateStore.restore(local.directory, tmp_path / "restored")
    assert caught.value.into_dir == tmp_path / "restored"


def test_an_unchanged_store_links_its_previous_checkpoint_instead_of_a_new_one(
    tmp_path: Path,
) -> None:
    root = tmp_path / "checkpoints"
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _fill(store)
        first = store.take_local_checkpoint(1, root)
        second = store.take_local_checkpoint(2, root)  # nothing written in between
        assert [(f.name, f.size) for f in second.inventory.files] == [
            (f.name, f.size) for f in first.inventory.files
        ]
        for f in first.inventory.files:  # the same files: linked, not written again
            assert os.path.samefile(first.directory / f.name, second.directory / f.name)
        assert not [p for p in root.iterdir() if p.name.startswith(".")]  # no staging left

        store.partition("t", 0).put(b"late", b"row")
        third = store.take_local_checkpoint(3, root)
        assert {f.name for f in third.inventory.files} != {f.name for f in second.inventory.files}
        expected = _dump(store)
    for n in (2, 3):
        with RocksDBStateStore.restore(root / str(n), tmp_path / f"restored-{n}") as restored:
            assert (_dump(restored) == expected) is (n == 3)


def test_a_damaged_previous_checkpoint_is_not_reused(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _fill(store)
        first = store.take_local_checkpoint(1, root)
        (first.directory / "CURRENT").unlink()
        second = store.take_local_checkpoint(2, root)
        expected = _dump(store)
    with RocksDBStateStore.restore(second.directory, tmp_path / "restored") as restored:
        assert _dump(restored) == expected


def test_flush_memtable_writes_pending_rows_to_an_sst_once(tmp_path: Path) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        assert not store.has_unflushed_writes()
        store.partition("t", 0).put(b"k", b"v")
        assert store.has_unflushed_writes()
        store.flush_memtable()
        assert not store.has_unflushed_writes()
        assert store.pending_writes == 0
        assert store.partition("t", 0).get(b"k") == b"v"
        ssts = {p.name for p in (tmp_path / "db").glob("*.sst")}
        store.flush_memtable()  # nothing new: no new SST
        assert {p.name for p in (tmp_path / "db").glob("*.sst")} == ssts

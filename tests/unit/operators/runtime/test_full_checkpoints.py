"""Full checkpoints: every file in the checkpoint's own folder, none shared, restorable with
``shared/`` gone; the incremental ones after it upload what only it holds; retention keeps
the newest full checkpoint beyond the ones it keeps anyway."""

from __future__ import annotations

from pathlib import Path

from sluicegate.coordinator.numbering import mark_triggered
from sluicegate.coordinator.retention import apply_retention
from sluicegate.operators.runtime.state_transfer import SnapshotStore, sst_checksums
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import Storage, open_storage
from sluicegate.operators.storage.manifest import CheckpointManifest, ManifestStore, SubtaskSnapshot


async def take(storage: Storage, snapshots: SnapshotStore, store: RocksDBStateStore, n: int,
               root: Path, *, full: bool = False) -> CheckpointManifest:  # fmt: skip
    for i in range(200):
        store.partition("t", 0).put(b"k-%d-%d" % (n, i), b"v" * 100)
    await mark_triggered(storage, n, full=full)
    local = store.take_local_checkpoint(n, root, uploaded=snapshots.uploaded)
    handle = (await snapshots.upload(local)).handle
    manifest = CheckpointManifest(
        pipeline="p", checkpoint_id=n, attempt=1, completed_at=0.0,
        subtasks={"op#0": SubtaskSnapshot(positions={}, handle=handle, alignment_seconds=0,
                                          sync_seconds=0, async_seconds=0)},
    )  # fmt: skip
    await ManifestStore(storage).commit(manifest)
    return manifest


async def test_a_full_checkpoint_shares_no_file_and_restores_without_shared(
    tmp_path: Path,
) -> None:
    storage = open_storage("memory://")
    snapshots = SnapshotStore(storage)
    with RocksDBStateStore.open(tmp_path / "db") as store:
        one = await take(storage, snapshots, store, 1, tmp_path / "cp")
        two = await take(storage, snapshots, store, 2, tmp_path / "cp", full=True)
        three = await take(storage, snapshots, store, 3, tmp_path / "cp")
    assert not one.is_full
    assert two.is_full
    assert not three.is_full
    files_of_two = two.subtasks["op#0"].handle.files
    assert all(f.path.startswith("checkpoints/2/full/") for f in files_of_two)
    # the SST that only the full checkpoint held went to shared/ with the next incremental one
    shared = set(await storage.list("shared"))
    for f in three.subtasks["op#0"].handle.files:
        assert f.path in shared
    assert sst_checksums(two.subtasks["op#0"].handle) == {}  # its files are its own
    for path in shared:
        await storage.delete(path)
    folder = await SnapshotStore(storage).fetch(two.subtasks["op#0"].handle, tmp_path / "r")
    with RocksDBStateStore.restore(folder, tmp_path / "restored") as restored:
        assert restored.partition("t", 0).get(b"k-2-199") == b"v" * 100
        assert restored.partition("t", 0).get(b"k-3-0") is None


async def test_retention_keeps_the_newest_full_checkpoint(tmp_path: Path) -> None:
    storage = open_storage("memory://")
    snapshots = SnapshotStore(storage)
    with RocksDBStateStore.open(tmp_path / "db") as store:
        for n in range(1, 7):
            await take(storage, snapshots, store, n, tmp_path / "cp", full=n in (2, 3))
    await apply_retention(storage, 2)
    assert await ManifestStore(storage).completed() == [3, 5, 6]
    assert await storage.list("checkpoints/2") == []

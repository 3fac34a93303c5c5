"""Checkpoints with the state changelog, through real RocksDB and real (local) storage: every
handle restores to the state at its checkpoint, whatever the materializations, failed uploads,
full checkpoints and restores in between."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from sluicegate.operators.protocol.messages import SnapshotFile, StateHandle
from sluicegate.operators.runtime.changelog_snapshots import ChangelogSnapshots
from sluicegate.operators.runtime.state_transfer import Restored, SnapshotStore, UploadResult, fetch
from sluicegate.operators.state.local_checkpoint import FileKind
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import (
    Storage,
    StorageUnavailableError,
    open_storage,
)
from sluicegate.operators.storage.layout import SHARED, full_checkpoint_marker
from tests.storage_wrappers import UploadsDown

Rows = dict[bytes, bytes]


class _Job:
    """One subtask's store and its changelog snapshots, with the rows it should hold."""

    def __init__(self, root: Path, storage: Storage, *, ratio: float = 0.5) -> None:
        self.root, self.storage = root, storage
        self.snapshots = ChangelogSnapshots(storage, root / "cp", materialize_ratio=ratio)
        self.store = RocksDBStateStore.open(root / "db")
        self.snapshots.attach(self.store, None)
        self.rows: Rows = {}
        self.rng = random.Random(5)

    def write(self, count: int, keys: int = 2000) -> int:
        changed = 0
        for _ in range(count):
            key = b"key-%06d" % self.rng.randrange(keys)
            if self.rng.random() < 0.1:
                self.store.partition("t", 0).delete(key)
                self.rows.pop(key, None)
            else:
                value = b"v-%09d" % self.rng.randrange(10**9) + b"x" * 40
                self.store.partition("t", 0).put(key, value)
                self.rows[key] = value
                changed += len(key) + len(value)
        return changed

    async def checkpoint(self, n: int) -> UploadResult:
        local = await self.snapshots.take(self.store, n, self.root / "cp")
        return await self.snapshots.upload(local)

    async def settle(self) -> None:
        """Let a materialization running in the background finish."""
        await self.snapshots.materialization()

    async def close(self) -> None:
        await self.snapshots.close()
        self.store.close()


async def _restored_rows(storage: Storage, handle: StateHandle, into: Path) -> Rows:
    folder = await fetch(storage, handle, into / "files")
    with RocksDBStateStore.restore(folder, into / "db") as store:
        return dict(store.partition("t", 0).items())


async def test_every_handle_restores_its_checkpoints_rows(tmp_path: Path) -> None:
    storage = open_storage(tmp_path / "storage")
    job = _Job(tmp_path / "job", storage)
    expected: dict[int, tuple[StateHandle, Rows]] = {}
    for n in range(1, 31):
        job.write(300)
        result = await job.checkpoint(n)
        expected[n] = (result.handle, dict(job.rows))
        if n % 7 == 0:
            await job.settle()
    await job.close()

    chains = [len(h.changelog) for h, _ in expected.values()]
    assert max(chains) > 1  # checkpoints replayed segments...
    assert any(h.files for h, _ in expected.values())  # ...onto materialized bases
    assert job.snapshots.materialized_bytes > 0
    for n, (handle, rows) in expected.items():
        assert await _restored_rows(storage, handle, tmp_path / f"r{n}") == rows, n


async def test_a_checkpoint_uploads_its_segment_and_no_sst(tmp_path: Path) -> None:
    storage = open_storage(tmp_path / "storage")
    job = _Job(tmp_path / "job", storage, ratio=10.0)
    job.write(5000, keys=5000)
    await job.checkpoint(1)
    await job.settle()
    await job.checkpoint(2)  # adopts the base
    for n in range(3, 8):
        changed = job.write(50, keys=5000)
        result = await job.checkpoint(n)
        segment = result.handle.changelog[-1]
        assert result.handle.uploaded_bytes == segment.size
        assert changed < segment.size < 2 * changed  # the records, plus lengths and header
    await job.close()


async def test_a_failed_upload_is_sent_by_the_next_checkpoint(tmp_path: Path) -> None:
    failing = UploadsDown(open_storage(tmp_path / "storage"))
    job = _Job(tmp_path / "job", failing, ratio=100.0)
    job.write(100)
    await job.checkpoint(1)
    job.write(100)
    failing.down = True
    with pytest.raises(StorageUnavailableError):
        await job.checkpoint(2)  # declined
    failing.down = False
    job.write(100)
    result = await job.checkpoint(3)
    await job.close()
    assert [f.name for f in result.handle.changelog][-2:] == [
        "changelog-000000000002",
        "changelog-000000000003",
    ]
    assert await _restored_rows(failing, result.handle, tmp_path / "r") == job.rows


async def test_a_failed_materialization_is_dropped_and_taken_again(tmp_path: Path) -> None:
    failing = UploadsDown(open_storage(tmp_path / "storage"))
    job = _Job(tmp_path / "job", failing)
    job.write(300)
    failing.down = True
    with pytest.raises(StorageUnavailableError):
        await job.checkpoint(1)  # declined; the materialization it started fails too
    await job.settle()
    failing.down = False
    job.write(300)
    second = await job.checkpoint(2)  # drops the failed one, starts another
    assert not (tmp_path / "job" / "cp" / "materialized" / "1").exists()
    assert second.handle.files == ()
    await job.settle()
    job.write(300)
    third = await job.checkpoint(3)  # adopts it
    await job.close()
    assert third.handle.files
    assert [f.name for f in third.handle.changelog] == ["changelog-000000000003"]
    assert await _restored_rows(failing, second.handle, tmp_path / "r2") != job.rows
    assert await _restored_rows(failing, third.handle, tmp_path / "r3") == job.rows


async def test_an_adopted_base_is_checked_in_storage_and_sent_again_if_gone(
    tmp_path: Path,
) -> None:
    storage = open_storage(tmp_path / "storage")
    job = _Job(tmp_path / "job", storage)
    job.write(500)
    await job.checkpoint(1)
    await job.settle()
    # An orphan audit deletes files no committed manifest names yet: the base's, uploaded in
    # the background. The checkpoint that adopts the base must put them back.
    base = job.snapshots._materializing
    assert base is not None
    gone = [f for f in base.result().files if f.name.endswith(".sst")]
    for f in gone:
        await storage.delete(f.path)
    job.write(10)
    result = await job.checkpoint(2)
    await job.close()
    assert {f.name for f in gone} <= {f.name for f in result.handle.files}
    assert result.handle.uploaded_bytes >= sum(f.size for f in gone)
    assert await _restored_rows(storage, result.handle, tmp_path / "r") == job.rows


async def test_a_full_checkpoint_holds_its_own_copies_and_the_chain_goes_on(
    tmp_path: Path,
) -> None:
    storage = open_storage(tmp_path / "storage")
    job = _Job(tmp_path / "job", storage, ratio=100.0)  # one materialization, at 1
    job.write(500)
    await job.checkpoint(1)
    await job.settle()
    job.write(100)
    await job.checkpoint(2)
    job.write(100)
    await storage.put(full_checkpoint_marker(3), b"")
    full = await job.checkpoint(3)
    rows_at_full = dict(job.rows)
    job.write(100)
    after = await job.checkpoint(4)
    await job.close()

    assert full.handle.changelog
    assert full.handle.files
    assert all(not f.path.startswith(f"{SHARED}/") for f in full.handle.all_files)
    assert all(f.path.startswith(f"{SHARED}/") for f in after.handle.all_files)
    assert "changelog-000000000003" in {f.name for f in after.handle.changelog}
    assert await _restored_rows(storage, full.handle, tmp_path / "r3") == rows_at_full
    assert await _restored_rows(storage, after.handle, tmp_path / "r4") == job.rows


@pytest.mark.parametrize("changelog_before", [True, False])
async def test_a_restored_store_continues_the_chain_or_switches_kind(
    tmp_path: Path, changelog_before: bool
) -> None:
    """A restore continues a changelog handle's chain; a native handle becomes the base; and
    a changelog handle restores into a subtask without the changelog."""
    storage = open_storage(tmp_path / "storage")
    if changelog_before:
        first = _Job(tmp_path / "a", storage)
        first.write(300)
        await first.checkpoint(1)
        await first.settle()
        first.write(300)
        handle = (await first.checkpoint(2)).handle
        await first.close()
        rows = first.rows
    else:
        with RocksDBStateStore.open(tmp_path / "a-db") as native:
            native.partition("t", 0).put(b"native", b"1")
            local = native.take_local_checkpoint(2, tmp_path / "a-cp")
            handle = (await SnapshotStore(storage).upload(local)).handle
        rows = {b"native": b"1"}

    folder = await fetch(storage, handle, tmp_path / "b" / "cp")
    snapshots = ChangelogSnapshots(storage, tmp_path / "b" / "cp")
    store = RocksDBStateStore.restore(folder, tmp_path / "b" / "db")
    snapshots.attach(store, Restored(folder, handle))
    assert dict(store.partition("t", 0).items()) == rows
    store.partition("t", 0).put(b"after", b"restore")
    rows = {**rows, b"after": b"restore"}
    result = await snapshots.upload(await snapshots.take(store, 3, tmp_path / "b" / "cp"))
    await snapshots.close()
    store.close()

    assert {f.name for f in handle.all_files} < {f.name for f in result.handle.all_files}
    assert await _restored_rows(storage, result.handle, tmp_path / "r") == rows
    plain_snapshots = SnapshotStore(storage)  # and back to a subtask without the changelog
    folder = await plain_snapshots.fetch(result.handle, tmp_path / "c" / "cp")
    with RocksDBStateStore.restore(folder, tmp_path / "c" / "db") as plain:
        assert dict(plain.partition("t", 0).items()) == rows


def test_a_handle_without_changelog_is_written_as_before() -> None:
    file = SnapshotFile(name="CURRENT", path=f"{SHARED}/{'0' * 64}", size=1, sha256="0" * 64)
    handle = StateHandle(checkpoint_id=1, files=(file,), full_bytes=1, uploaded_bytes=1)
    assert "changelog" not in json.loads(handle.model_dump_json())
    segment = file.model_copy(update={"name": "changelog-000000000001"})
    with_log = handle.model_copy(update={"changelog": (segment,)})
    assert StateHandle.model_validate_json(with_log.model_dump_json()) == with_log


@pytest.mark.parametrize(
    ("files", "changelog"),
    [(("CURRENT",), ("000012.sst",)), (("changelog-000000000001",), ())],
    ids=["a RocksDB file in the changelog", "a segment among the RocksDB files"],
)
def test_a_handle_mixing_segments_and_rocksdb_files_is_refused(
    files: tuple[str, ...], changelog: tuple[str, ...]
) -> None:
    def entry(name: str) -> dict[str, object]:
        return {"name": name, "path": f"{SHARED}/{'0' * 64}", "size": 1, "sha256": "0" * 64}

    data = {
        "checkpoint_id": 1,
        "files": [entry(n) for n in files],
        "changelog": [entry(n) for n in changelog],
        "full_bytes": 1,
        "uploaded_bytes": 1,
    }
    with pytest.raises(ValueError, match="changelog"):
        StateHandle.model_validate(data)


async def test_checkpoints_on_one_base_reuse_its_entries_and_rows(tmp_path: Path) -> None:
    """The base's files are listed, and their handle rows built, once for the base's life."""
    storage = open_storage(tmp_path / "storage")
    job = _Job(tmp_path / "job", storage, ratio=10.0)
    job.write(2000)
    await job.checkpoint(1)
    await job.settle()
    await job.checkpoint(2)  # adopts the base
    taken = []
    for n in (3, 4):
        job.write(50)
        local = await job.snapshots.take(job.store, n, job.root / "cp")
        handle = (await job.snapshots.upload(local)).handle
        taken.append((local.inventory, handle, dict(job.rows)))
    await job.close()

    (inventory3, handle3, _), (inventory4, handle4, _) = taken
    base3, base4 = (
        [f for f in i.files if f.kind is not FileKind.CHANGELOG] for i in (inventory3, inventory4)
    )
    assert base3
    assert all(a is b for a, b in zip(base3, base4, strict=True))
    assert all(a is b for a, b in zip(handle3.files, handle4.files, strict=True))
    for f, row in zip(base4, handle4.files, strict=True):
        assert f.sha256 is not None
        assert row == SnapshotFile(
            name=f.name, path=f"{SHARED}/{f.sha256}", size=f.size, sha256=f.sha256
        )
    for n, (_, handle, rows) in zip((3, 4), taken, strict=True):
        assert await _restored_rows(storage, handle, tmp_path / f"r{n}") == rows

"""The handle's rows of SSTs already in ``shared/``: built once, never stale."""

from __future__ import annotations

import hashlib
from pathlib import Path

from sluicegate.operators.protocol.messages import SnapshotFile
from sluicegate.operators.runtime.state_transfer import SharedRows, SnapshotStore
from sluicegate.operators.state.local_checkpoint import CheckpointFile, FileKind
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import open_storage


def _sst(name: str, size: int, content: bytes) -> CheckpointFile:
    sha256 = hashlib.sha256(content).hexdigest()
    return CheckpointFile(name=name, size=size, kind=FileKind.SST, new=False, sha256=sha256)


def _row(entry: CheckpointFile) -> SnapshotFile:
    assert entry.sha256 is not None
    path = f"shared/{entry.sha256}"
    return SnapshotFile(name=entry.name, path=path, size=entry.size, sha256=entry.sha256)


def test_a_row_is_built_once_for_every_checkpoint_that_names_the_file() -> None:
    rows = SharedRows()
    a, b = _sst("000009.sst", 10, b"a"), _sst("000011.sst", 20, b"b")
    first = rows.of([a, b])
    second = rows.of([a, b])
    assert first == [_row(a), _row(b)]
    assert all(again is row for again, row in zip(second, first, strict=True))


def test_a_file_of_the_same_name_and_other_size_or_bytes_gets_its_own_row() -> None:
    """As after a restore: RocksDB names files on from the restored MANIFEST, so a name of the
    abandoned lifetime comes back for other bytes."""
    rows = SharedRows()
    old = _sst("000019.sst", 10723, b"abandoned")
    rows.of([old])
    for changed in (_sst("000019.sst", 1164, b"restored"), _sst("000019.sst", 10723, b"other")):
        assert rows.of([changed]) == [_row(changed)]


def test_the_rows_of_ssts_a_checkpoint_put_in_shared_serve_the_next() -> None:
    rows = SharedRows()
    a, b = _sst("000009.sst", 10, b"a"), _sst("000011.sst", 20, b"b")
    put = _row(a)
    assert b.sha256 is not None
    elsewhere = SnapshotFile(  # a full checkpoint's own copy: not the row of shared/
        name=b.name, path=f"checkpoints/3/full/{b.sha256}", size=b.size, sha256=b.sha256
    )
    assert rows.of([], stored=[put, elsewhere]) == []
    row_a, row_b = rows.of([a, b])
    assert row_a is put
    assert row_b == _row(b)


def test_only_the_latest_checkpoints_rows_are_kept() -> None:
    rows = SharedRows()
    a, b = _sst("000009.sst", 10, b"a"), _sst("000011.sst", 20, b"b")
    (first,) = rows.of([a])
    rows.of([b])  # a was compacted away
    (again,) = rows.of([a])
    assert again == first
    assert again is not first


async def test_incremental_checkpoints_reuse_rows_and_still_restore_verified(
    tmp_path: Path,
) -> None:
    storage = open_storage(tmp_path / "storage")
    snapshots = SnapshotStore(storage)
    handles = []
    with RocksDBStateStore.open(tmp_path / "db") as store:
        rows = store.partition("t", 0)
        for n in range(1, 4):
            for i in range(200):
                rows.put(b"key-%05d" % i, b"value %d-%05d" % (n, i))
            local = await snapshots.take(store, n, tmp_path / "cp")
            handles.append((await snapshots.upload(local)).handle)
        expected = list(rows.items())
    second, third = ({f.name: f for f in h.files} for h in handles[1:])
    for name in second.keys() & third.keys():
        if name.endswith(".sst"):
            assert third[name] is second[name]  # stored already: the row built once
            assert third[name] == SnapshotFile(
                name=name, path=f"shared/{third[name].sha256}", size=third[name].size,
                sha256=third[name].sha256,
            )  # fmt: skip
    folder = await snapshots.fetch(handles[-1], tmp_path / "elsewhere")  # every file verified
    assert folder.name == "3.download"
    with RocksDBStateStore.restore(folder, tmp_path / "restored") as restored:
        assert list(restored.partition("t", 0).items()) == expected

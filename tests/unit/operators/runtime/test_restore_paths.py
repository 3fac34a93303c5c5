"""A manifest names the files a restore writes; storage is writable by more than the
coordinator, so those names are checked: a restore never writes outside the subtask's state
folder (issue 13: a manifest with ``../`` did)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from sluicegate.operators.protocol.messages import SnapshotFile, StateHandle
from sluicegate.operators.runtime.exceptions import CorruptCheckpointError
from sluicegate.operators.runtime.state_transfer import SnapshotStore
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import Storage, open_storage
from sluicegate.operators.storage.layout import checkpoint_manifest
from sluicegate.operators.storage.manifest import CheckpointManifest, ManifestStore, SubtaskSnapshot

ESCAPES = ["../../outside.sst", "/tmp/outside.sst", "sub/000009.sst", "..", ".hidden", ""]


async def committed(storage: Storage, tmp_path: Path, checkpoint_id: int) -> StateHandle:
    with RocksDBStateStore.open(tmp_path / f"db{checkpoint_id}") as store:
        store.partition("in", 0).put(b"k", b"v")
        local = store.take_local_checkpoint(checkpoint_id, tmp_path / f"cp{checkpoint_id}")
        handle = (await SnapshotStore(storage).upload(local)).handle
    snapshot = SubtaskSnapshot(
        positions={"in": {0: 1}}, handle=handle,
        alignment_seconds=0, sync_seconds=0, async_seconds=0,
    )  # fmt: skip
    manifest = CheckpointManifest(
        pipeline="p", checkpoint_id=checkpoint_id, attempt=1, completed_at=0.0,
        subtasks={"op#0": snapshot},
    )  # fmt: skip
    await ManifestStore(storage).commit(manifest)
    return handle


@pytest.mark.parametrize("name", ESCAPES)
def test_a_file_name_that_is_not_a_plain_name_is_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="name"):
        SnapshotFile(name=name, path="shared/x", size=1, sha256="0" * 64)


def test_rocksdb_file_names_are_plain_names() -> None:
    for name in ("000012.sst", "MANIFEST-000005", "CURRENT", "OPTIONS-000007"):
        assert SnapshotFile(name=name, path="shared/x", size=1, sha256="0" * 64).name == name


async def test_a_tampered_manifest_is_not_restored_from(tmp_path: Path) -> None:
    storage = open_storage("memory://")
    await committed(storage, tmp_path, 1)
    await committed(storage, tmp_path, 2)
    # Someone with write access to storage rewrites the newest manifest.
    key = checkpoint_manifest(2)
    data = json.loads(await storage.get(key))
    data["subtasks"]["op#0"]["handle"]["files"][0]["name"] = "../../../../home/me/.bashrc"
    await storage.put(key, json.dumps(data).encode())

    found = await ManifestStore(storage).find_latest()

    assert found.manifest is not None
    assert found.manifest.checkpoint_id == 1  # the one before it
    (lost,) = found.lost
    assert lost.checkpoint_id == 2
    assert "its manifest cannot be read" in lost.reason


async def test_fetch_refuses_a_handle_that_escapes_the_folder_and_writes_nothing(
    tmp_path: Path,
) -> None:
    storage = open_storage("memory://")
    handle = await committed(storage, tmp_path, 3)
    first = handle.files[0]
    escape = SnapshotFile.model_construct(
        name="../escaped", path=first.path, size=first.size, sha256=first.sha256
    )
    forged = handle.model_copy(update={"files": (escape, *handle.files[1:])})
    root = tmp_path / "state" / "op#0"
    root.mkdir(parents=True)

    with pytest.raises(CorruptCheckpointError) as caught:
        await SnapshotStore(storage).fetch(forged, root)

    assert caught.value.checkpoint_id == 3
    assert caught.value.path == first.path
    assert not (root / "escaped").exists()
    assert [p.name for p in (tmp_path / "state").iterdir()] == ["op#0"]

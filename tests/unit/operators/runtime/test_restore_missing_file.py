"""A file a manifest lists but storage no longer holds makes the checkpoint as unrestorable as
a corrupt one: the subtask fails with `CorruptCheckpointError`, which the worker reports as
``SubtaskFailed(corrupt_checkpoint=n)`` so the coordinator falls back to the previous one."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from sluicegate.operators.graph import SubtaskId
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.protocol.messages import RestorePoint
from sluicegate.operators.runtime.control import InMemoryControl
from sluicegate.operators.runtime.exceptions import CorruptCheckpointError
from sluicegate.operators.runtime.state_transfer import SnapshotStore
from sluicegate.operators.runtime.subtask import Subtask
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import Storage, open_storage


async def restore_point(storage: Storage, tmp_path: Path) -> RestorePoint:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        store.partition("in", 0).put(b"k", b"v")
        uploaded = await SnapshotStore(storage).upload(
            store.take_local_checkpoint(7, tmp_path / "cp")
        )
    return RestorePoint(7, {}, uploaded.handle)


def subtask(storage: Storage, restore: RestorePoint, local_dir: Path) -> Subtask:
    p = Pipeline("restore")
    p.source("in", partitions=1)
    p.operator("op", lambda record, ctx: None, inputs="in")
    return Subtask(
        graph=p.build(),
        subtask=SubtaskId("op", 0),
        attempt=2,
        bootstrap="127.0.0.1:1",  # never contacted: the restore fails before any Kafka client
        storage=storage,
        control=InMemoryControl().link("op#0"),
        local_dir=local_dir,  # a fresh folder: no local copy, every file is downloaded
        restore=restore,
        registry=CollectorRegistry(),
    )


async def test_a_missing_checkpoint_file_is_treated_as_corrupt(tmp_path: Path) -> None:
    storage = open_storage("memory://")
    restore = await restore_point(storage, tmp_path)
    victim = next(f for f in restore.handle.files if f.name.endswith(".sst"))
    await storage.delete(victim.path)

    with pytest.raises(CorruptCheckpointError) as caught:
        await subtask(storage, restore, tmp_path / "fresh").run()

    assert caught.value.checkpoint_id == 7
    assert caught.value.path == victim.path
    assert caught.value.missing
    assert f"checkpoint 7 is corrupt: {victim.path} is missing from storage" in str(caught.value)


async def test_a_corrupt_checkpoint_file_is_still_reported_as_corrupt(tmp_path: Path) -> None:
    storage = open_storage("memory://")
    restore = await restore_point(storage, tmp_path)
    victim = next(f for f in restore.handle.files if f.name.endswith(".sst"))
    await storage.put(victim.path, b"not the state")

    with pytest.raises(CorruptCheckpointError) as caught:
        await subtask(storage, restore, tmp_path / "fresh").run()

    assert caught.value.checkpoint_id == 7
    assert not caught.value.missing

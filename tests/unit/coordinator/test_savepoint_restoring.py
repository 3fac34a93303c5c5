"""Which checkpoint a new attempt restores: a savepoint once (not again when the coordinator
starts again with the same flag, but again when it was deleted and taken anew under that
name), a checkpoint at another parallelism re-split, an unchanged one as it is."""

from __future__ import annotations

from pathlib import Path

from sluicegate.coordinator.savepoints.restoring import already_restored, prepare_restore
from sluicegate.operators.savepoints.store import SavepointStore
from sluicegate.operators.state.versions import StateVersions
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.manifest import ManifestStore
from tests.unit.operators.savepoints.test_rescale import checkpoint_of, graph, savepoint_from


async def test_a_savepoint_is_restored_once_per_creation(tmp_path: Path) -> None:
    storage = open_storage("memory://")
    await savepoint_from(storage, tmp_path / "a", graph(2))
    assert not await already_restored(storage, "sp")
    first = await prepare_restore(
        storage, graph(3), None, attempt=2, from_savepoint="sp", allow_non_restored=False
    )
    assert first is not None
    assert len(first.subtasks) == 3
    assert await ManifestStore(storage).completed() == [first.checkpoint_id]
    assert await already_restored(storage, "sp")
    again = await prepare_restore(
        storage, graph(3), first, attempt=3, from_savepoint="sp", allow_non_restored=False
    )
    assert again is first  # resumes from the job's own checkpoint
    await SavepointStore(storage).delete("sp")
    assert await already_restored(storage, "sp")  # gone: nothing to restore
    await savepoint_from(storage, tmp_path / "b", graph(2))  # a new one, same name
    assert not await already_restored(storage, "sp")


async def test_a_checkpoint_is_re_split_only_when_the_parallelism_changed(tmp_path: Path) -> None:
    storage = open_storage("memory://")
    latest = await checkpoint_of(storage, graph(2), tmp_path / "b")
    await ManifestStore(storage).commit(latest)
    same = await prepare_restore(
        storage, graph(2), latest, attempt=2, from_savepoint=None, allow_non_restored=False
    )
    assert same is latest
    rescaled = await prepare_restore(
        storage, graph(1), latest, attempt=2, from_savepoint=None, allow_non_restored=False
    )
    assert rescaled is not None
    assert rescaled.checkpoint_id > latest.checkpoint_id
    assert list(rescaled.subtasks) == ["counter#0"]


async def test_in_new_storage_the_ids_start_above_the_savepoints_checkpoint(
    tmp_path: Path,
) -> None:
    old = open_storage("memory://")
    await savepoint_from(old, tmp_path / "a", graph(2))  # from checkpoint 1
    new = open_storage("memory://")
    for path in await old.list("savepoints"):
        await new.put(path, await old.get(path))
    manifest = await SavepointStore(new).load("sp")
    forged = manifest.model_copy(update={"from_checkpoint": 40})
    await new.put(SavepointStore.manifest_path("sp"), forged.to_json())
    restored = await prepare_restore(
        new, graph(2), None, attempt=1, from_savepoint="sp", allow_non_restored=False
    )
    assert restored is not None
    assert restored.checkpoint_id == 41


async def test_a_checkpoint_of_older_state_is_upgraded_at_the_same_parallelism(
    tmp_path: Path,
) -> None:
    storage = open_storage("memory://")
    latest = await checkpoint_of(storage, graph(2), tmp_path / "b")  # no state_versions: 1
    await ManifestStore(storage).commit(latest)
    newer_code = graph(2, StateVersions.of(2, {1: lambda key, value: (key, value + b"!")}))
    upgraded = await prepare_restore(
        storage, newer_code, latest, attempt=2, from_savepoint=None, allow_non_restored=False
    )
    assert upgraded is not None
    assert upgraded.checkpoint_id > latest.checkpoint_id
    assert upgraded.state_version("counter") == 2
    again = await prepare_restore(
        storage, newer_code, upgraded, attempt=3, from_savepoint=None, allow_non_restored=False
    )
    assert again is upgraded

"""`ManifestStore.find_latest` tells a completed checkpoint whose manifest was deleted or
damaged (its ``_completed`` marker is left) from one that never completed or that retention
dropped, so a restore that falls back past it can say so."""

from __future__ import annotations

from sluicegate.operators.storage import Storage, open_storage
from sluicegate.operators.storage.layout import checkpoint_manifest, checkpoint_prefix
from sluicegate.operators.storage.manifest import LostCheckpoint, ManifestStore
from tests.unit.coordinator.test_checkpoint_stats import manifest


async def committed(*ids: int) -> tuple[Storage, ManifestStore]:
    storage = open_storage("memory://")
    store = ManifestStore(storage)
    for n in ids:
        await storage.put(f"{checkpoint_prefix(n)}/_triggered", b"")
        await store.commit(manifest(n))
    return storage, store


async def test_a_deleted_manifest_falls_back_and_is_reported_lost() -> None:
    storage, store = await committed(1, 2, 3)
    await storage.delete(checkpoint_manifest(3))

    found = await store.find_latest()

    assert found.manifest is not None
    assert found.manifest.checkpoint_id == 2
    assert found.lost == (LostCheckpoint(3, "its manifest is missing"),)
    assert (await store.latest()) == found.manifest


async def test_an_unreadable_manifest_is_reported_lost() -> None:
    storage, store = await committed(1, 2)
    await storage.put(checkpoint_manifest(2), b"{not json")

    found = await store.find_latest()

    assert found.manifest is not None
    assert found.manifest.checkpoint_id == 1
    assert [lost.checkpoint_id for lost in found.lost] == [2]
    assert found.lost[0].reason.startswith("its manifest cannot be read")


async def test_marking_a_lost_checkpoint_corrupt_reports_it_once() -> None:
    storage, store = await committed(1, 2, 3)
    await storage.delete(checkpoint_manifest(3))
    await store.mark_corrupt(3, "its manifest is missing")

    found = await store.find_latest()

    assert found.manifest is not None
    assert found.manifest.checkpoint_id == 2
    assert found.lost == ()


async def test_aborted_and_dropped_checkpoints_are_not_lost() -> None:
    storage, store = await committed(1, 2, 3)
    await storage.put(f"{checkpoint_prefix(4)}/_triggered", b"")  # aborted: no manifest ever
    for path in await storage.list(checkpoint_prefix(1)):  # what retention does
        await storage.delete(path)

    found = await store.find_latest()

    assert found.manifest is not None
    assert found.manifest.checkpoint_id == 3
    assert found.lost == ()
    assert found.any_completed


async def test_every_manifest_deleted_is_not_a_fresh_start() -> None:
    storage, store = await committed(1, 2)
    for n in (1, 2):
        await storage.delete(checkpoint_manifest(n))

    found = await store.find_latest()

    assert found.manifest is None
    assert [lost.checkpoint_id for lost in found.lost] == [1, 2]
    assert found.any_completed
    assert not (await ManifestStore(open_storage("memory://")).find_latest()).any_completed

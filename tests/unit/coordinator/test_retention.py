"""Retention and the orphan audit: reference counting, crash-safe deletion order, the audit's
confirmation rule, and random histories of checkpoints sharing files."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

import pytest
from hypothesis import given, settings, strategies as st

from sluicegate.coordinator.exceptions import UnreadableManifestError
from sluicegate.coordinator.retention import (
    AuditReport,
    RetentionPlan,
    apply_retention,
    audit,
    delete_orphans,
    plan_retention,
)
from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.protocol.messages import FilePart, SnapshotFile, StateHandle
from sluicegate.operators.storage import (
    Storage,
    StorageUnavailableError,
    open_storage,
)
from sluicegate.operators.storage.layout import checkpoint_manifest, shared_file
from sluicegate.operators.storage.manifest import CheckpointManifest, ManifestStore, SubtaskSnapshot
from tests.storage_wrappers import DelegatingStorage

Files = Mapping[str, Iterable[int]]
"""subtask -> numbers of the shared files its handle names."""


def sha(i: int) -> str:
    return f"{i:064x}"


def path(i: int) -> str:
    return shared_file(sha(i))


def size_of(i: int) -> int:
    return 1 + i % 5


def manifest(n: int, files: Files) -> CheckpointManifest:
    subtasks = {}
    for subtask, numbers in files.items():
        entries = tuple(
            SnapshotFile(name=f"{i:06d}.sst", path=path(i), size=size_of(i), sha256=sha(i))
            for i in sorted(set(numbers))
        )
        handle = StateHandle(
            checkpoint_id=n,
            files=entries,
            full_bytes=sum(f.size for f in entries),
            uploaded_bytes=0,
        )
        subtasks[subtask] = SubtaskSnapshot(
            positions={"t": {0: n}},
            handle=handle,
            alignment_seconds=0,
            sync_seconds=0,
            async_seconds=0,
        )
    return CheckpointManifest(
        pipeline="p", checkpoint_id=n, attempt=1, completed_at=float(n), subtasks=subtasks
    )


async def upload(storage: Storage, n: int, files: Files) -> None:
    """What a triggered checkpoint leaves before its manifest: the marker, then its files."""
    await storage.put(f"checkpoints/{n}/_triggered", b"")
    for numbers in files.values():
        for i in numbers:
            await storage.put(path(i), b"f" * size_of(i))


async def complete(storage: Storage, n: int, files: Files) -> CheckpointManifest:
    await upload(storage, n, files)
    m = manifest(n, files)
    await ManifestStore(storage).commit(m)
    return m


async def broken_manifests(storage: Storage) -> list[int]:
    """Visible manifests naming a missing file or one of another size: not restorable."""
    store = ManifestStore(storage)
    present = set(await storage.list("shared"))
    broken = []
    for n in await store.completed():
        m = await store.load(n)
        for s in m.subtasks.values():
            for f in s.handle.files:
                if f.path not in present or await storage.size(f.path) != f.size:
                    broken.append(n)
    return sorted(set(broken))


class FailingStorage(DelegatingStorage):
    """Delegates to ``inner``; the delete after ``fail_after`` successful ones raises (a crash),
    and after every successful delete ``check`` runs against ``inner``."""

    def __init__(
        self,
        inner: Storage,
        *,
        fail_after: int | None = None,
        check: Callable[[Storage], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(inner)
        self.fail_after = fail_after
        self.check = check
        self.deletes = 0

    async def delete(self, path: str) -> None:
        if self.fail_after is not None and self.deletes >= self.fail_after:
            raise StorageUnavailableError("delete", path, "injected crash")
        await self.inner.delete(path)
        self.deletes += 1
        if self.check is not None:
            await self.check(self.inner)


async def every_manifest_restorable(storage: Storage) -> None:
    assert await broken_manifests(storage) == []


# A history in which consecutive checkpoints share files, as incremental ones do.
HISTORY: dict[int, dict[str, list[int]]] = {
    1: {"a#0": [1, 2], "b#0": [10]},
    2: {"a#0": [2, 3], "b#0": [10, 11]},
    3: {"a#0": [3, 4], "b#0": [11]},
    4: {"a#0": [3, 5], "b#0": [11, 12]},
    5: {"a#0": [5, 6], "b#0": [12]},
}


async def write_history(storage: Storage) -> list[CheckpointManifest]:
    return [await complete(storage, n, files) for n, files in HISTORY.items()]


def referenced(manifests: Iterable[CheckpointManifest]) -> set[str]:
    return {f.path for m in manifests for s in m.subtasks.values() for f in s.handle.files}


# -- plan_retention ---------------------------------------------------------------------------


def test_plan_keeps_the_newest_and_deletes_files_only_dropped_ones_reference() -> None:
    manifests = [manifest(n, files) for n, files in HISTORY.items()]
    plan = plan_retention(list(reversed(manifests)), keep=3)
    assert plan == RetentionPlan(
        keep_checkpoints=(3, 4, 5),
        delete_checkpoints=(1, 2),
        delete_files=tuple(sorted([path(1), path(2), path(10)])),
    )
    # 3 and 11 are referenced by dropped and kept checkpoints alike: reference counted, kept.


def test_changelog_segments_are_reference_counted_like_files() -> None:
    """With the state changelog, consecutive checkpoints name the same segments."""

    def with_segments(n: int, numbers: list[int]) -> CheckpointManifest:
        plain = manifest(n, {"a#0": []})
        segments = tuple(
            SnapshotFile(name=f"changelog-{i:012d}", path=path(i), size=size_of(i), sha256=sha(i))
            for i in numbers
        )
        snapshot = plain.subtasks["a#0"]
        handle = snapshot.handle.model_copy(update={"changelog": segments})
        subtasks = {"a#0": snapshot.model_copy(update={"handle": handle})}
        return plain.model_copy(update={"subtasks": subtasks})

    manifests = [with_segments(1, [1]), with_segments(2, [1, 2]), with_segments(3, [2, 3])]
    plan = plan_retention(manifests, keep=1)
    assert plan.delete_files == (path(1),)


def test_every_part_of_a_file_in_parts_is_reference_counted() -> None:
    """A MANIFEST stored as an earlier copy plus deltas: a kept checkpoint naming the first
    part only through ``parts`` keeps it."""

    def with_manifest(n: int, numbers: list[int]) -> CheckpointManifest:
        plain = manifest(n, {"a#0": []})
        parts = tuple(FilePart(path=path(i), size=size_of(i), sha256=sha(i)) for i in numbers)
        whole = SnapshotFile(
            name="MANIFEST-000005",
            path=parts[0].path,
            size=sum(p.size for p in parts),
            sha256=sha(99),
            parts=parts,
        )
        snapshot = plain.subtasks["a#0"]
        handle = snapshot.handle.model_copy(update={"files": (whole,)})
        subtasks = {"a#0": snapshot.model_copy(update={"handle": handle})}
        return plain.model_copy(update={"subtasks": subtasks})

    manifests = [with_manifest(1, [1, 2]), with_manifest(2, [1, 2, 3]), with_manifest(3, [4, 5])]
    assert plan_retention(manifests, keep=2).delete_files == ()
    assert plan_retention(manifests, keep=1).delete_files == (path(1), path(2), path(3))


def test_plan_with_fewer_checkpoints_than_keep_deletes_nothing() -> None:
    manifests = [manifest(n, HISTORY[n]) for n in (1, 2)]
    assert plan_retention(manifests) == RetentionPlan((1, 2), (), ())
    assert plan_retention([]) == RetentionPlan((), (), ())


def test_a_pinned_checkpoint_is_kept_with_its_files() -> None:
    manifests = [manifest(n, files) for n, files in HISTORY.items()]
    plan = plan_retention(manifests, keep=1, pinned=[2, 99])
    assert plan.keep_checkpoints == (2, 5)
    assert plan.delete_checkpoints == (1, 3, 4)
    assert path(2) not in plan.delete_files
    assert path(10) not in plan.delete_files
    assert path(4) in plan.delete_files


def test_plan_never_deletes_files_outside_shared() -> None:
    odd = SnapshotFile(name="x", path="savepoints/s/x", size=1, sha256=sha(1))
    handle = StateHandle(checkpoint_id=1, files=(odd,), full_bytes=1, uploaded_bytes=0)
    snapshot = SubtaskSnapshot(
        positions={}, handle=handle, alignment_seconds=0, sync_seconds=0, async_seconds=0
    )
    old = CheckpointManifest(
        pipeline="p", checkpoint_id=1, attempt=1, completed_at=0, subtasks={"a#0": snapshot}
    )
    plan = plan_retention([old, manifest(2, {"a#0": [1]})], keep=1)
    assert plan.delete_checkpoints == (1,)
    assert plan.delete_files == ()


@pytest.mark.parametrize("keep", [0, -1])
def test_keep_must_be_at_least_one(keep: int) -> None:
    with pytest.raises(ConfigError):
        plan_retention([], keep)


# -- apply_retention --------------------------------------------------------------------------


async def test_apply_deletes_dropped_checkpoints_and_their_own_files() -> None:
    storage = open_storage("memory://")
    manifests = await write_history(storage)
    await storage.put("checkpoints/6/_triggered", b"")  # in flight: untouched
    plan = await apply_retention(storage, keep=2)
    assert plan.keep_checkpoints == (4, 5)
    assert await ManifestStore(storage).completed() == [4, 5]
    assert await storage.list("checkpoints") == [
        "checkpoints/4/_completed",
        checkpoint_manifest(4),
        "checkpoints/4/_triggered",
        "checkpoints/5/_completed",
        checkpoint_manifest(5),
        "checkpoints/5/_triggered",
        "checkpoints/6/_triggered",
    ]
    assert set(await storage.list("shared")) == referenced(manifests[3:])
    assert await broken_manifests(storage) == []
    assert await apply_retention(storage, keep=2) == RetentionPlan((4, 5), (), ())


async def count_deletes(keep: int) -> int:
    storage = FailingStorage(open_storage("memory://"))
    await write_history(storage)
    await apply_retention(storage, keep=keep)
    return storage.deletes


@pytest.mark.parametrize("keep", [1, 2, 3])
async def test_a_crash_after_any_number_of_deletes_leaves_every_kept_checkpoint_restorable(
    keep: int,
) -> None:
    total = await count_deletes(keep)
    assert total > 0
    for k in range(total + 1):
        inner = open_storage("memory://")
        manifests = await write_history(inner)
        kept = manifests[-keep:]
        crashing = FailingStorage(inner, fail_after=k, check=every_manifest_restorable)
        if k < total:
            with pytest.raises(StorageUnavailableError):
                await apply_retention(crashing, keep=keep)
        else:
            await apply_retention(crashing, keep=keep)
        completed = await ManifestStore(inner).completed()
        assert {m.checkpoint_id for m in kept} <= set(completed), k
        assert await broken_manifests(inner) == [], k

        # Recovery: retention again, then the audit confirmed across a newer checkpoint.
        await apply_retention(inner, keep=keep)
        await clean_up(inner, next_id=6)
        assert set(await inner.list("shared")) == referenced(kept) | {path(99)}, k
        assert await ManifestStore(inner).completed() == [m.checkpoint_id for m in kept] + [6]


async def clean_up(storage: Storage, *, next_id: int) -> None:
    """Audit, complete one more checkpoint, audit again and delete what is confirmed."""
    first = await audit(storage)
    await complete(storage, next_id, {"a#0": [99]})
    second = await audit(storage, previous=first)
    await delete_orphans(storage, second.deletable)
    final = await audit(storage)
    assert final.orphans == ()


# -- audit ------------------------------------------------------------------------------------


async def test_files_of_a_checkpoint_in_flight_are_reported_but_not_deletable() -> None:
    storage = open_storage("memory://")
    await write_history(storage)
    await upload(storage, 6, {"a#0": [40, 5]})  # 5 is shared with checkpoint 5
    report = await audit(storage)
    assert report.newest_completed == 5
    assert report.unreferenced_files == (path(40),)
    assert report.stale_checkpoint_files == ()
    assert report.deletable == ()
    # Still in flight at the next audit: no newer checkpoint completed, still not deletable.
    again = await audit(storage, previous=report)
    assert again.deletable == ()


async def test_an_orphan_confirmed_across_a_newer_completed_checkpoint_is_deletable() -> None:
    storage = open_storage("memory://")
    await write_history(storage)
    await upload(storage, 6, {"a#0": [40]})  # aborted
    first = await audit(storage)
    await upload(storage, 7, {"a#0": [41]})  # uploaded after the first audit
    await complete(storage, 8, {"a#0": [5, 6]})
    second = await audit(storage, previous=first)
    assert second.newest_completed == 8
    assert second.unreferenced_files == (path(40), path(41))
    assert second.stale_checkpoint_files == ("checkpoints/6/_triggered", "checkpoints/7/_triggered")
    assert second.deletable == (
        "checkpoints/6/_triggered",
        "checkpoints/7/_triggered",
        path(40),
    )
    assert await delete_orphans(storage, second.deletable) == list(second.deletable)
    assert (await audit(storage)).unreferenced_files == (path(41),)


async def test_an_unreferenced_file_whose_checkpoint_then_completed_is_not_deletable() -> None:
    storage = open_storage("memory://")
    await write_history(storage)
    await upload(storage, 6, {"a#0": [40]})
    first = await audit(storage)
    assert first.unreferenced_files == (path(40),)
    await complete(storage, 6, {"a#0": [40]})
    second = await audit(storage, previous=first)
    assert second.orphans == ()


async def test_aborted_folders_newer_than_the_newest_completed_one_are_left_alone() -> None:
    storage = open_storage("memory://")
    await upload(storage, 1, {})
    await complete(storage, 2, {"a#0": [1]})
    await upload(storage, 3, {})
    report = await audit(storage)
    assert report.stale_checkpoint_files == ("checkpoints/1/_triggered",)


async def test_without_any_completed_checkpoint_nothing_is_deletable() -> None:
    storage = open_storage("memory://")
    await upload(storage, 1, {"a#0": [1]})
    first = await audit(storage)
    second = await audit(storage, previous=first)
    assert second == AuditReport(None, (path(1),), (), ())


async def test_a_first_completed_checkpoint_confirms_orphans_of_an_audit_without_one() -> None:
    storage = open_storage("memory://")
    await upload(storage, 1, {"a#0": [1]})
    first = await audit(storage)
    await complete(storage, 2, {"a#0": [2]})
    second = await audit(storage, previous=first)
    assert second.deletable == ("checkpoints/1/_triggered", path(1))


async def test_delete_orphans_spares_what_a_manifest_needs_and_what_is_not_an_orphan() -> None:
    storage = open_storage("memory://")
    await write_history(storage)
    await upload(storage, 6, {"a#0": [40, 41]})
    await complete(storage, 7, {"a#0": [41]})  # committed after a (pretend) audit
    await storage.put("savepoints/s/x", b"")
    deleted = await delete_orphans(
        storage,
        [
            path(40),
            path(41),
            checkpoint_manifest(3),
            "checkpoints/6/_triggered",
            "checkpoints/7/_triggered",
            "savepoints/s/x",
        ],
    )
    assert deleted == ["checkpoints/6/_triggered", path(40)]
    assert await storage.exists("checkpoints/7/_triggered")
    assert await storage.exists("savepoints/s/x")
    assert await broken_manifests(storage) == []


async def test_an_unreadable_manifest_stops_retention_and_the_audit() -> None:
    storage = open_storage("memory://")
    await write_history(storage)
    await storage.put(checkpoint_manifest(2), b'{"schema_version": 99}')
    before = await storage.list()
    with pytest.raises(UnreadableManifestError) as caught:
        await apply_retention(storage, keep=1)
    assert caught.value.checkpoint_id == 2
    with pytest.raises(UnreadableManifestError):
        await audit(storage)
    with pytest.raises(UnreadableManifestError):
        await delete_orphans(storage, [path(1)])
    assert await storage.list() == before


# -- random histories -------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    completed: bool
    files: dict[str, list[int]]


steps = st.builds(
    Step,
    completed=st.booleans(),
    files=st.dictionaries(
        st.sampled_from(["a#0", "a#1", "b#0"]),
        st.lists(st.integers(0, 15), max_size=4),
        min_size=1,
        max_size=3,
    ),
)


@settings(max_examples=60, deadline=None)
@given(
    history=st.lists(steps, min_size=1, max_size=8),
    keep=st.integers(1, 4),
    crash_after=st.none() | st.integers(0, 30),
)
def test_random_histories_keep_what_kept_checkpoints_need_and_end_without_orphans(
    history: list[Step], keep: int, crash_after: int | None
) -> None:
    asyncio.run(_random_history(history, keep, crash_after))


async def _random_history(history: list[Step], keep: int, crash_after: int | None) -> None:
    inner = open_storage("memory://")
    completed: list[CheckpointManifest] = []
    for n, step in enumerate(history, start=1):
        if step.completed:
            completed.append(await complete(inner, n, step.files))
        else:
            await upload(inner, n, step.files)
    kept = completed[-keep:]
    plan = plan_retention(completed, keep)
    assert not set(plan.delete_files) & referenced(kept)
    assert set(plan.delete_files) == referenced(completed[:-keep]) - referenced(kept)

    crashing = FailingStorage(inner, fail_after=crash_after, check=every_manifest_restorable)
    try:
        await apply_retention(crashing, keep=keep)
    except StorageUnavailableError:
        assert crash_after is not None
    assert await broken_manifests(inner) == []
    assert {m.checkpoint_id for m in kept} <= set(await ManifestStore(inner).completed())

    await apply_retention(inner, keep=keep)
    next_id = len(history) + 1
    await clean_up(inner, next_id=next_id)
    survivors = [*kept, manifest(next_id, {"a#0": [99]})]
    assert set(await inner.list("shared")) == referenced(survivors)
    assert await ManifestStore(inner).completed() == [m.checkpoint_id for m in survivors]
    assert await broken_manifests(inner) == []


class DeletingAfterList(FailingStorage):
    """Retention deletes ``victim``'s manifest right after a listing, before any load."""

    def __init__(self, inner: Storage, victim: int) -> None:
        super().__init__(inner)
        self.victim = victim

    async def list(self, prefix: str = "") -> builtins.list[str]:
        listed = await self.inner.list(prefix)
        await self.inner.delete(checkpoint_manifest(self.victim))
        return listed


async def test_retained_manifests_leave_out_one_deleted_after_the_listing() -> None:
    storage = open_storage("memory://")
    for n in (1, 2, 3):
        await complete(storage, n, {"a#0": [n]})
    retained = await ManifestStore(DeletingAfterList(storage, victim=2)).retained()
    assert [m.checkpoint_id for m in retained] == [1, 3]

"""Random histories of a subtask with the state changelog: writes, checkpoints, uploads that
fail, materializations that finish or fail at any point, full checkpoints, and crashes
followed by a restore from the newest checkpoint that went up (from the local copy or
downloaded). Every handle that went up restores to exactly the rows written before its
checkpoint, and a restored subtask goes on from there."""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings, strategies as st

from sluicegate.operators.protocol.messages import StateHandle
from sluicegate.operators.runtime.changelog_snapshots import ChangelogSnapshots
from sluicegate.operators.runtime.state_transfer import Restored, fetch
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import StorageUnavailableError, open_storage
from sluicegate.operators.storage.layout import full_checkpoint_marker
from tests.storage_wrappers import UploadsDown

Rows = dict[bytes, bytes]

_OTHER = [
    "drop partition",
    "checkpoint",
    "checkpoint",
    "checkpoint, upload fails",
    "full checkpoint",
    "materialization ends",
    "materialization fails",
    "crash, same worker",
    "crash, another worker",
]
_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(1, 60), st.integers(0, 40)),
        st.tuples(st.just("checkpoint"), st.just(0), st.just(0)),
        st.tuples(st.just("delete"), st.just(0), st.integers(0, 40)),
        st.tuples(st.sampled_from(_OTHER), st.just(0), st.just(0)),
    ),
    min_size=10,
    max_size=40,
)


class _Subtask:
    """One subtask's state folder, store and changelog snapshots (on a worker at ``root``)."""

    def __init__(self, root: Path, storage: UploadsDown) -> None:
        self.root, self.storage = root, storage
        self.snapshots = ChangelogSnapshots(storage, root / "cp", materialize_ratio=0.3)

    async def open(self, restore: StateHandle | None) -> RocksDBStateStore:
        if restore is None:
            store = RocksDBStateStore.open(self.root / "db")
            self.snapshots.attach(store, None)
            return store
        folder = await fetch(self.storage, restore, self.root / "cp")
        store = RocksDBStateStore.restore(folder, self.root / "db")
        self.snapshots.attach(store, Restored(folder, restore))
        return store


class _History:
    """The subtask, the rows it should hold, and every handle that went up with its rows."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.storage = UploadsDown(open_storage(root / "storage"))
        self.workers = itertools.count()
        self.subtask = _Subtask(root / f"w{next(self.workers)}", self.storage)
        self.rows: Rows = {}
        self.went_up: dict[int, tuple[StateHandle, Rows]] = {}
        self.next_id = 1
        self.store: RocksDBStateStore

    async def checkpoint(self, *, fail: bool = False) -> None:
        n, self.next_id = self.next_id, self.next_id + 1
        local = await self.subtask.snapshots.take(self.store, n, self.subtask.root / "cp")
        self.storage.down = fail
        try:
            result = await self.subtask.snapshots.upload(local)
        except StorageUnavailableError:
            assert fail
            return  # declined: the next checkpoint sends what this one did not
        finally:
            self.storage.down = False
        self.went_up[n] = (result.handle, dict(self.rows))

    async def crash(self, *, same_worker: bool) -> None:
        """The process dies; the subtask restores the newest checkpoint that went up."""
        await self.subtask.snapshots.close()
        self.store.close()
        newest = max(self.went_up, default=None)
        handle, rows = self.went_up[newest] if newest is not None else (None, {})
        self.rows = dict(rows)
        root = self.subtask.root
        if same_worker:  # the database is lost, its local checkpoint folders are not
            (root / "db").rename(root / f"db-lost-{next(self.workers)}")
        else:
            root = self.root / f"w{next(self.workers)}"
        self.subtask = _Subtask(root, self.storage)
        self.store = await self.subtask.open(handle)
        event("a restore replayed a changelog" if handle and handle.changelog else "a restore")
        assert dict(self.store.partition("t", 0).items()) == self.rows

    async def step(self, step: tuple[str, int, int]) -> None:
        what, count, first = step
        rows = self.store.partition("t", 0)
        if what == "write":
            for i in range(count):
                key, value = b"k%03d" % (first + i), b"v%d-%d" % (i, self.next_id)
                rows.put(key, value)
                self.rows[key] = value
        elif what == "delete":
            rows.delete(b"k%03d" % first)
            self.rows.pop(b"k%03d" % first, None)
        elif what == "drop partition":
            self.store.drop_partition("t", 0)
            self.rows.clear()
        elif what == "checkpoint":
            await self.checkpoint()
        elif what == "checkpoint, upload fails":
            await self.checkpoint(fail=True)
        elif what == "full checkpoint":
            await self.storage.put(full_checkpoint_marker(self.next_id), b"")
            await self.checkpoint()
        elif what == "materialization ends":
            await self.subtask.snapshots.materialization()
        elif what == "materialization fails":
            self.storage.down = True
            await self.subtask.snapshots.materialization()
            self.storage.down = False
        else:
            await self.crash(same_worker=what == "crash, same worker")

    async def run(self, steps: list[tuple[str, int, int]]) -> None:
        self.store = await self.subtask.open(None)
        for step in steps:
            await self.step(step)
        await self.subtask.snapshots.close()
        self.store.close()
        if any(h.files and h.changelog for h, _ in self.went_up.values()):
            event("a handle with a base and a chain went up")
        for n, (handle, expected) in self.went_up.items():
            folder = await fetch(self.storage.inner, handle, self.root / "verify" / str(n))
            with RocksDBStateStore.restore(folder, self.root / "verify" / f"{n}.db") as restored:
                assert dict(restored.partition("t", 0).items()) == expected, n


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=_STEPS)
def test_every_handle_that_went_up_restores_its_rows(steps: list[tuple[str, int, int]]) -> None:
    with tempfile.TemporaryDirectory(prefix="changelog-history-") as root:
        asyncio.run(_History(Path(root)).run(steps))

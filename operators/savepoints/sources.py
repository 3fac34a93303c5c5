"""Where rows come from when a savepoint is written or state is re-split: a `StateSource`.

* `CheckpointSource` reads a completed checkpoint: each subtask's files are fetched (verified)
  and opened as a RocksDB database in a work folder, and rows are read per input partition.
* `SavepointSource` reads a savepoint: each rows file is fetched, checked against the size and
  sha256 of the manifest, and decoded (`operators.savepoints.rows`).

Both answer the same questions, per operator uid: its parallelism and state version when
taken, every input partition with its ``R_p``, the rows of one partition (in chunks of about
`CHUNK_BYTES`, so memory is bounded by a chunk, not by a partition), and the metadata rows of
one subtask. Writing a savepoint and restoring at another parallelism need nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sluicegate.operators.graph import SubtaskId
from sluicegate.operators.runtime.state_transfer import SnapshotStore
from sluicegate.operators.savepoints.exceptions import CorruptSavepointError
from sluicegate.operators.savepoints.manifest import RowsFile, SavepointManifest
from sluicegate.operators.savepoints.rows import decode_rows
from sluicegate.operators.state import codec
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.state.store import PartitionId
from sluicegate.operators.storage import CorruptFileError, NotFoundError, Storage, StoredFile
from sluicegate.operators.storage.layout import savepoint_prefix
from sluicegate.operators.storage.manifest import CheckpointManifest

__all__ = [
    "CHUNK_BYTES",
    "CheckpointSource",
    "OperatorInfo",
    "Rows",
    "SavepointSource",
    "StateSource",
    "all_rows",
]

Rows = list[tuple[bytes, bytes]]
CHUNK_BYTES = 32 << 20
"""About how many bytes of keys and values one chunk of rows holds."""


@dataclass(frozen=True, slots=True)
class OperatorInfo:
    """One operator as a source holds it."""

    parallelism: int
    state_schema_version: int
    partitions: Mapping[PartitionId, int | None]
    """Every input partition known: ``R_p``, or None when no position was recorded."""
    with_rows: frozenset[PartitionId]
    """The partitions that hold at least one row."""


class StateSource(Protocol):
    """The state of a pipeline, per operator uid and input partition."""

    def operators(self) -> Mapping[str, OperatorInfo]: ...

    def chunks(
        self, uid: str, partition: PartitionId, chunk_bytes: int = CHUNK_BYTES
    ) -> AsyncIterator[Rows]:
        """The rows of ``partition`` of operator ``uid`` in key order, in chunks of about
        ``chunk_bytes`` (a savepoint's chunks are its files); nothing when it has none."""
        ...

    async def metadata(self, uid: str, index: int) -> Rows:
        """The metadata rows of subtask ``uid#index`` (the sinks' write-ahead log)."""
        ...


async def all_rows(source: StateSource, uid: str, partition: PartitionId) -> Rows:
    """Every row of ``partition`` of ``uid`` at once (for tests and small state)."""
    return [row async for chunk in source.chunks(uid, partition) for row in chunk]


class CheckpointSource:
    """A completed checkpoint as a `StateSource`; use `open`, then `close` (or ``async with``)."""

    def __init__(
        self,
        manifest: CheckpointManifest,
        stores: Mapping[str, RocksDBStateStore],
        work_dir: Path,
    ) -> None:
        self._manifest = manifest
        self._stores = dict(stores)
        self._work_dir = work_dir
        self._owner: dict[tuple[str, PartitionId], RocksDBStateStore] = {}
        self._operators: dict[str, OperatorInfo] = {}
        self._index()

    @classmethod
    async def open(
        cls, storage: Storage, manifest: CheckpointManifest, work_dir: Path
    ) -> CheckpointSource:
        """1. fetch every subtask's files (verified) into ``work_dir``; 2. open each as a
        database of its own (the checkpoint's files are never written to)."""
        snapshots = SnapshotStore(storage)
        stores: dict[str, RocksDBStateStore] = {}
        try:
            for number, (subtask, snapshot) in enumerate(sorted(manifest.subtasks.items())):
                folder = work_dir / f"subtask-{number}"
                fetched = await snapshots.fetch(snapshot.handle, folder / "files")
                stores[subtask] = await asyncio.to_thread(
                    RocksDBStateStore.restore, fetched, folder / "db"
                )
        except BaseException:
            for store in stores.values():
                store.close()
            raise
        return cls(manifest, stores, work_dir)

    def operators(self) -> Mapping[str, OperatorInfo]:
        return self._operators

    async def chunks(
        self, uid: str, partition: PartitionId, chunk_bytes: int = CHUNK_BYTES
    ) -> AsyncIterator[Rows]:
        store = self._owner.get((uid, partition))
        if store is None:
            return
        items = store.partition(partition.topic, partition.partition).items()
        try:
            while chunk := await asyncio.to_thread(_take_chunk, items, chunk_bytes):
                yield chunk
        finally:
            items.close()

    async def metadata(self, uid: str, index: int) -> Rows:
        store = self._stores.get(str(SubtaskId(uid, index)))
        if store is None:
            return []
        rows = await asyncio.to_thread(lambda: list(store.metadata().items()))
        return [(k, v) for k, v in rows if k != codec.SCHEMA_VERSION_KEY]

    async def close(self) -> None:
        for store in self._stores.values():
            with contextlib.suppress(Exception):
                store.close()
        await asyncio.to_thread(shutil.rmtree, self._work_dir, True)

    async def __aenter__(self) -> CheckpointSource:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _index(self) -> None:
        versions = self._manifest.state_versions or {}
        found: dict[str, dict[PartitionId, int | None]] = {}
        rows: dict[str, set[PartitionId]] = {}
        parallelism: dict[str, int] = {}
        for subtask, snapshot in self._manifest.subtasks.items():
            sid = SubtaskId.parse(subtask)
            parallelism[sid.uid] = max(parallelism.get(sid.uid, 0), sid.index + 1)
            partitions = found.setdefault(sid.uid, {})
            for topic, offsets in snapshot.positions.items():
                for p, offset in offsets.items():
                    partitions[PartitionId(topic, p)] = offset
            store = self._stores[subtask]
            for pid in store.partitions():
                partitions.setdefault(pid, None)
                rows.setdefault(sid.uid, set()).add(pid)
                self._owner[sid.uid, pid] = store
        self._operators = {
            uid: OperatorInfo(
                parallelism=parallelism[uid],
                state_schema_version=versions.get(uid, 1),
                partitions=partitions,
                with_rows=frozenset(rows.get(uid, ())),
            )
            for uid, partitions in found.items()
        }


class SavepointSource:
    """A savepoint (its manifest already validated) as a `StateSource`."""

    def __init__(self, storage: Storage, manifest: SavepointManifest) -> None:
        self._storage = storage
        self.manifest = manifest
        self._prefix = savepoint_prefix(manifest.name)
        self._files: dict[tuple[str, PartitionId], tuple[RowsFile, ...]] = {}
        self._operators: dict[str, OperatorInfo] = {}
        for uid, state in manifest.operators.items():
            partitions: dict[PartitionId, int | None] = {}
            for entry in state.partitions:
                pid = PartitionId(entry.topic, entry.partition)
                partitions[pid] = entry.offset
                if entry.chunks():
                    self._files[uid, pid] = entry.chunks()
            self._operators[uid] = OperatorInfo(
                parallelism=state.parallelism,
                state_schema_version=state.state_schema_version,
                partitions=partitions,
                with_rows=frozenset(pid for (u, pid) in self._files if u == uid),
            )

    def operators(self) -> Mapping[str, OperatorInfo]:
        return self._operators

    async def chunks(
        self, uid: str, partition: PartitionId, chunk_bytes: int = CHUNK_BYTES
    ) -> AsyncIterator[Rows]:
        for file in self._files.get((uid, partition), ()):
            yield await self._read(file)

    async def metadata(self, uid: str, index: int) -> Rows:
        for entry in self.manifest.operators[uid].metadata:
            if entry.index == index:
                return await self._read(entry.file)
        return []

    async def _read(self, file: RowsFile) -> Rows:
        stored = StoredFile(f"{self._prefix}/{file.path}", file.size, file.sha256)
        what = f"{self.manifest.name}/{file.path}"
        try:
            data = await self._storage.get_verified(stored)
        except NotFoundError as exc:
            raise CorruptSavepointError(what, "the file is missing") from exc
        except CorruptFileError as exc:
            raise CorruptSavepointError(
                what, "its size or sha256 differ from the manifest"
            ) from exc
        return list(decode_rows(data, what=what))


def _take_chunk(items: Iterator[tuple[bytes, bytes]], chunk_bytes: int) -> Rows:
    """The next rows of ``items`` up to about ``chunk_bytes`` (at least one row, if any)."""
    chunk: Rows = []
    size = 0
    for key, value in items:
        chunk.append((key, value))
        size += len(key) + len(value) + 8
        if size >= chunk_bytes:
            break
    return chunk

"""Checkpoints of a subtask's state with the state changelog on (``state_changelog``).

A checkpoint's handle is a *base* (the RocksDB files of the last materialization) and the
*chain* of changelog segments written since, which a restore replays onto the base. Each
checkpoint uploads only its own interval's segment, about the bytes it changed; compaction's
rewrites reach storage only with a materialization, which runs beside the checkpoints. This is
Flink's generic log-based incremental checkpointing (FLIP-158), and docs/architecture.md,
"State changelog", says why and what it costs.

The synchronous phase (:meth:`ChangelogSnapshots.take`), with the subtask's loop waiting:

1. apply the pending writes, which logs the interval's last ones, and seal the segment;
2. if a materialization finished uploading, adopt it as the base: the segments it holds leave
   the chain, and the next upload checks that every file it names is still in storage (an
   orphan audit may have deleted files no manifest named yet: docs in
   :mod:`coordinator.retention`; the same check follows a restore);
3. if the chain has grown to ``materialize_ratio`` of the base (or to `MAX_SEGMENTS`), and no
   materialization runs: flush the memtable and take a RocksDB checkpoint (the native sync
   phase), and upload its new files in a background task;
4. link the base's files and the chain's segments into the local checkpoint folder ``<n>``.

The asynchronous phase (:meth:`ChangelogSnapshots.upload`) uploads the segments storage does not
hold yet (and the base's files, after an adoption), content-addressed under ``shared/``; a full
checkpoint uploads the whole folder under ``checkpoints/<n>/full/`` instead and leaves the
chain as it is. A failed upload declines the checkpoint, and the next one sends what it missed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sluicegate.operators.protocol.messages import SnapshotFile
from sluicegate.operators.runtime.state_transfer import (
    Restored,
    SharedRows,
    UploadResult,
    make_handle,
    put_all,
    put_shared,
    sst_checksums,
    upload_full,
)
from sluicegate.operators.state.changelog import ChangelogWriter, segment_checkpoint_id
from sluicegate.operators.state.exceptions import StateIOError
from sluicegate.operators.state.local_checkpoint import (
    CheckpointFile,
    CheckpointInventory,
    FileKind,
    LocalCheckpoint,
    SstKey,
    classify,
)
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import Storage, StorageError
from sluicegate.operators.storage.layout import SHARED, full_checkpoint_marker

__all__ = ["MATERIALIZE_RATIO", "MAX_SEGMENTS", "ChangelogSnapshots"]

logger = logging.getLogger(__name__)

MATERIALIZE_RATIO = 0.5
"""A materialization starts once the chain's bytes reach this share of the base's."""
MAX_SEGMENTS = 100
"""...or once the chain holds this many segments (each is one file to fetch on restore)."""


@dataclass(frozen=True, slots=True)
class _Base:
    """The RocksDB files a checkpoint's chain is replayed onto, once in storage."""

    after: int
    """The chain's segments up to this checkpoint id are in these files."""
    directory: Path | None
    """The files, here (None: no files: a new database)."""
    files: tuple[SnapshotFile, ...]
    entries: tuple[CheckpointFile, ...]
    """``files`` as every checkpoint's inventory lists them (in storage: not new), built
    once for the base's life instead of once per checkpoint."""

    @classmethod
    def of(cls, after: int, directory: Path | None, files: tuple[SnapshotFile, ...]) -> _Base:
        entries = tuple(
            CheckpointFile(
                name=f.name, size=f.size, kind=classify(f.name), new=False, sha256=f.sha256
            )
            for f in files
        )
        return cls(after, directory, files, entries)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


_NO_BASE = _Base.of(after=-1, directory=None, files=())


class ChangelogSnapshots:
    """Moves one subtask's state to and from `Storage` as a base and a changelog; steps in
    the module docstring. ``root`` is the subtask's local checkpoints folder."""

    def __init__(
        self,
        storage: Storage,
        root: Path,
        *,
        materialize_ratio: float = MATERIALIZE_RATIO,
        on_materialized: Callable[[int], None] | None = None,
    ) -> None:
        """``on_materialized``: told the bytes each materialization uploaded (a metric)."""
        self._storage = storage
        self._on_materialized = on_materialized
        self._root = root
        self._ratio = materialize_ratio
        self._materialized = root / "materialized"
        self._segments = root / "changelog"
        for leftover in (self._materialized, self._segments):  # of an earlier database
            shutil.rmtree(leftover, ignore_errors=True)
        self._writer = ChangelogWriter(self._segments)
        self.uploaded: dict[SstKey, str] = {}
        """SSTs of this database lifetime that storage holds (the materializations')."""
        self._base = _NO_BASE
        self._checked = True
        """Whether every file the next checkpoint names, but does not upload, is known to be in
        storage (False after an adoption or a restore: the next upload checks them all)."""
        self._chain: list[Path] = []
        self._stored: dict[str, SnapshotFile] = {}
        """Segments of the chain that storage holds, by name."""
        self._rows = SharedRows()
        """The handle's rows of the files in ``shared/``, kept from one checkpoint to the next."""
        self._materializing: asyncio.Task[_Base] | None = None
        self.materialized_bytes = 0
        """Bytes the materializations uploaded (beside the checkpoints' own)."""

    def attach(self, store: RocksDBStateStore, restored: Restored | None) -> None:
        """Log the writes of ``store`` from now on; when it was restored, continue the chain
        of ``restored`` (whose files storage holds) instead of starting an empty one."""
        if restored is not None:
            self._continue(restored)
        store.changelog = self._writer

    async def take(
        self, store: RocksDBStateStore, checkpoint_id: int, root: Path
    ) -> LocalCheckpoint:
        """The synchronous phase for checkpoint ``checkpoint_id``: steps in the module
        docstring. ``root`` must be the ``root`` this was made with."""
        assert root == self._root
        started = time.perf_counter()
        store.flush_batch()
        if (segment := self._writer.seal(checkpoint_id)) is not None:
            self._chain.append(segment)
        self._adopt()
        if self._materializing is None and self._due():
            if store.has_unflushed_writes():
                await asyncio.to_thread(store.flush_memtable)
            local = store.take_local_checkpoint(
                checkpoint_id, self._materialized, uploaded=self.uploaded
            )
            self._materializing = asyncio.create_task(self._materialize(local))
        local = self._link(checkpoint_id)
        elapsed = time.perf_counter() - started
        inventory = local.inventory.model_copy(update={"sync_duration_seconds": elapsed})
        return LocalCheckpoint(local.directory, inventory)

    async def upload(self, local: LocalCheckpoint) -> UploadResult:
        """The asynchronous phase for ``local`` (made by :meth:`take`, nothing taken since)."""
        started = time.perf_counter()
        n = local.inventory.checkpoint_id
        inventory, full = await asyncio.gather(
            asyncio.to_thread(local.inventory.with_checksums, local.directory),
            self._storage.exists(full_checkpoint_marker(n)),
        )
        if full:
            return await upload_full(self._storage, local.directory, inventory, started)
        puts = [f for f in inventory.files if f.new or not self._checked]
        uploads = await put_all(self._storage, SHARED, local.directory, puts)
        for entry, _ in uploads:
            if entry.kind is FileKind.CHANGELOG:
                self._stored[entry.name] = _stored_file(entry)
        self._checked = True
        files = self._rows.of(inventory.files)
        sent = sum(result.uploaded_bytes for _, result in uploads)
        handle = make_handle(inventory, files, uploaded_bytes=sent)
        return UploadResult(handle, time.perf_counter() - started)

    async def materialization(self) -> None:
        """Wait until the materialization running, if any, has ended (it is adopted at the
        next checkpoint); for tests and benchmarks."""
        if self._materializing is not None:
            await asyncio.wait([self._materializing])

    async def close(self) -> None:
        """Stop a materialization still running and close the interval's segment."""
        if self._materializing is not None:
            self._materializing.cancel()
            await asyncio.gather(self._materializing, return_exceptions=True)
            self._materializing = None
        self._writer.close()

    # -- the base and the chain ---------------------------------------------------------------

    def _continue(self, restored: Restored) -> None:
        handle = restored.handle
        self.uploaded = sst_checksums(handle)
        directory = None
        if handle.files:
            directory = self._materialized / f"restored-{handle.checkpoint_id}"
            _link_all(restored.folder, directory, [f.name for f in handle.files])
        self._base = _Base.of(after=-1, directory=directory, files=handle.files)
        _link_all(restored.folder, self._segments, [f.name for f in handle.changelog])
        self._chain = [self._segments / f.name for f in handle.changelog]
        # A full checkpoint's files are its own, not in shared/: the first upload checks or
        # sends every file.
        self._stored = {f.name: f for f in handle.changelog}
        self._checked = False

    def _due(self) -> bool:
        chain_bytes = sum(p.stat().st_size for p in self._chain)
        if not chain_bytes:
            return False
        return chain_bytes >= self._ratio * self._base.size or len(self._chain) >= MAX_SEGMENTS

    async def _materialize(self, local: LocalCheckpoint) -> _Base:
        """Upload the RocksDB checkpoint ``local`` (SSTs first): the base of later checkpoints;
        if that fails, its folder goes."""
        try:
            inventory = await asyncio.to_thread(local.inventory.with_checksums, local.directory)
            files, sent = await put_shared(self._storage, local.directory, inventory)
        except (StorageError, OSError):
            shutil.rmtree(local.directory, ignore_errors=True)
            raise
        self.uploaded.update(inventory.sst_checksums())
        self.materialized_bytes += sent
        if self._on_materialized is not None:
            self._on_materialized(sent)
        ordered = tuple(sorted(files, key=lambda f: f.name))
        return _Base.of(local.inventory.checkpoint_id, local.directory, ordered)

    def _adopt(self) -> None:
        """Make a finished materialization the base (step 2 of the module docstring)."""
        task = self._materializing
        if task is None or not task.done():
            return
        self._materializing = None
        try:
            base = task.result()
        except (StorageError, OSError) as exc:  # storage may be back by the next one
            logger.warning("state materialization failed, retried later: %s", exc)
            return
        old, self._base, self._checked = self._base, base, False
        if old.directory is not None:
            shutil.rmtree(old.directory, ignore_errors=True)
        kept = []
        for segment in self._chain:
            if (segment_checkpoint_id(segment.name) or 0) > base.after:
                kept.append(segment)
            else:
                segment.unlink(missing_ok=True)
                self._stored.pop(segment.name, None)
        self._chain = kept
        logger.info(
            "state materialized at checkpoint %s: %s bytes, %s segments after it",
            base.after,
            base.size,
            len(kept),
        )

    def _link(self, checkpoint_id: int) -> LocalCheckpoint:
        """Folder ``<checkpoint_id>``: hard links to the base's files and the chain's segments."""
        target = self._root / str(checkpoint_id)
        staging = self._root / f".{checkpoint_id}.linking"
        shutil.rmtree(staging, ignore_errors=True)
        directory = self._base.directory
        sources = [directory / f.name for f in self._base.files] if directory is not None else []
        try:
            staging.mkdir(parents=True)
            for source in [*sources, *self._chain]:
                _link_or_copy(source, staging / source.name)
            staging.rename(target)  # a folder named by id is always complete
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise StateIOError(f"checkpoint {checkpoint_id}", target, str(exc)) from exc
        files = list(self._base.entries if directory is not None else ())
        for segment in self._chain:
            stored = self._stored.get(segment.name)
            files.append(
                CheckpointFile(
                    name=segment.name,
                    size=segment.stat().st_size,
                    kind=FileKind.CHANGELOG,
                    new=stored is None,
                    sha256=stored.sha256 if stored else None,
                )
            )
        inventory = CheckpointInventory(
            checkpoint_id=checkpoint_id, sync_duration_seconds=0, files=tuple(files)
        )
        return LocalCheckpoint(directory=target, inventory=inventory)


def _stored_file(entry: CheckpointFile) -> SnapshotFile:
    assert entry.sha256 is not None
    return SnapshotFile(
        name=entry.name, path=f"{SHARED}/{entry.sha256}", size=entry.size, sha256=entry.sha256
    )


def _link_all(source: Path, target: Path, names: list[str]) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        _link_or_copy(source / name, target / name)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)  # cross-device or no link support

"""Uploading a subtask's local checkpoint to storage, and bringing it back on restore.

The asynchronous phase of a checkpoint (DESIGN.md, "Barrier protocol"):

1. checksum the files whose sha256 is not known yet (in a worker thread; storage is given
   that checksum instead of hashing each file again, and refuses bytes sent that differ);
2. upload every new SST file, content-addressed under ``shared/<sha256>`` (numbers in SST file
   names repeat after a restore, so storage never addresses them by name);
3. then MANIFEST, CURRENT, OPTIONS and the rest, content-addressed the same way (the MANIFEST
   as the bytes appended since the previous checkpoint when it only grew:
   :mod:`~operators.runtime.manifest_delta`); the files of each step go up concurrently
   (`UPLOAD_CONCURRENCY` at once);
4. return the `StateHandle` the subtask acks with: every file's local name, storage path, size
   and checksum, which is all a restore needs.

A *full* checkpoint (the coordinator left ``checkpoints/<n>/_full`` before triggering it: every
K-th, or on demand) uploads every file to ``checkpoints/<n>/full/<sha256>`` instead, sharing no
file with any other checkpoint, so no damaged shared file can break it; its new SSTs are not
remembered as uploaded, so the next incremental checkpoint puts them in ``shared/``.

A restore prefers the subtask's own local copy of the checkpoint folder (hard links, no
download) when it still matches the handle, and otherwise downloads every file, verifying size
and checksum (a file stored in parts is joined and checked whole).

`SnapshotStore` is this for RocksDB's files; with the state changelog, a subtask uses
:class:`~operators.runtime.changelog_snapshots.ChangelogSnapshots` instead, which shares the
upload, handle and fetch functions here. Both are `Snapshots`.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sluicegate.operators.protocol.messages import SnapshotFile, StateHandle
from sluicegate.operators.runtime.exceptions import CorruptCheckpointError
from sluicegate.operators.runtime.manifest_delta import (
    ManifestDelta,
    ManifestDeltas,
    assemble,
    put_delta,
)
from sluicegate.operators.state.local_checkpoint import (
    CheckpointFile,
    CheckpointInventory,
    FileKind,
    LocalCheckpoint,
    SstKey,
    classify,
)
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import ContentAddressedUpload, Storage, StoredFile
from sluicegate.operators.storage.layout import (
    SHARED,
    full_checkpoint_files,
    full_checkpoint_marker,
)

__all__ = [
    "UPLOAD_CONCURRENCY",
    "Restored",
    "SharedRows",
    "SnapshotStore",
    "Snapshots",
    "UploadResult",
    "fetch",
    "make_handle",
    "put_all",
    "put_shared",
    "sst_checksums",
    "upload_full",
]

logger = logging.getLogger(__name__)

UPLOAD_CONCURRENCY = 8
"""Files of one checkpoint uploaded at once (bounds memory: each holds one chunk)."""


@dataclass(frozen=True, slots=True)
class UploadResult:
    handle: StateHandle
    seconds: float


class Snapshots(Protocol):
    """How a subtask's state goes to storage and back: :class:`SnapshotStore` (RocksDB's
    files) or :class:`~operators.runtime.changelog_snapshots.ChangelogSnapshots`."""

    async def take(
        self, store: RocksDBStateStore, checkpoint_id: int, root: Path
    ) -> LocalCheckpoint:
        """The synchronous phase of checkpoint ``checkpoint_id``, into ``root/<checkpoint_id>``."""
        ...

    async def upload(self, local: LocalCheckpoint) -> UploadResult:
        """The asynchronous phase: put ``local`` in storage."""
        ...

    def attach(self, store: RocksDBStateStore, restored: Restored | None) -> None:
        """``store`` was opened (new) or restored (:func:`fetch`) from ``restored``."""
        ...

    async def close(self) -> None:
        """Stop what runs in the background."""
        ...


@dataclass(frozen=True, slots=True)
class Restored:
    """The folder a store was restored from (:func:`fetch`), and the handle it holds."""

    folder: Path
    handle: StateHandle


class SharedRows:
    """The handle's rows (`SnapshotFile`) of files ``shared/`` holds already (the SSTs a
    checkpoint does not upload; with the state changelog, every file of the handle): each
    built once, not again for every checkpoint that names the file (with hundreds of SSTs,
    validating a row per file per checkpoint was a cost that grew with the state).

    A row is a function of the file's name, size and sha256 alone (its path is
    ``shared/<sha256>``), so one built for an earlier checkpoint is never stale, whatever
    database lifetime the file is of; only the rows of the latest checkpoint are kept.
    """

    def __init__(self) -> None:
        self._rows: dict[tuple[str, int, str], SnapshotFile] = {}

    def of(
        self, entries: Sequence[CheckpointFile], *, stored: Sequence[SnapshotFile] = ()
    ) -> list[SnapshotFile]:
        """The rows of ``entries`` (checksummed, in ``shared/``). Kept for the next
        checkpoint: these, and ``stored``, the rows of the SSTs this one put in ``shared/``."""
        kept = {(r.name, r.size, r.sha256): r for r in stored if r.path == f"{SHARED}/{r.sha256}"}
        rows = []
        for entry in entries:
            assert entry.sha256 is not None  # stored files come with their checksum
            key = (entry.name, entry.size, entry.sha256)
            row = self._rows.get(key)
            if row is None:
                row = SnapshotFile(
                    name=entry.name,
                    path=f"{SHARED}/{entry.sha256}",
                    size=entry.size,
                    sha256=entry.sha256,
                )
            rows.append(row)
            kept[key] = row
        self._rows = kept
        return rows


class SnapshotStore:
    """Moves one subtask's local checkpoints to and from `Storage`.

    ``uploaded`` remembers which SSTs of this database lifetime storage already holds, so
    each checkpoint sends only the new ones; `ManifestDeltas` how the last one stored the
    MANIFEST (after a restore the first is stored whole); `SharedRows` the handle's rows of
    the SSTs not sent.
    """

    def __init__(self, storage: Storage, *, uploaded: dict[SstKey, str] | None = None) -> None:
        self._storage = storage
        self.uploaded: dict[SstKey, str] = dict(uploaded or {})
        self._manifests = ManifestDeltas()
        self._rows = SharedRows()

    async def upload(self, local: LocalCheckpoint) -> UploadResult:
        """Run the asynchronous phase for ``local``; steps in the module docstring."""
        started = time.perf_counter()
        (inventory, delta), full = await asyncio.gather(
            asyncio.to_thread(self._checksum, local),
            self._storage.exists(full_checkpoint_marker(local.inventory.checkpoint_id)),
        )
        if full:
            self._manifests.forget()
            return await upload_full(self._storage, local.directory, inventory, started)
        files, sent = await put_shared(
            self._storage, local.directory, inventory, manifest=delta, rows=self._rows
        )
        self.uploaded.update(inventory.sst_checksums())
        self._manifests.remember(files)
        handle = make_handle(inventory, files, uploaded_bytes=sent)
        return UploadResult(handle, time.perf_counter() - started)

    def _checksum(self, local: LocalCheckpoint) -> tuple[CheckpointInventory, ManifestDelta | None]:
        """Step 1, and the MANIFEST's delta if it only grew (blocking reads: in a thread)."""
        inventory = local.inventory.with_checksums(local.directory)
        return inventory, self._manifests.plan(local.directory, inventory.files)

    async def take(
        self, store: RocksDBStateStore, checkpoint_id: int, root: Path
    ) -> LocalCheckpoint:
        """The synchronous phase: flush the memtable (in a worker thread: RocksDB writes the SST
        without the GIL, so the subtasks sharing the process run meanwhile; nothing else may use
        ``store`` until it returns), then take the local checkpoint ``root/<checkpoint_id>``."""
        if store.has_unflushed_writes():
            await asyncio.to_thread(store.flush_memtable)
        return store.take_local_checkpoint(checkpoint_id, root, uploaded=self.uploaded)

    def attach(self, store: RocksDBStateStore, restored: Restored | None) -> None:
        """Nothing to do: the store is checkpointed as it is (the changelog's counterpart
        logs its writes)."""

    async def fetch(self, handle: StateHandle, local_root: Path) -> Path:
        """:func:`fetch`."""
        return await fetch(self._storage, handle, local_root)

    async def close(self) -> None:
        """Nothing runs in the background."""


async def put_shared(
    storage: Storage,
    directory: Path,
    inventory: CheckpointInventory,
    *,
    manifest: ManifestDelta | None = None,
    rows: SharedRows | None = None,
) -> tuple[list[SnapshotFile], int]:
    """Put the RocksDB checkpoint ``inventory`` (checksummed) under ``shared/``: its new SSTs,
    then MANIFEST (as ``manifest``'s delta when given), CURRENT, OPTIONS and the rest (steps
    2-3 of the module docstring). Returns every file as stored, and the bytes sent; the rows
    of the SSTs storage held already come from ``rows`` (kept from one call to the next)."""
    parted = manifest.name if manifest is not None else None
    to_upload = inventory.to_upload()
    ssts = [f for f in to_upload if f.kind is FileKind.SST]
    rest = [f for f in to_upload if f.kind is not FileKind.SST and f.name != parted]
    uploads = await put_all(storage, SHARED, directory, ssts)
    later, (delta, delta_bytes) = await asyncio.gather(  # after the SSTs
        put_all(storage, SHARED, directory, rest), _put_manifest(storage, manifest)
    )
    stored_ssts = [_snapshot_file(entry.name, result.file) for entry, result in uploads]
    files = [*stored_ssts, *(_snapshot_file(entry.name, result.file) for entry, result in later)]
    files += [delta] if delta is not None else []
    sent = delta_bytes + sum(result.uploaded_bytes for _, result in [*uploads, *later])
    new_names = {f.name for f in files}
    known = [entry for entry in inventory.files if entry.name not in new_names]
    files += (rows or SharedRows()).of(known, stored=stored_ssts)
    return files, sent


async def _put_manifest(
    storage: Storage, manifest: ManifestDelta | None
) -> tuple[SnapshotFile | None, int]:
    """`put_delta` of ``manifest``, if there is one."""
    return await put_delta(storage, manifest) if manifest is not None else (None, 0)


async def upload_full(
    storage: Storage, directory: Path, inventory: CheckpointInventory, started: float
) -> UploadResult:
    """Put every file of ``inventory`` under ``checkpoints/<n>/full/`` (a full checkpoint:
    nothing shared with any other); changelog segments go in the handle's ``changelog``."""
    prefix = full_checkpoint_files(inventory.checkpoint_id)
    uploads = await put_all(storage, prefix, directory, inventory.files)
    files = [_snapshot_file(entry.name, result.file) for entry, result in uploads]
    handle = make_handle(inventory, files, uploaded_bytes=sum(f.size for f in inventory.files))
    return UploadResult(handle, time.perf_counter() - started)


def make_handle(
    inventory: CheckpointInventory, files: Sequence[SnapshotFile], *, uploaded_bytes: int
) -> StateHandle:
    """The handle of ``inventory`` whose files storage holds as ``files``: RocksDB files in
    ``files``, changelog segments in ``changelog``, each sorted by name."""
    rocksdb: list[SnapshotFile] = []
    changelog: list[SnapshotFile] = []
    for f in sorted(files, key=lambda f: f.name):
        (changelog if classify(f.name) is FileKind.CHANGELOG else rocksdb).append(f)
    return StateHandle(
        checkpoint_id=inventory.checkpoint_id,
        files=tuple(rocksdb),
        changelog=tuple(changelog),
        full_bytes=sum(f.size for f in inventory.files),
        uploaded_bytes=uploaded_bytes,
    )


async def fetch(storage: Storage, handle: StateHandle, local_root: Path) -> Path:
    """Return a folder holding exactly the files of ``handle``, ready to restore from.

    The subtask's own local checkpoint ``local_root/<id>`` is used when every file is there
    with the right size; otherwise every file is downloaded and verified into
    ``local_root/<id>.download``.
    """
    local = local_root / str(handle.checkpoint_id)
    if _matches(local, handle):
        logger.info("restoring checkpoint %s from the local copy", handle.checkpoint_id)
        return local
    target = local_root / f"{handle.checkpoint_id}.download"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for entry in handle.all_files:
        local_file = _inside(target, entry, handle.checkpoint_id)
        if entry.parts:
            await assemble(storage, entry, local_file)
        else:
            stored = StoredFile(entry.path, entry.size, entry.sha256)
            await storage.download_verified(stored, local_file)
    logger.info("downloaded checkpoint %s (%s files)", handle.checkpoint_id, len(handle.all_files))
    return target


async def put_all(
    storage: Storage, prefix: str, directory: Path, entries: Sequence[CheckpointFile]
) -> list[tuple[CheckpointFile, ContentAddressedUpload]]:
    """Put ``entries`` of ``directory`` content-addressed under ``prefix``, up to
    `UPLOAD_CONCURRENCY` at once (a sequential loop waited for the event loop once per step of
    every file: on a busy subtask that made the asynchronous phase most of a second); the first
    failure cancels the others and is raised."""
    slots = asyncio.Semaphore(UPLOAD_CONCURRENCY)

    async def put(entry: CheckpointFile) -> ContentAddressedUpload:
        async with slots:
            return await storage.put_content_addressed(
                prefix, directory / entry.name, sha256=entry.sha256
            )

    tasks = [asyncio.ensure_future(put(entry)) for entry in entries]
    try:
        results = await asyncio.gather(*tasks)
    except BaseException:  # raised as it is (a StorageError declines the checkpoint)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return list(zip(entries, results, strict=True))


def _inside(folder: Path, entry: SnapshotFile, checkpoint_id: int) -> Path:
    """Where ``entry`` goes in ``folder``; a name that would leave ``folder`` makes the
    checkpoint corrupt (`SnapshotFile` validates names already; this guards a handle built
    without validation, e.g. with ``model_construct``)."""
    path = folder / entry.name
    if path.parent != folder or entry.name in ("", ".", ".."):
        raise CorruptCheckpointError(checkpoint_id, entry.path)
    return path


def sst_checksums(handle: StateHandle) -> dict[SstKey, str]:
    """``(name, size) -> sha256`` of the SSTs of ``handle`` in ``shared/``: what storage already
    holds for the next incremental checkpoint after a restore from it (a full checkpoint's
    files are its own)."""
    return {
        (f.name, f.size): f.sha256
        for f in handle.files
        if classify(f.name) is FileKind.SST and f.path.startswith(f"{SHARED}/")
    }


def _snapshot_file(name: str, stored: StoredFile) -> SnapshotFile:
    return SnapshotFile(name=name, path=stored.path, size=stored.size, sha256=stored.sha256)


def _matches(folder: Path, handle: StateHandle) -> bool:
    if not folder.is_dir():
        return False
    present = {p.name: p.stat().st_size for p in folder.iterdir()}
    return present == {f.name: f.size for f in handle.all_files}

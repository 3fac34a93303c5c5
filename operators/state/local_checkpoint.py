"""Local checkpoints of a subtask's RocksDB state, and their file inventory.

A local checkpoint is a RocksDB checkpoint folder (``<root>/<checkpoint_id>``)
whose SST files are hard links to the live database's files. Its
:class:`CheckpointInventory` lists every file with name, size and kind, and
marks which files storage does not hold yet, so the uploader sends only those.

Identity of SST files. SSTs are immutable and RocksDB never reuses a file
number within one database lifetime, so within a lifetime ``(name, size)``
identifies an SST's content. After a restore the numbering continues from the
restored MANIFEST, so the *same* name may later hold *different* content than
a file of an abandoned lifetime. Storage therefore addresses files by sha256,
never by name, and the ``uploaded`` map handed to the store must only come
from this store's lifetime or from the checkpoint it was restored from (whose
files are byte-identical to the restored ones).

Reuse within a lifetime. For the same reason an inventory may start from the previous one of
the same database lifetime (the same open store): an SST it lists under the same name is the
same file, so its entry is taken as it is (no ``stat``, no validation; only ``new`` and
``sha256`` follow ``uploaded``). With a state that holds hundreds of SSTs and changes a few per
checkpoint, stating and validating every file made a checkpoint's inventory grow with the
state (0.9 ms for 150 SSTs against 0.15 ms for 10). Files of any other kind change in place
and are always read anew.

Checksum timing. Hashing is I/O-bound and proportional to the state size, so it
is kept out of the synchronous phase: the inventory is built with the sha256
of SSTs already in ``uploaded`` (free) and ``None`` for every other file;
:meth:`CheckpointInventory.with_checksums` fills the rest in the asynchronous
phase (run it in a thread), reading only files whose sha256 is unknown.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, field_validator
from rocksdict import Checkpoint

from sluicegate.operators.state.changelog import segment_checkpoint_id
from sluicegate.operators.state.exceptions import (
    CheckpointExistsError,
    RestoreSourceError,
    StateIOError,
)

__all__ = [
    "INVENTORY_SCHEMA_VERSION",
    "CheckpointFile",
    "CheckpointInventory",
    "FileKind",
    "LocalCheckpoint",
    "SstKey",
    "build_inventory",
    "classify",
    "copy_checkpoint_files",
    "create_local_checkpoint",
    "prune_local_checkpoints",
    "relink_local_checkpoint",
    "sha256_file",
]

INVENTORY_SCHEMA_VERSION = 1

#: ``(file name, size in bytes)``: identity of an SST within one database lifetime.
SstKey: TypeAlias = tuple[str, int]

_HASH_CHUNK = 1 << 20


class FileKind(StrEnum):
    """What a file of a RocksDB checkpoint is; only ``sst`` files are shared between checkpoints.

    ``other`` covers the write-ahead log (``*.log``, empty because memtables are
    flushed first), rocksdict's ``rocksdict-config.json`` and anything RocksDB
    adds in later versions; such files are uploaded with every checkpoint.
    ``changelog`` is a segment of the state changelog (:mod:`operators.state.changelog`),
    replayed onto the other files by a restore.
    """

    SST = "sst"
    MANIFEST = "manifest"
    CURRENT = "current"
    OPTIONS = "options"
    CHANGELOG = "changelog"
    OTHER = "other"


def classify(name: str) -> FileKind:
    """Return the kind of the checkpoint file called ``name``."""
    if name.endswith(".sst"):
        return FileKind.SST
    if segment_checkpoint_id(name) is not None:
        return FileKind.CHANGELOG
    if name.startswith("MANIFEST-"):
        return FileKind.MANIFEST
    if name == "CURRENT":
        return FileKind.CURRENT
    if name.startswith("OPTIONS-"):
        return FileKind.OPTIONS
    return FileKind.OTHER


class CheckpointFile(BaseModel):
    """One file of a local checkpoint.

    ``new`` is True when storage does not hold the file yet: always for
    non-SST files, and for SSTs missing from the ``uploaded`` map.
    ``sha256`` is lowercase hex, or None until :meth:`CheckpointInventory.with_checksums`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    size: int = Field(ge=0)
    kind: FileKind
    new: bool
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")


class CheckpointInventory(BaseModel):
    """Every file of one subtask's local checkpoint; persisted in the checkpoint manifest."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = INVENTORY_SCHEMA_VERSION
    checkpoint_id: int = Field(ge=0)
    sync_duration_seconds: float = Field(ge=0)
    files: tuple[CheckpointFile, ...]

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if not 1 <= value <= INVENTORY_SCHEMA_VERSION:
            raise ValueError(
                f"inventory schema_version {value} is not supported by this build "
                f"(reads 1..{INVENTORY_SCHEMA_VERSION}); upgrade sluicegate"
            )
        return value

    @property
    def sst_bytes(self) -> int:
        """Total size of the checkpoint's SST files."""
        return sum(f.size for f in self.files if f.kind is FileKind.SST)

    @property
    def new_sst_bytes(self) -> int:
        """Size of the SST files that storage does not hold yet."""
        return sum(f.size for f in self.files if f.kind is FileKind.SST and f.new)

    def to_upload(self) -> tuple[CheckpointFile, ...]:
        """Files to send to storage: new SSTs first, then every other file.

        The order is the one the barrier protocol asks for: SST files before
        MANIFEST/CURRENT/OPTIONS, so a MANIFEST is never stored without its SSTs.
        """
        ssts = [f for f in self.files if f.kind is FileKind.SST and f.new]
        rest = [f for f in self.files if f.kind is not FileKind.SST]
        return (*ssts, *rest)

    def sst_checksums(self) -> dict[SstKey, str]:
        """Map ``(name, size) -> sha256`` of every SST with a known checksum.

        Feed it (merged with earlier maps of the same lifetime) as ``uploaded``
        to the next checkpoint once these files are in storage.
        """
        return {
            (f.name, f.size): f.sha256
            for f in self.files
            if f.kind is FileKind.SST and f.sha256 is not None
        }

    def with_checksums(self, directory: Path) -> CheckpointInventory:
        """Return a copy with the sha256 of every file, reading only those still unknown.

        Blocking file I/O: call it from a worker thread in the asynchronous phase.
        """
        files = tuple(
            f
            if f.sha256 is not None
            else f.model_copy(update={"sha256": sha256_file(directory / f.name)})
            for f in self.files
        )
        return self.model_copy(update={"files": files})


@dataclass(frozen=True, slots=True)
class LocalCheckpoint:
    """A local checkpoint on disk (``directory``) and its inventory."""

    directory: Path
    inventory: CheckpointInventory


def build_inventory(
    directory: Path,
    checkpoint_id: int,
    *,
    uploaded: Mapping[SstKey, str],
    sync_duration_seconds: float,
    previous: CheckpointInventory | None = None,
) -> CheckpointInventory:
    """List ``directory`` into an inventory; SSTs found in ``uploaded`` are not new.

    ``previous`` must be an inventory of the same database lifetime (module docstring): its
    SST entries are reused for the SSTs of the same name, without a ``stat``. Never pass one
    from another store, e.g. one restored into a new folder, where the same name may hold
    other bytes.
    """
    known = {f.name: f for f in previous.files if f.kind is FileKind.SST} if previous else {}
    with os.scandir(directory) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    files = []
    for entry in entries:
        reused = known.get(entry.name)
        if reused is not None:
            files.append(_as_uploaded(reused, uploaded))
            continue
        kind = classify(entry.name)
        size = entry.stat().st_size
        sha256 = uploaded.get((entry.name, size)) if kind is FileKind.SST else None
        files.append(
            CheckpointFile(name=entry.name, size=size, kind=kind, new=sha256 is None, sha256=sha256)
        )
    return CheckpointInventory(
        checkpoint_id=checkpoint_id,
        sync_duration_seconds=sync_duration_seconds,
        files=tuple(files),
    )


def _as_uploaded(sst: CheckpointFile, uploaded: Mapping[SstKey, str]) -> CheckpointFile:
    """The SST entry ``sst`` of an earlier inventory, ``new`` and ``sha256`` as ``uploaded``
    says now: the same object when that is unchanged (nearly always), else validated anew
    (once in a file's life, when it has just been uploaded)."""
    sha256 = uploaded.get((sst.name, sst.size))
    if sha256 == sst.sha256:
        return sst
    return CheckpointFile(
        name=sst.name, size=sst.size, kind=sst.kind, new=sha256 is None, sha256=sha256
    )


def sha256_file(path: Path) -> str:
    """Return the lowercase hex sha256 of the file at ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def create_local_checkpoint(
    db: Any,
    db_path: Path,
    checkpoint_id: int,
    root: Path,
    *,
    uploaded: Mapping[SstKey, str],
    previous: CheckpointInventory | None = None,
) -> LocalCheckpoint:
    """Checkpoint the open rocksdict database ``db`` into ``root/<checkpoint_id>``.

    1. flush the memtable to SST files and wait, so no state is left in the WAL;
    2. create a RocksDB checkpoint: hard links to the SST files (copies when
       ``root`` is on another filesystem), copies of MANIFEST and CURRENT;
    3. list it into an inventory (``sync_duration_seconds`` 0: the caller
       measures); SSTs found in ``uploaded`` are not new, those ``previous`` (an inventory
       of the same database lifetime) lists are taken from it. Nothing is hashed.
    """
    if checkpoint_id < 0:
        raise ValueError(f"checkpoint_id must be >= 0, got {checkpoint_id}")
    target = root / str(checkpoint_id)
    if target.exists():
        raise CheckpointExistsError(checkpoint_id, target)
    try:
        db.flush(wait=True)
        root.mkdir(parents=True, exist_ok=True)
        Checkpoint(db).create_checkpoint(str(target))
    except Exception as exc:
        raise StateIOError(f"checkpoint {checkpoint_id}", db_path, str(exc)) from exc
    inventory = build_inventory(
        target, checkpoint_id, uploaded=uploaded, sync_duration_seconds=0, previous=previous
    )
    return LocalCheckpoint(directory=target, inventory=inventory)


def relink_local_checkpoint(
    previous: LocalCheckpoint, checkpoint_id: int, root: Path, *, uploaded: Mapping[SstKey, str]
) -> LocalCheckpoint:
    """Make ``root/<checkpoint_id>`` a copy of ``previous``, taken from a database that has not
    changed since (same latest sequence number): every file hard-linked (copied when linking
    fails). Nothing is flushed and RocksDB is not called: its checkpoint holds the GIL for
    milliseconds to tens of milliseconds (links, MANIFEST copy, fsyncs), which the subtasks
    sharing the process would wait for. The files are never written to again (a restore copies
    every non-SST file out), so sharing them is safe. Inventory as in
    :func:`create_local_checkpoint`, ``previous``'s SST entries reused."""
    if checkpoint_id < 0:
        raise ValueError(f"checkpoint_id must be >= 0, got {checkpoint_id}")
    target = root / str(checkpoint_id)
    if target.exists():
        raise CheckpointExistsError(checkpoint_id, target)
    staging = root / f".{checkpoint_id}.linking"
    try:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for entry in previous.inventory.files:
            _link_or_copy(previous.directory / entry.name, staging / entry.name)
        staging.rename(target)  # a folder named by id is always complete
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise StateIOError(f"checkpoint {checkpoint_id}", previous.directory, str(exc)) from exc
    inventory = build_inventory(
        target,
        checkpoint_id,
        uploaded=uploaded,
        sync_duration_seconds=0,
        previous=previous.inventory,
    )
    return LocalCheckpoint(directory=target, inventory=inventory)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)  # cross-device or no link support


def copy_checkpoint_files(from_dir: Path, into_dir: Path) -> None:
    """Fill ``into_dir`` (absent or empty) with the RocksDB files of checkpoint folder
    ``from_dir`` (changelog segments stay: the restore replays them).

    SST files are hard-linked (they are immutable, so the restored database and
    the checkpoint can share them) and copied when linking fails, e.g. across
    filesystems. Every other file is copied: RocksDB may append to or rewrite
    them once the restored database is open, which must not alter the checkpoint.
    """
    if not (from_dir / "CURRENT").is_file():
        raise RestoreSourceError(from_dir, into_dir, "no CURRENT file: not a checkpoint")
    if into_dir.exists() and any(into_dir.iterdir()):
        raise RestoreSourceError(from_dir, into_dir, "the target directory is not empty")
    into_dir.mkdir(parents=True, exist_ok=True)
    with os.scandir(from_dir) as listing:
        entries = list(listing)
    for entry in entries:
        source = Path(entry.path)
        target = into_dir / entry.name
        kind = classify(entry.name)
        if kind is FileKind.CHANGELOG:
            continue
        if kind is FileKind.SST:
            _link_or_copy(source, target)
        else:
            shutil.copy2(source, target)


def prune_local_checkpoints(checkpoints_dir: Path, *, keep: int, completed: int) -> None:
    """Delete the local checkpoints (folders named by id) older than ``completed`` beyond the
    newest ``keep`` (0: all of them)."""
    if not checkpoints_dir.is_dir():
        return
    ids = sorted(int(p.name) for p in checkpoints_dir.iterdir() if p.name.isdigit())
    for old in ids[:-keep] if keep else ids:
        if old < completed:
            shutil.rmtree(checkpoints_dir / str(old), ignore_errors=True)

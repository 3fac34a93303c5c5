"""Checkpoint manifests: the durable record that checkpoint ``n`` completed, and what it holds.

A manifest lists, per subtask, ``R_p`` for every input partition and the `StateHandle` (every
file with its storage path, size and checksum). It is committed with create-if-absent at
``checkpoints/<n>/_manifest.json``, so it is visible only once complete and never overwritten:
a checkpoint without a manifest did not complete, whatever files it uploaded.

Right after the manifest, `ManifestStore.commit` leaves ``checkpoints/<n>/_completed``. The
marker outlives a manifest deleted or damaged by anything but retention (which deletes whole
folders, oldest first), so `ManifestStore.find_latest` can tell "checkpoint ``n`` completed but
can no longer be restored" from "checkpoint ``n`` never completed" (an aborted one leaves only
``_triggered``): a completed marker newer than the checkpoint restored from, whose manifest is
missing or unreadable and that is not marked corrupt yet, is a `LostCheckpoint`, and the
restore falls back past it. A crash between the manifest and the marker leaves a checkpoint
without one: it restores normally, and only its later loss would go unnoticed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sluicegate.operators.protocol.channels import TopicPartition
from sluicegate.operators.protocol.messages import CheckpointAck, RestorePoint, StateHandle
from sluicegate.operators.storage import NotFoundError, Storage
from sluicegate.operators.storage.layout import (
    CHECKPOINTS,
    checkpoint_manifest,
    checkpoint_prefix,
    parse_checkpoint_id,
)

__all__ = [
    "MANIFEST_SCHEMA_VERSION",
    "CheckpointManifest",
    "LatestCheckpoint",
    "LostCheckpoint",
    "ManifestStore",
    "SubtaskSnapshot",
]

MANIFEST_SCHEMA_VERSION = 3
"""2 added ``triggered_at``, 3 ``state_versions``; older manifests are read as they are (the
fields None: unknown triggered time, every operator's state at version 1)."""
_CORRUPT = "_corrupt"
_COMPLETED = "_completed"


class SubtaskSnapshot(BaseModel):
    """One subtask's part of a checkpoint."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    positions: dict[str, dict[int, int]]
    """topic -> partition -> ``R_p``."""
    handle: StateHandle
    alignment_seconds: float = Field(ge=0)
    sync_seconds: float = Field(ge=0)
    async_seconds: float = Field(ge=0)

    @classmethod
    def from_ack(cls, ack: CheckpointAck) -> SubtaskSnapshot:
        """The snapshot ``ack`` reports. Its handle is not validated again (pydantic takes a
        `StateHandle` instance as it is: the control link's decoder,
        `operators.protocol.wire.decode_message`, validated it); its positions and durations
        are, which costs less than `model_construct`'s Python loop over the fields (a row
        per subtask per checkpoint: docs/performance.md, "The coordinator at scale")."""
        positions: dict[str, dict[int, int]] = {}
        for tp, offset in ack.positions.items():
            positions.setdefault(tp.topic, {})[tp.partition] = offset
        return cls(
            positions=positions,
            handle=ack.handle,
            alignment_seconds=ack.alignment_seconds,
            sync_seconds=ack.sync_seconds,
            async_seconds=ack.async_seconds,
        )


class CheckpointManifest(BaseModel):
    """Everything a restore from checkpoint ``checkpoint_id`` needs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = MANIFEST_SCHEMA_VERSION
    pipeline: str
    checkpoint_id: int = Field(ge=1)
    attempt: int = Field(ge=0)
    completed_at: float
    """Unix time the manifest was built, just before its commit."""
    subtasks: dict[str, SubtaskSnapshot]
    triggered_at: float | None = None
    """Unix time the checkpoint was triggered (None: unknown, e.g. a version 1 manifest)."""
    state_versions: dict[str, int] | None = None
    """Operator uid -> version of its own state rows (`operators.state.versions`); None: all 1."""

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if not 1 <= value <= MANIFEST_SCHEMA_VERSION:
            raise ValueError(
                f"checkpoint manifest schema_version {value} is newer than this build reads "
                f"({MANIFEST_SCHEMA_VERSION}); upgrade sluicegate to restore from it"
            )
        return value

    @classmethod
    def from_acks(
        cls,
        pipeline: str,
        checkpoint_id: int,
        attempt: int,
        acks: Iterable[CheckpointAck],
        *,
        triggered_at: float | None = None,
        state_versions: dict[str, int] | None = None,
    ) -> CheckpointManifest:
        return cls(
            pipeline=pipeline,
            checkpoint_id=checkpoint_id,
            attempt=attempt,
            completed_at=time.time(),
            subtasks={ack.subtask: SubtaskSnapshot.from_ack(ack) for ack in acks},
            triggered_at=triggered_at,
            state_versions=state_versions,
        )

    def state_version(self, uid: str) -> int:
        """The version of operator ``uid``'s state rows in this checkpoint."""
        return (self.state_versions or {}).get(uid, 1)

    def shape_mismatch(self, subtasks: Iterable[str]) -> str | None:
        """Why this checkpoint cannot restore a job of ``subtasks`` (None: it can). A checkpoint
        is restored subtask by subtask, so an added or removed operator, or another
        parallelism, has no state to start from (an added source reader would re-read its
        sources from the start)."""
        wanted = set(subtasks)
        missing = sorted(wanted - set(self.subtasks))
        extra = sorted(set(self.subtasks) - wanted)
        if not missing and not extra:
            return None
        return (
            f"checkpoint {self.checkpoint_id} was taken by another pipeline shape "
            f"(subtasks without state in it: {missing or 'none'}; state of subtasks the "
            f"pipeline no longer has: {extra or 'none'}). Run the pipeline as it was, or start "
            "it on new checkpoint storage (with a new pipeline name, or after deleting its "
            "sink-progress topic); to add or remove operators across a restore, take a savepoint "
            "with the pipeline as it was and start the new one --from-savepoint (another "
            "parallelism alone needs none: the coordinator re-splits the checkpoint)"
        )

    def restore_point(self, subtask: str) -> RestorePoint:
        """Where ``subtask`` starts again from this checkpoint."""
        snapshot = self.subtasks[subtask]
        positions = {
            TopicPartition(topic, p): offset
            for topic, offsets in snapshot.positions.items()
            for p, offset in offsets.items()
        }
        return RestorePoint(self.checkpoint_id, positions, snapshot.handle)

    @property
    def is_full(self) -> bool:
        """Whether every file of this checkpoint is in its own folder (a full checkpoint),
        shared with no other."""
        # Asked of every retained manifest after every checkpoint: stops at the first file
        # in ``shared/``, an incremental checkpoint's first file as a rule.
        prefix, seen = f"{CHECKPOINTS}/", False
        for snapshot in self.subtasks.values():
            for f in snapshot.handle.all_files:
                if not all(p.startswith(prefix) for p in f.paths):
                    return False
                seen = True
        return seen

    @property
    def full_bytes(self) -> int:
        return sum(s.handle.full_bytes for s in self.subtasks.values())

    @property
    def uploaded_bytes(self) -> int:
        return sum(s.handle.uploaded_bytes for s in self.subtasks.values())


@dataclass(frozen=True, slots=True)
class LostCheckpoint:
    """Checkpoint ``checkpoint_id`` completed (its ``_completed`` marker says so) but its
    manifest is gone or unreadable; ``reason`` says which."""

    checkpoint_id: int
    reason: str


@dataclass(frozen=True, slots=True)
class LatestCheckpoint:
    """What `ManifestStore.find_latest` found."""

    manifest: CheckpointManifest | None
    """The newest restorable checkpoint, or None."""
    lost: tuple[LostCheckpoint, ...]
    """Completed checkpoints newer than ``manifest`` that cannot be restored any more and are
    not marked corrupt yet: restoring from ``manifest`` falls back past them. Oldest first."""
    any_completed: bool
    """Whether any checkpoint ever completed that storage still knows of (a manifest, or a
    completed marker): if so and ``manifest`` is None, starting from scratch would reprocess
    everything."""


class ManifestStore:
    """Commits and finds checkpoint manifests in `Storage`."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    async def commit(self, manifest: CheckpointManifest) -> None:
        """Make ``manifest`` visible atomically; raises `AlreadyExistsError` if it is."""
        data = manifest.model_dump_json(indent=1).encode()
        await self._storage.put_if_absent(checkpoint_manifest(manifest.checkpoint_id), data)
        await self._storage.put(_completed_marker(manifest.checkpoint_id), b"")

    async def load(self, checkpoint_id: int) -> CheckpointManifest:
        data = await self._storage.get(checkpoint_manifest(checkpoint_id))
        return CheckpointManifest.model_validate_json(data)

    async def completed(self) -> list[int]:
        """Ids of every checkpoint with a committed manifest, oldest first."""
        ids = set()
        for path in await self._storage.list(CHECKPOINTS):
            n = parse_checkpoint_id(path)
            if n is not None and path == checkpoint_manifest(n):
                ids.add(n)
        return sorted(ids)

    async def retained(self) -> list[CheckpointManifest]:
        """The manifests of the completed checkpoints, oldest first. One that retention
        deletes between the listing and its load (they interleave in the coordinator's loop)
        is left out."""
        manifests = []
        for n in await self.completed():
            try:
                manifests.append(await self.load(n))
            except NotFoundError:
                continue
        return manifests

    async def latest(self) -> CheckpointManifest | None:
        """The newest completed checkpoint not marked corrupt, or None."""
        return (await self.find_latest()).manifest

    async def find_latest(self) -> LatestCheckpoint:
        """The newest restorable checkpoint, and the completed ones newer than it that were
        lost (the rule in the module docstring). Nothing is marked: the caller reports the
        lost ones (`mark_corrupt`), so they are reported once."""
        paths = await self._storage.list(CHECKPOINTS)
        corrupt, manifests, completed = set(), set(), set()
        for path in paths:
            n = parse_checkpoint_id(path)
            if n is None:
                continue
            if path == checkpoint_manifest(n):
                manifests.add(n)
            elif path == _completed_marker(n):
                completed.add(n)
            elif path == f"{checkpoint_prefix(n)}/{_CORRUPT}":
                corrupt.add(n)
        lost: list[LostCheckpoint] = []
        found: CheckpointManifest | None = None
        for n in sorted(manifests | completed, reverse=True):
            if n in corrupt:
                continue
            try:
                found = await self.load(n)
                break
            except NotFoundError:
                # Listed but gone since (retention, in another process) is no loss: only a
                # completed marker says the manifest should still be there.
                if n in completed:
                    lost.append(LostCheckpoint(n, "its manifest is missing"))
            except (ValidationError, UnicodeDecodeError) as exc:
                lost.append(LostCheckpoint(n, f"its manifest cannot be read: {_first_line(exc)}"))
        return LatestCheckpoint(found, tuple(reversed(lost)), bool(manifests or completed))

    async def mark_corrupt(self, checkpoint_id: int, reason: str) -> None:
        """Never restore from ``checkpoint_id`` again: a stored file failed verification."""
        await self._storage.put(f"{checkpoint_prefix(checkpoint_id)}/{_CORRUPT}", reason.encode())

    async def corrupt(self) -> set[int]:
        """Ids of checkpoints marked corrupt."""
        return {
            n
            for path in await self._storage.list(CHECKPOINTS)
            if path.endswith(f"/{_CORRUPT}") and (n := parse_checkpoint_id(path)) is not None
        }


def _completed_marker(checkpoint_id: int) -> str:
    return f"{checkpoint_prefix(checkpoint_id)}/{_COMPLETED}"


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

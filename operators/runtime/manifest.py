"""Checkpoint manifests: the durable record that checkpoint ``n`` completed, and what it holds.

A manifest lists, per subtask, ``R_p`` for every input partition and the `StateHandle` (every
file with its storage path, size and checksum). It is committed with create-if-absent at
``checkpoints/<n>/_manifest.json``, so it is visible only once complete and never overwritten:
a checkpoint without a manifest did not complete, whatever files it uploaded.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from operators.protocol.messages import CheckpointAck, RestorePoint, StateHandle
from operators.protocol.records import TopicPartition
from operators.storage import NotFoundError, Storage
from operators.storage.layout import (
    CHECKPOINTS,
    checkpoint_manifest,
    checkpoint_prefix,
    parse_checkpoint_id,
)

__all__ = ["MANIFEST_SCHEMA_VERSION", "CheckpointManifest", "ManifestStore", "SubtaskSnapshot"]

MANIFEST_SCHEMA_VERSION = 1
_CORRUPT = "_corrupt"


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
        positions: dict[str, dict[int, int]] = {}
        for tp, offset in ack.positions.items():
            positions.setdefault(tp.topic, {})[tp.partition] = offset
        return cls(
            positions=positions,
            handle=ack.handle,
            alignment_seconds=max(ack.alignment_seconds, 0.0),
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
    subtasks: dict[str, SubtaskSnapshot]

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
        cls, pipeline: str, checkpoint_id: int, attempt: int, acks: Iterable[CheckpointAck]
    ) -> CheckpointManifest:
        return cls(
            pipeline=pipeline,
            checkpoint_id=checkpoint_id,
            attempt=attempt,
            completed_at=time.time(),
            subtasks={ack.subtask: SubtaskSnapshot.from_ack(ack) for ack in acks},
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
    def full_bytes(self) -> int:
        return sum(s.handle.full_bytes for s in self.subtasks.values())

    @property
    def uploaded_bytes(self) -> int:
        return sum(s.handle.uploaded_bytes for s in self.subtasks.values())


class ManifestStore:
    """Commits and finds checkpoint manifests in `Storage`."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    async def commit(self, manifest: CheckpointManifest) -> None:
        """Make ``manifest`` visible atomically; raises `AlreadyExistsError` if it is."""
        data = manifest.model_dump_json(indent=1).encode()
        await self._storage.put_if_absent(checkpoint_manifest(manifest.checkpoint_id), data)

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
        corrupt = await self.corrupt()
        for n in reversed(await self.completed()):
            if n in corrupt:
                continue
            try:
                return await self.load(n)
            except NotFoundError:
                continue
        return None

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

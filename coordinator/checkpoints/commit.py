"""Completing a checkpoint: commit its manifest, then tell the tracker how it went.

Shared by the coordinator service and the in-process job, so both complete and abort the
same way.
"""

from __future__ import annotations

from coordinator.checkpoints.tracker import (
    AbortCheckpoint,
    BroadcastCompleted,
    CheckpointTracker,
    CommitManifest,
)
from operators.runtime.manifest import CheckpointManifest, ManifestStore
from operators.storage import AlreadyExistsError

__all__ = ["commit_checkpoint"]


async def commit_checkpoint(
    manifests: ManifestStore,
    tracker: CheckpointTracker,
    pipeline: str,
    commit: CommitManifest,
    now: float,
    *,
    triggered_at: float | None = None,
) -> tuple[CheckpointManifest, BroadcastCompleted] | AbortCheckpoint | None:
    """1. build the manifest from the acks (``triggered_at``: unix time of the trigger, for
    ``checkpoint list``); 2. commit it with create-if-absent; 3. on success the checkpoint
    completed (manifest and what to broadcast); if a manifest of that id exists already, the
    checkpoint is aborted (what to broadcast); None when stale."""
    manifest = CheckpointManifest.from_acks(
        pipeline, commit.checkpoint_id, commit.attempt, commit.acks, triggered_at=triggered_at
    )
    try:
        await manifests.commit(manifest)
    except AlreadyExistsError:
        return tracker.on_manifest_failed(commit.checkpoint_id, "the manifest exists already", now)
    done = tracker.on_manifest_committed(commit.checkpoint_id, now)
    return None if done is None else (manifest, done)

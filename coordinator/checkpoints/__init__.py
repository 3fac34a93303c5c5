"""The coordinator's checkpoint decisions, sans-IO: pending checkpoints, the tracker and the
backoff after storage failures."""

from coordinator.checkpoints.backoff import StorageBackoff
from coordinator.checkpoints.pending import PendingCheckpoint
from coordinator.checkpoints.tracker import (
    AbortCause,
    AbortCheckpoint,
    BroadcastCompleted,
    CheckpointTracker,
    CommitManifest,
    InjectBarriers,
)

__all__ = [
    "AbortCause",
    "AbortCheckpoint",
    "BroadcastCompleted",
    "CheckpointTracker",
    "CommitManifest",
    "InjectBarriers",
    "PendingCheckpoint",
    "StorageBackoff",
]

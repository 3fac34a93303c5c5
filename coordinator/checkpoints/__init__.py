"""The coordinator's checkpoint decisions, sans-IO: pending checkpoints, the tracker and the
backoff after storage failures."""

from sluicegate.coordinator.checkpoints.backoff import StorageBackoff
from sluicegate.coordinator.checkpoints.pending import PendingCheckpoint
from sluicegate.coordinator.checkpoints.tracker import (
    AbortCause,
    AbortCheckpoint,
    BroadcastCompleted,
    CheckpointTracker,
    CommitManifest,
    SendTrigger,
)

__all__ = [
    "AbortCause",
    "AbortCheckpoint",
    "BroadcastCompleted",
    "CheckpointTracker",
    "CommitManifest",
    "PendingCheckpoint",
    "SendTrigger",
    "StorageBackoff",
]

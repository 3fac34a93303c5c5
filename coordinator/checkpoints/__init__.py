"""The coordinator's checkpoint decisions, sans-IO: pending checkpoints and the tracker."""

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
]

"""Errors of the subtask runtime (all fatal: the subtask stops and the coordinator recovers).

::

    FatalError
    ├── SubtaskFencedError       a newer attempt wrote to an input: this subtask is a zombie
    ├── CorruptCheckpointError   a file of the restored checkpoint is missing or failed
    │                            verification
    └── SinkProgressError        the sink published checkpoints this job has no state for
"""

from __future__ import annotations

from sluicegate.operators.exceptions import FatalError

__all__ = ["CorruptCheckpointError", "SinkProgressError", "SubtaskFencedError"]


class SubtaskFencedError(FatalError):
    """A record of a newer attempt exists: this subtask is a zombie and stops."""

    def __init__(self, subtask: str, attempt: int, newer_attempt: int) -> None:
        super().__init__(f"{subtask} of attempt {attempt} is fenced by attempt {newer_attempt}")
        self.subtask, self.attempt, self.newer_attempt = subtask, attempt, newer_attempt


class CorruptCheckpointError(FatalError):
    """A file of the checkpoint being restored is missing from storage, or failed its size or
    checksum check: either way the checkpoint cannot be restored (``missing`` says which)."""

    def __init__(self, checkpoint_id: int, path: str, *, missing: bool = False) -> None:
        problem = "is missing from storage" if missing else "failed verification"
        super().__init__(f"checkpoint {checkpoint_id} is corrupt: {path} {problem}")
        self.checkpoint_id, self.path, self.missing = checkpoint_id, path, missing


class SinkProgressError(FatalError):
    """The sink says outputs were published, but the job starts with no checkpoint."""

    def __init__(self, subtask: str, published: int) -> None:
        super().__init__(
            f"{subtask}: the sink-progress topic says checkpoint {published} was published, but "
            "this job starts without a checkpoint (was its checkpoint storage replaced?). "
            "Point the job at its checkpoint storage, or give the pipeline a new name, or "
            "delete the pipeline's sluicegate.<pipeline>.sink-progress topic to start afresh."
        )
        self.subtask, self.published = subtask, published

"""Errors of the keyed state of a subtask.

The tree (every state error also derives from :class:`StateError`, so a caller
can catch them all, and from one of the two root branches, so a caller can
always tell whether to retry)::

    SluicegateError
    └── FatalError
        ├── StateClosedError          the store was closed; nothing more can be read or written
        ├── StateOpenError            RocksDB refused to open the directory (lock held, corrupt)
        ├── StateSchemaVersionError   the state was written by another schema version
        ├── StateIOError              RocksDB failed a write, flush or checkpoint
        ├── ReservedKeyError          a metadata key is owned by the store itself
        ├── InvalidPartitionError     a topic name or partition number is not legal in Kafka
        ├── CheckpointExistsError     the local checkpoint directory is already taken
        └── RestoreSourceError        a checkpoint folder cannot be restored from

None is retryable in place: a failed write leaves the subtask's state unknown,
so the subtask must exit and the pipeline recovers from the last checkpoint.
"""

from __future__ import annotations

from pathlib import Path

from sluicegate.operators.exceptions import FatalError, SluicegateError

__all__ = [
    "CheckpointExistsError",
    "InvalidPartitionError",
    "ReservedKeyError",
    "RestoreSourceError",
    "StateClosedError",
    "StateError",
    "StateIOError",
    "StateOpenError",
    "StateSchemaVersionError",
]


class StateError(SluicegateError):
    """Root of every state error; each concrete error is also retryable or fatal."""


class StateClosedError(StateError, FatalError):
    """The store at ``path`` was closed before this call."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"state store {str(path)!r} is closed")
        self.path = path


class StateOpenError(StateError, FatalError):
    """RocksDB could not open ``path`` (another process holds its LOCK, or it is corrupt)."""

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(f"cannot open state store {str(path)!r}: {detail}")
        self.path = path
        self.detail = detail


class StateSchemaVersionError(StateError, FatalError):
    """The state at ``path`` has schema version ``found`` but this build reads ``supported``.

    ``found`` is None when the directory holds a RocksDB database that sluicegate
    did not create (no ``schema_version`` row).
    """

    def __init__(self, path: Path, found: int | None, supported: int) -> None:
        if found is None:
            advice = (
                "it has no schema_version row, so it was not created by sluicegate; "
                "point the subtask at an empty directory or restore from a checkpoint"
            )
        elif found > supported:
            advice = (
                f"it was written with state schema_version {found}, newer than {supported} "
                "which this build reads; upgrade sluicegate on this worker, or restore "
                "the pipeline from a savepoint taken by this version"
            )
        else:
            advice = (
                f"it was written with state schema_version {found}, older than {supported} "
                "and no upgrader exists for it; restore from a savepoint instead"
            )
        super().__init__(f"cannot use state store {str(path)!r}: {advice}")
        self.path = path
        self.found = found
        self.supported = supported


class StateIOError(StateError, FatalError):
    """RocksDB failed ``operation`` on the store at ``path``; the subtask must restart."""

    def __init__(self, operation: str, path: Path, detail: str) -> None:
        super().__init__(f"state store {str(path)!r}: {operation} failed: {detail}")
        self.operation = operation
        self.path = path
        self.detail = detail


class ReservedKeyError(StateError, FatalError):
    """``key`` is a metadata row the store manages itself (e.g. ``schema_version``)."""

    def __init__(self, key: bytes) -> None:
        super().__init__(f"metadata key {key!r} is reserved by the state store")
        self.key = key


class InvalidPartitionError(StateError, FatalError):
    """``topic``/``partition`` cannot name a Kafka partition; ``reason`` says why."""

    def __init__(self, topic: str, partition: int, reason: str) -> None:
        super().__init__(f"invalid partition {topic!r}[{partition}]: {reason}")
        self.topic = topic
        self.partition = partition
        self.reason = reason


class CheckpointExistsError(StateError, FatalError):
    """The directory for local checkpoint ``checkpoint_id`` already exists at ``path``.

    Checkpoint ids never repeat, so this is a leftover of an earlier process or a bug.
    """

    def __init__(self, checkpoint_id: int, path: Path) -> None:
        super().__init__(f"local checkpoint {checkpoint_id} already exists at {str(path)!r}")
        self.checkpoint_id = checkpoint_id
        self.path = path


class RestoreSourceError(StateError, FatalError):
    """Cannot restore from ``from_dir`` into ``into_dir``; ``reason`` says why."""

    def __init__(self, from_dir: Path, into_dir: Path, reason: str) -> None:
        super().__init__(f"cannot restore {str(from_dir)!r} into {str(into_dir)!r}: {reason}")
        self.from_dir = from_dir
        self.into_dir = into_dir
        self.reason = reason

"""Keyed state of a subtask: RocksDB rows separable per input partition, and local snapshots.

* :mod:`operators.state.store`: the :class:`StateStore` contract a process function sees.
* :mod:`operators.state.rocksdb`: the rocksdict implementation, one database per subtask.
* :mod:`operators.state.local_checkpoint`: local checkpoints and the inventory the uploader reads.
* :mod:`operators.state.codec`: the on-disk format (key layout, RocksDB tuning); raw bytes.
* :mod:`operators.state.exceptions`: the error tree.
"""

from sluicegate.operators.state.codec import RocksDBSettings
from sluicegate.operators.state.exceptions import (
    CheckpointExistsError,
    InvalidPartitionError,
    ReservedKeyError,
    RestoreSourceError,
    StateClosedError,
    StateError,
    StateIOError,
    StateOpenError,
    StateSchemaVersionError,
)
from sluicegate.operators.state.local_checkpoint import (
    CheckpointFile,
    CheckpointInventory,
    FileKind,
    LocalCheckpoint,
    SstKey,
)
from sluicegate.operators.state.rocksdb import (
    SCHEMA_VERSION,
    RocksDBPartitionState,
    RocksDBStateStore,
)
from sluicegate.operators.state.store import PartitionId, PartitionState, PendingWrites, StateStore

__all__ = [
    "SCHEMA_VERSION",
    "CheckpointExistsError",
    "CheckpointFile",
    "CheckpointInventory",
    "FileKind",
    "InvalidPartitionError",
    "LocalCheckpoint",
    "PartitionId",
    "PartitionState",
    "PendingWrites",
    "ReservedKeyError",
    "RestoreSourceError",
    "RocksDBPartitionState",
    "RocksDBSettings",
    "RocksDBStateStore",
    "SstKey",
    "StateClosedError",
    "StateError",
    "StateIOError",
    "StateOpenError",
    "StateSchemaVersionError",
    "StateStore",
]

"""Savepoints: self-contained, portable snapshots of a pipeline's state in a canonical format.

* :mod:`operators.savepoints.rows`: the binary rows file (sans-IO encode/decode, checksummed).
* :mod:`operators.savepoints.manifest`: the savepoint manifest (per operator uid, per input
  partition: rows file, source offset; schema versions), validated as untrusted input.
* :mod:`operators.savepoints.exceptions`: the error tree.

The format is documented in ``docs/savepoints.md``.
"""

from sluicegate.operators.savepoints.exceptions import (
    CorruptSavepointError,
    SavepointError,
    SavepointNotFoundError,
    SavepointRefusedError,
)
from sluicegate.operators.savepoints.manifest import (
    FORMAT_VERSION,
    OperatorState,
    PartitionRows,
    RowsFile,
    SavepointManifest,
    SubtaskMetadata,
)
from sluicegate.operators.savepoints.rows import decode_rows, encode_rows

__all__ = [
    "FORMAT_VERSION",
    "CorruptSavepointError",
    "OperatorState",
    "PartitionRows",
    "RowsFile",
    "SavepointError",
    "SavepointManifest",
    "SavepointNotFoundError",
    "SavepointRefusedError",
    "SubtaskMetadata",
    "decode_rows",
    "encode_rows",
]

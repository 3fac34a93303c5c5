"""Checkpoint storage: one :class:`Storage` interface over obstore.

Local directory by default, S3-compatible for clusters, in-memory for unit
tests; build one with :func:`open_storage`. Keys follow the layout in
:mod:`operators.storage.layout`.

Errors (from :mod:`operators.storage.exceptions`)::

    SluicegateError
    ├── RetryableError
    │   └── StorageUnavailableError   connection failed, timed out, 5xx or 429 after retries
    └── FatalError
        ├── InvalidPathError          a key is not a relative POSIX key
        ├── NotFoundError             nothing is stored at the key
        ├── AlreadyExistsError        create-if-absent found the key taken
        ├── CorruptFileError          size or sha256 differ from what was recorded
        ├── LocalFileChangedError     a local file changed while it was being uploaded
        └── StorageBackendError       any other backend failure (permission, missing bucket, ...)

Every one of them also derives from ``StorageError``.

:func:`open_storage` and :class:`ObstoreStorage` are loaded on first use (PEP 562), so that a
sans-IO core needing only the interface or an error (the checkpoint manifest, the coordinator's
phases) loads no storage client.
"""

from typing import TYPE_CHECKING, Any

from sluicegate.operators.storage import layout
from sluicegate.operators.storage.base import ContentAddressedUpload, Storage, StoredFile
from sluicegate.operators.storage.exceptions import (
    AlreadyExistsError,
    CorruptFileError,
    InvalidPathError,
    LocalFileChangedError,
    NotFoundError,
    StorageBackendError,
    StorageError,
    StorageUnavailableError,
)

if TYPE_CHECKING:
    from sluicegate.operators.storage.factory import open_storage
    from sluicegate.operators.storage.obstore_storage import ObstoreStorage

__all__ = [
    "AlreadyExistsError",
    "ContentAddressedUpload",
    "CorruptFileError",
    "InvalidPathError",
    "LocalFileChangedError",
    "NotFoundError",
    "ObstoreStorage",
    "Storage",
    "StorageBackendError",
    "StorageError",
    "StorageUnavailableError",
    "StoredFile",
    "layout",
    "open_storage",
]


def __getattr__(name: str) -> Any:
    if name == "open_storage":
        from sluicegate.operators.storage.factory import open_storage

        return open_storage
    if name == "ObstoreStorage":
        from sluicegate.operators.storage.obstore_storage import ObstoreStorage

        return ObstoreStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

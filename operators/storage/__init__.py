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
"""

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

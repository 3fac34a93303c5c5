"""Errors of checkpoint storage.

The tree (every storage error also derives from :class:`StorageError`, so a
caller can catch them all, and from one of the two root branches, so a caller
can always tell whether to retry)::

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
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sluicegate.operators.exceptions import FatalError, RetryableError, SluicegateError

if TYPE_CHECKING:
    from sluicegate.operators.storage.base import StoredFile

__all__ = [
    "AlreadyExistsError",
    "CorruptFileError",
    "InvalidPathError",
    "LocalFileChangedError",
    "NotFoundError",
    "StorageBackendError",
    "StorageError",
    "StorageUnavailableError",
]


class StorageError(SluicegateError):
    """Root of every storage error; each concrete error is also retryable or fatal."""


class StorageUnavailableError(StorageError, RetryableError):
    """The backend could not be reached or answered 5xx/429; the same call may succeed later.

    obstore has already retried with backoff before this is raised.
    """

    def __init__(self, operation: str, path: str, detail: str) -> None:
        super().__init__(f"storage unavailable during {operation} of {path!r}: {detail}")
        self.operation = operation
        self.path = path
        self.detail = detail


class InvalidPathError(StorageError, FatalError):
    """A key is not a relative POSIX key (absolute, ``..``, empty segment, ...)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"invalid storage path {path!r}: {reason}")
        self.path = path
        self.reason = reason


class NotFoundError(StorageError, FatalError):
    """Nothing is stored at ``path``."""

    def __init__(self, path: str) -> None:
        super().__init__(f"no stored file at {path!r}")
        self.path = path


class AlreadyExistsError(StorageError, FatalError):
    """A create-if-absent write found ``path`` already taken; another writer won."""

    def __init__(self, path: str) -> None:
        super().__init__(f"a stored file already exists at {path!r}")
        self.path = path


class CorruptFileError(StorageError, FatalError):
    """The stored bytes at ``path`` do not match the size and sha256 that were recorded.

    ``expected`` is the description the caller holds (from a manifest);
    ``actual`` describes the bytes that were read.
    """

    def __init__(self, path: str, expected: StoredFile, actual: StoredFile) -> None:
        super().__init__(
            f"stored file {path!r} is corrupt: expected {expected.size} bytes with sha256 "
            f"{expected.sha256}, read {actual.size} bytes with sha256 {actual.sha256}"
        )
        self.path = path
        self.expected = expected
        self.actual = actual


class LocalFileChangedError(StorageError, FatalError):
    """A local file's content changed between hashing it and uploading it.

    Snapshot files are immutable, so this means something else is writing into
    the snapshot directory. The partial upload has been removed.
    """

    def __init__(self, local_path: Path, expected_sha256: str, actual_sha256: str) -> None:
        super().__init__(
            f"local file {str(local_path)!r} changed during upload: hashed as "
            f"{expected_sha256}, uploaded as {actual_sha256}"
        )
        self.local_path = local_path
        self.expected_sha256 = expected_sha256
        self.actual_sha256 = actual_sha256


class StorageBackendError(StorageError, FatalError):
    """The backend refused or failed an operation for a reason retrying will not fix.

    Examples: permission denied, bad credentials, the bucket does not exist, a
    local path component is a file. The original obstore error is chained as
    ``__cause__``.
    """

    def __init__(self, operation: str, path: str, detail: str) -> None:
        super().__init__(f"storage {operation} of {path!r} failed: {detail}")
        self.operation = operation
        self.path = path
        self.detail = detail

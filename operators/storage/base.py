"""The :class:`Storage` contract and the value types it returns."""

from __future__ import annotations

import builtins
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = ["ContentAddressedUpload", "Storage", "StoredFile"]

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class StoredFile:
    """A stored file as a manifest records it: key, size in bytes, lowercase hex sha256."""

    path: str
    size: int
    sha256: str

    def __post_init__(self) -> None:
        if self.size < 0:
            raise ValueError(f"size must be >= 0, got {self.size}")
        if not _SHA256_HEX.fullmatch(self.sha256):
            raise ValueError(f"sha256 must be 64 lowercase hex digits, got {self.sha256!r}")


@dataclass(frozen=True, slots=True)
class ContentAddressedUpload:
    """Outcome of :meth:`Storage.put_content_addressed`.

    ``uploaded`` is false when storage already held the content and no bytes
    were sent.
    """

    file: StoredFile
    uploaded: bool

    @property
    def uploaded_bytes(self) -> int:
        """Bytes sent to storage by this call: the file size, or 0 when skipped."""
        return self.file.size if self.uploaded else 0


@runtime_checkable
class Storage(Protocol):
    """Keyed byte storage for checkpoints, savepoints and blobs.

    Contract, for every implementation:

    * Keys are relative POSIX paths (see :mod:`operators.storage.layout`); an
      invalid key raises :class:`~operators.storage.exceptions.InvalidPathError`
      before any I/O.
    * Every write is atomic: a reader sees the whole new content or the old
      one, never a part.
    * Writes return a :class:`StoredFile` whose size and sha256 describe the
      bytes actually sent, computed while sending.
    * :meth:`put_if_absent` is an atomic create: of any number of concurrent
      callers on one key, exactly one succeeds and every other one raises
      :class:`~operators.storage.exceptions.AlreadyExistsError`. Checkpoint
      manifests are committed this way.
    * A missing key raises :class:`~operators.storage.exceptions.NotFoundError`
      (except :meth:`exists` and :meth:`delete`).
    * Transient backend failures raise
      :class:`~operators.storage.exceptions.StorageUnavailableError`
      (retryable); every other failure raises a fatal storage error. No error
      is swallowed.
    """

    async def put(self, path: str, data: bytes) -> StoredFile:
        """Store ``data`` at ``path``, replacing what is there."""
        ...

    async def put_if_absent(self, path: str, data: bytes) -> StoredFile:
        """Store ``data`` at ``path`` only if nothing is there; else raise AlreadyExistsError."""
        ...

    async def put_file(self, path: str, local_path: Path) -> StoredFile:
        """Stream the local file to ``path``, replacing what is there.

        The file is never held in memory whole; large files go up as a
        multipart upload, and the checksum is computed from the bytes sent.
        """
        ...

    async def put_content_addressed(
        self, prefix: str, local_path: Path, *, sha256: str | None = None
    ) -> ContentAddressedUpload:
        """Store the local file under ``<prefix>/<sha256>`` unless that key already exists.

        Steps, in this order:

        1. hash the local file (streaming), unless the caller gives its ``sha256``;
        2. if ``<prefix>/<sha256>`` exists with the same size, return with
           ``uploaded=False``: nothing is sent (the incremental snapshot);
        3. otherwise stream the file there, hashing again while sending;
        4. if the two hashes differ the file changed underneath: remove the
           upload and raise LocalFileChangedError.
        """
        ...

    async def get(self, path: str) -> bytes:
        """Return the bytes stored at ``path``, unverified."""
        ...

    async def get_verified(self, file: StoredFile) -> bytes:
        """Return the bytes at ``file.path`` after checking size and sha256.

        Raises CorruptFileError on mismatch.
        """
        ...

    async def download_verified(self, file: StoredFile, local_path: Path) -> None:
        """Stream ``file`` to ``local_path``, checking size and sha256.

        Steps: stream into a temporary file beside ``local_path`` while
        hashing; on mismatch remove it and raise CorruptFileError; on a match
        rename it onto ``local_path``. ``local_path`` never holds partial or
        unverified bytes. Its directory must already exist.
        """
        ...

    async def exists(self, path: str) -> bool:
        """Whether a file is stored at ``path`` (a directory-like prefix is not a file)."""
        ...

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Keys of all files under ``prefix`` (recursive, sorted); ``""`` lists everything.

        ``prefix`` matches whole segments: ``checkpoints/1`` finds
        ``checkpoints/1/_manifest.json`` but not ``checkpoints/10/...``.
        """
        ...

    async def delete(self, path: str) -> None:
        """Remove the file at ``path``; a missing file is not an error."""
        ...

    async def delete_many(self, paths: Sequence[str]) -> None:
        """Remove the files at ``paths``, in no particular order; a missing file is not an
        error. One call for many files (retention drops a file per subtask per checkpoint: a
        call each was most of a coordinator's CPU per checkpoint at thousands of subtasks)."""
        ...

    async def size(self, path: str) -> int:
        """Size in bytes of the file at ``path``."""
        ...

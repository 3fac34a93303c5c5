"""The one :class:`~operators.storage.base.Storage` implementation, over any obstore store."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import hashlib
import logging
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

import obstore
from obstore import exceptions as obstore_errors

from sluicegate.operators.storage.base import ContentAddressedUpload, StoredFile
from sluicegate.operators.storage.exceptions import (
    AlreadyExistsError,
    CorruptFileError,
    LocalFileChangedError,
    NotFoundError,
    StorageBackendError,
    StorageUnavailableError,
)
from sluicegate.operators.storage.layout import join, validate_path, validate_prefix

if TYPE_CHECKING:
    from obstore import BytesStream
    from obstore.store import ObjectStore

__all__ = ["DEFAULT_CHUNK_SIZE", "DEFAULT_MAX_CONCURRENCY", "INLINE_READ_BYTES", "ObstoreStorage"]

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_SIZE = 8 * 1024 * 1024
"""Read size for local files and part size of multipart uploads (S3 needs >= 5 MiB)."""

INLINE_READ_BYTES = 256 * 1024
"""Files up to this size are read on the event loop rather than in a worker thread."""

DEFAULT_MAX_CONCURRENCY = 4
"""Parts of one multipart upload in flight at once; bounds memory to about 4 chunks."""

# What obstore reports, after its own retries, when the backend may come back:
# connect/timeout/body errors of the HTTP client, and 5xx or 429 answers.
_TRANSIENT = re.compile(
    r"status code: (?:5\d\d|429)\b"
    r"|error sending request"
    r"|error decoding response body"
    r"|kind: (?:Connect|Timeout|Body|Decode)\b"
    r"|timed out|connection (?:refused|reset|closed|aborted)|broken pipe",
    re.IGNORECASE,
)
_READ_OPERATIONS = frozenset({"get", "head", "delete"})
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


_DELETE_BATCH = 1000
"""Paths a `ObstoreStorage.delete_many` call hands obstore at once (S3 deletes at most 1,000
a request)."""


class ObstoreStorage:
    """:class:`~operators.storage.base.Storage` over an obstore ``LocalStore``,
    ``MemoryStore`` or ``S3Store`` (any ``ObjectStore`` works).

    Build one with :func:`operators.storage.factory.open_storage`, or pass a
    store directly (tests keep a handle on the raw store to damage files).
    """

    def __init__(
        self,
        store: ObjectStore,
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    ) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self._store = store
        self._chunk_size = chunk_size
        self._max_concurrency = max_concurrency

    @property
    def store(self) -> ObjectStore:
        """The underlying obstore store."""
        return self._store

    def __repr__(self) -> str:
        return f"ObstoreStorage({type(self._store).__name__}, chunk_size={self._chunk_size})"

    # -- writes ---------------------------------------------------------------

    async def put(self, path: str, data: bytes) -> StoredFile:
        """Store ``data`` at ``path``, replacing what is there."""
        validate_path(path)
        with _translated("put", path):
            await obstore.put_async(self._store, path, data, mode="overwrite", use_multipart=False)
        return StoredFile(path, len(data), await _sha256(data))

    async def put_if_absent(self, path: str, data: bytes) -> StoredFile:
        """Atomically create ``path`` with ``data``; raise AlreadyExistsError if it exists."""
        validate_path(path)
        with _translated("put", path):
            await obstore.put_async(self._store, path, data, mode="create", use_multipart=False)
        logger.debug("created %s", path, extra={"path": path, "size": len(data)})
        return StoredFile(path, len(data), await _sha256(data))

    async def put_file(self, path: str, local_path: Path) -> StoredFile:
        """Stream a local file to ``path`` (multipart when larger than one chunk)."""
        validate_path(path)
        return await self._upload(path, local_path)

    async def put_content_addressed(
        self, prefix: str, local_path: Path, *, sha256: str | None = None
    ) -> ContentAddressedUpload:
        """Store a local file under ``<prefix>/<sha256>`` unless that key exists.

        Steps:

        1. hash the local file in a worker thread, streaming; a ``sha256`` given by the caller
           (computed moments before, e.g. in a checkpoint's inventory) saves that read, with
           the size from ``stat``;
        2. HEAD ``<prefix>/<sha256>``: present with the same size means the
           content is already stored, so return ``uploaded=False``;
           present with another size means a damaged copy, which is replaced;
        3. stream the file up, hashing the bytes sent;
        4. if that hash differs from step 1 the file changed underneath:
           delete the upload and raise LocalFileChangedError.

        Concurrent uploads of the same content both send it; the second
        overwrite writes identical bytes, so the key stays valid.
        """
        validate_prefix(prefix)
        if sha256 is None:
            size, digest = await asyncio.to_thread(_hash_file, local_path, self._chunk_size)
        elif _SHA256_HEX.fullmatch(sha256):
            size, digest = os.stat(local_path).st_size, sha256  # one syscall: no thread
        else:
            raise ValueError(f"sha256 must be 64 lowercase hex digits, got {sha256!r}")
        path = join(prefix, digest) if prefix else validate_path(digest)
        try:
            stored_size: int | None = await self.size(path)
        except NotFoundError:
            stored_size = None
        if stored_size == size:
            logger.debug("skip upload of %s: already stored", local_path, extra={"path": path})
            return ContentAddressedUpload(StoredFile(path, size, digest), uploaded=False)
        if stored_size is not None:
            logger.warning(
                "replacing %s: stored size %d differs from content size %d",
                path,
                stored_size,
                size,
                extra={"path": path},
            )
        stored = await self._upload(path, local_path, size_hint=size)
        if stored.sha256 != digest:
            await self.delete(path)
            raise LocalFileChangedError(local_path, digest, stored.sha256)
        return ContentAddressedUpload(stored, uploaded=True)

    async def _upload(
        self, path: str, local_path: Path, *, size_hint: int | None = None
    ) -> StoredFile:
        """Send ``local_path`` to ``path``. A file expected to be at most `INLINE_READ_BYTES`
        (``size_hint``) is read on the event loop: a worker thread would cost more (on a busy
        loop, one more wait of every task's turn) than reading a few page-cached KiB."""
        hasher = _Hasher()
        # Opened here, not in a worker thread: a cancellation while a thread
        # opens the file would drop the handle unclosed.
        with local_path.open("rb") as handle:
            if size_hint is not None and size_hint <= INLINE_READ_BYTES:
                first = hasher.read(handle, self._chunk_size)
            else:
                first = await asyncio.to_thread(hasher.read, handle, self._chunk_size)
            if len(first) < self._chunk_size:
                # The whole file fits in one chunk: one plain PUT, no multipart.
                with _translated("put", path):
                    await obstore.put_async(self._store, path, first, use_multipart=False)
            else:
                chunks = _FileChunks(handle, hasher, self._chunk_size, first)
                with _translated("put", path):
                    await obstore.put_async(
                        self._store,
                        path,
                        chunks,
                        use_multipart=True,
                        chunk_size=self._chunk_size,
                        max_concurrency=self._max_concurrency,
                    )
        logger.debug("uploaded %s to %s", local_path, path, extra={"path": path})
        return StoredFile(path, hasher.size, hasher.hexdigest())

    # -- reads ----------------------------------------------------------------

    async def get(self, path: str) -> bytes:
        """Return the bytes stored at ``path``, unverified."""
        validate_path(path)
        with _translated("get", path):
            result = await obstore.get_async(self._store, path)
            data = await result.bytes_async()
        return bytes(data)

    async def get_verified(self, file: StoredFile) -> bytes:
        """Return the bytes at ``file.path``; CorruptFileError if size or sha256 differ."""
        data = await self.get(file.path)
        actual = StoredFile(file.path, len(data), await _sha256(data))
        _check(file, actual)
        return data

    async def download_verified(self, file: StoredFile, local_path: Path) -> None:
        """Stream ``file`` to ``local_path`` through a verified temporary file.

        Steps:

        1. create ``.<name>.*.part`` beside ``local_path``;
        2. stream the object into it chunk by chunk, hashing each chunk;
        3. compare size and sha256 with ``file``: on mismatch remove the
           temporary file and raise CorruptFileError;
        4. rename it onto ``local_path`` (atomic on one filesystem).
        """
        validate_path(file.path)
        fd, tmp_name = await asyncio.to_thread(
            tempfile.mkstemp, dir=local_path.parent, prefix=f".{local_path.name}.", suffix=".part"
        )
        try:
            hasher = _Hasher()
            with os.fdopen(fd, "wb") as out:
                with _translated("get", file.path):
                    result = await obstore.get_async(self._store, file.path)
                stream = result.stream(min_chunk_size=self._chunk_size)
                while (chunk := await _next_chunk(stream, file.path)) is not None:
                    await asyncio.to_thread(hasher.write, out, chunk)
            _check(file, StoredFile(file.path, hasher.size, hasher.hexdigest()))
            await asyncio.to_thread(os.replace, tmp_name, local_path)
        except BaseException:
            # Synchronous on purpose: this also runs on cancellation, where awaiting is unsafe.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
            raise

    async def exists(self, path: str) -> bool:
        """Whether a file is stored at ``path``."""
        try:
            await self.size(path)
        except NotFoundError:
            return False
        return True

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Keys of every file under ``prefix``, recursive and sorted."""
        validate_prefix(prefix)
        with _translated("list", prefix):
            metas = await obstore.list(self._store, prefix or None).collect_async()
        return sorted(meta["path"] for meta in metas)

    async def delete(self, path: str) -> None:
        """Remove ``path``; a missing file is fine."""
        validate_path(path)
        try:
            with _translated("delete", path):
                await obstore.delete_async(self._store, path)
        except NotFoundError:
            return

    async def delete_many(self, paths: Sequence[str]) -> None:
        """Remove ``paths`` in batches of `_DELETE_BATCH` (one obstore call each, a fifth of
        the CPU of a call per file); a batch that names a missing file is deleted one by one,
        so that a missing file is not an error."""
        for path in paths:
            validate_path(path)
        for start in range(0, len(paths), _DELETE_BATCH):
            batch = list(paths[start : start + _DELETE_BATCH])
            try:
                with _translated("delete", batch[0]):
                    await obstore.delete_async(self._store, batch)
            except NotFoundError:
                for path in batch:
                    await self.delete(path)

    async def size(self, path: str) -> int:
        """Size in bytes of the file at ``path``."""
        validate_path(path)
        with _translated("head", path):
            meta = await obstore.head_async(self._store, path)
        return meta["size"]


class _Hasher:
    """sha256 and byte count of everything passed through it."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()
        self.size = 0

    def update(self, data: bytes) -> None:
        self._digest.update(data)
        self.size += len(data)

    def hexdigest(self) -> str:
        return self._digest.hexdigest()

    def read(self, handle: IO[bytes], size: int) -> bytes:
        data = handle.read(size)
        self.update(data)
        return data

    def write(self, handle: IO[bytes], data: bytes) -> None:
        handle.write(data)
        self.update(data)


class _FileChunks:
    """Async iterator over a local file's chunks, hashing each as it is read.

    A class rather than an async generator: obstore may stop iterating early
    on an error, and an abandoned async generator would be finalised late.
    """

    def __init__(self, handle: IO[bytes], hasher: _Hasher, chunk_size: int, first: bytes) -> None:
        self._handle = handle
        self._hasher = hasher
        self._chunk_size = chunk_size
        self._pending: bytes | None = first

    def __aiter__(self) -> _FileChunks:
        return self

    async def __anext__(self) -> bytes:
        if self._pending is not None:
            chunk, self._pending = self._pending, None
        else:
            chunk = await asyncio.to_thread(self._hasher.read, self._handle, self._chunk_size)
        if not chunk:
            raise StopAsyncIteration
        return chunk


def _hash_file(local_path: Path, chunk_size: int) -> tuple[int, str]:
    hasher = _Hasher()
    with local_path.open("rb") as handle:
        while hasher.read(handle, chunk_size):
            pass
    return hasher.size, hasher.hexdigest()


async def _sha256(data: bytes) -> str:
    # Small payloads (manifests) are hashed inline; big ones off the event loop.
    if len(data) <= 1024 * 1024:
        return hashlib.sha256(data).hexdigest()
    return (await asyncio.to_thread(hashlib.sha256, data)).hexdigest()


async def _next_chunk(stream: BytesStream, path: str) -> bytes | None:
    with _translated("get", path):
        try:
            return await stream.__anext__()
        except StopAsyncIteration:
            return None


def _check(expected: StoredFile, actual: StoredFile) -> None:
    if actual.size != expected.size or actual.sha256 != expected.sha256:
        raise CorruptFileError(expected.path, expected, actual)


@contextlib.contextmanager
def _translated(operation: str, path: str) -> Iterator[None]:
    """Map obstore's errors for ``operation`` on ``path`` onto the storage error tree."""
    try:
        yield
    except obstore_errors.AlreadyExistsError as exc:
        raise AlreadyExistsError(path) from exc
    except FileNotFoundError as exc:
        detail = _detail(exc)
        if operation in _READ_OPERATIONS and "NoSuchBucket" not in detail:
            raise NotFoundError(path) from exc
        # A write or listing "not found" is the bucket or root, not the key.
        raise StorageBackendError(operation, path, detail) from exc
    except (obstore_errors.BaseError, ConnectionError, TimeoutError) as exc:
        detail = _detail(exc)
        if isinstance(exc, ConnectionError | TimeoutError) or _TRANSIENT.search(str(exc)):
            raise StorageUnavailableError(operation, path, detail) from exc
        raise StorageBackendError(operation, path, detail) from exc


def _detail(exc: BaseException) -> str:
    # obstore appends a multi-line Rust debug dump; the first paragraph says it all.
    return str(exc).split("\n\nDebug source:", 1)[0].strip()

"""`DelegatingStorage`: a `Storage` that passes every call to another; tests subclass it and
override the one or two calls they interfere with (a crash, a delay, a count)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from pathlib import Path

from sluicegate.operators.storage import (
    ContentAddressedUpload,
    Storage,
    StorageUnavailableError,
    StoredFile,
)


class DelegatingStorage:
    """Every `Storage` call goes to ``inner`` unchanged."""

    def __init__(self, inner: Storage) -> None:
        self.inner = inner

    async def put(self, path: str, data: bytes) -> StoredFile:
        return await self.inner.put(path, data)

    async def put_if_absent(self, path: str, data: bytes) -> StoredFile:
        return await self.inner.put_if_absent(path, data)

    async def put_file(self, path: str, local_path: Path) -> StoredFile:
        return await self.inner.put_file(path, local_path)

    async def put_content_addressed(
        self, prefix: str, local_path: Path, *, sha256: str | None = None
    ) -> ContentAddressedUpload:
        return await self.inner.put_content_addressed(prefix, local_path, sha256=sha256)

    async def get(self, path: str) -> bytes:
        return await self.inner.get(path)

    async def get_verified(self, file: StoredFile) -> bytes:
        return await self.inner.get_verified(file)

    async def download_verified(self, file: StoredFile, local_path: Path) -> None:
        await self.inner.download_verified(file, local_path)

    async def exists(self, path: str) -> bool:
        return await self.inner.exists(path)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        return await self.inner.list(prefix)

    async def delete(self, path: str) -> None:
        await self.inner.delete(path)

    async def delete_many(self, paths: Sequence[str]) -> None:
        """One `delete` each, so that a wrapper's `delete` sees every file."""
        for path in paths:
            await self.delete(path)

    async def size(self, path: str) -> int:
        return await self.inner.size(path)


class UploadsDown(DelegatingStorage):
    """Content-addressed uploads fail while ``down`` (storage unreachable)."""

    down = False

    async def put_content_addressed(
        self, prefix: str, local_path: Path, *, sha256: str | None = None
    ) -> ContentAddressedUpload:
        if self.down:
            raise StorageUnavailableError("put", prefix, "storage is down")
        return await super().put_content_addressed(prefix, local_path, sha256=sha256)

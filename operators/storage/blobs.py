"""Payloads stored by reference: one object per payload, grouped by subject, with a TTL.

Layout (under `operators.storage.layout.BLOBS`)::

    blobs/<subject digest>/<id>          the payload's bytes
    blobs/<subject digest>/<id>.meta     its `BlobMeta` (JSON): scope, size, sha256, expiry

``<subject digest>`` is `subject_digest` of the subject (a person, a customer, a case: whom
the payload is about), so that erasing a subject is deleting one prefix, and the subject itself
is never spelt in a key. ``<id>`` is chosen by the writer (the agent runtime derives it from the
effect key, so a retry writes the same object).

`BlobStore` steps, where order matters:

* `BlobStore.put`: (1) the metadata is read; if it describes the same bytes and the payload is
  stored, nothing is written (a retry after a crash: the payload goes to storage once);
  (2) otherwise the metadata is written first, (3) then the payload. A crash between (2) and
  (3) leaves metadata without a payload, which `collect_expired` removes once it expires.
* `BlobStore.collect_expired`: every metadata file is read; past ``expires_at`` the payload is
  deleted, then the metadata. A payload without metadata (a crash within that pair) is deleted
  too.
* `BlobStore.erase`: every key under the subject's prefix is deleted.

Every byte read back is treated as hostile: metadata is bounded in size and validated, payloads
are checked against the size and sha256 the reader expects.
"""

from __future__ import annotations

import builtins
import hashlib
import logging
import math
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sluicegate.operators.storage.base import Storage, StoredFile
from sluicegate.operators.storage.exceptions import InvalidPathError, NotFoundError
from sluicegate.operators.storage.layout import BLOBS

__all__ = [
    "BLOB_ID",
    "MAX_META_BYTES",
    "BlobListing",
    "BlobMeta",
    "BlobStore",
    "BlobWrite",
    "GcReport",
    "blob_prefix",
    "subject_digest",
]

logger = logging.getLogger(__name__)

BLOB_ID = re.compile(r"[0-9a-f]{32}")
"""What a blob id and a subject digest look like: 32 lowercase hex digits (128 bits)."""
MAX_META_BYTES = 4096
"""A metadata file larger than this is refused as invalid, unread."""
_META_SUFFIX = ".meta"
_SCOPE = r"^[A-Za-z0-9._:/@-]{1,200}$"


def subject_digest(subject: str) -> str:
    """The key segment of ``subject``: the first 32 hex digits of its sha256."""
    return hashlib.sha256(subject.encode()).hexdigest()[:32]


def blob_prefix(digest: str | None = None) -> str:
    """``blobs`` or ``blobs/<subject digest>``."""
    if digest is None:
        return BLOBS
    if not BLOB_ID.fullmatch(digest):
        raise InvalidPathError(digest, "a subject digest is 32 lowercase hex digits")
    return f"{BLOBS}/{digest}"


class BlobMeta(BaseModel):
    """What is known of one stored payload; written beside it as ``<id>.meta``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    id: str = Field(pattern=BLOB_ID.pattern)
    subject: str = Field(pattern=BLOB_ID.pattern)
    """The subject's digest (`subject_digest`), never the subject."""
    scope: str = Field(pattern=_SCOPE)
    """Who may read it (an agent, a tenant): checked by the reader, not by storage."""
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    created_at: float
    expires_at: float | None = None
    """Seconds since the epoch after which it is gone; None: never expires."""

    @field_validator("created_at", "expires_at")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @property
    def path(self) -> str:
        return f"{blob_prefix(self.subject)}/{self.id}"

    @property
    def meta_path(self) -> str:
        return self.path + _META_SUFFIX

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at


@dataclass(frozen=True, slots=True)
class BlobWrite:
    """Outcome of `BlobStore.put`: the stored blob's metadata, and whether bytes were sent."""

    meta: BlobMeta
    uploaded: bool


@dataclass(frozen=True, slots=True)
class BlobListing:
    """One blob as `BlobStore.list` finds it: its metadata, or why that could not be read."""

    path: str
    meta: BlobMeta | None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class GcReport:
    """What `BlobStore.collect_expired` did."""

    scanned: int = 0
    """Blobs looked at (metadata files, and payloads without one)."""
    deleted: int = 0
    """Blobs deleted (expired, or a payload without metadata)."""
    deleted_bytes: int = 0
    invalid: int = 0
    """Metadata files that could not be read (left in place, logged)."""


class BlobStore:
    """Blobs in a `Storage` (the job's checkpoint storage by default); see the module doc."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    async def put(self, meta: BlobMeta, data: bytes) -> BlobWrite:
        """Store ``data`` as described by ``meta`` (whose size and sha256 must be ``data``'s),
        unless it is stored already; steps in the module docstring."""
        if meta.size != len(data) or meta.sha256 != hashlib.sha256(data).hexdigest():
            raise ValueError(f"blob {meta.id}: size or sha256 do not describe the data")
        stored = await self._read_meta(meta.meta_path)
        if (
            isinstance(stored, BlobMeta)
            and (stored.sha256, stored.size, stored.scope) == (meta.sha256, meta.size, meta.scope)
            and await self.storage.exists(meta.path)
            and await self.storage.size(meta.path) == meta.size
        ):
            return BlobWrite(stored, uploaded=False)
        if isinstance(stored, BlobMeta):
            logger.warning("blob %s: stored with other content; replaced", meta.id)
        await self.storage.put(meta.meta_path, meta.model_dump_json().encode())
        await self.storage.put(meta.path, data)
        return BlobWrite(meta, uploaded=True)

    async def get(self, subject: str, blob_id: str, *, size: int, sha256: str) -> bytes:
        """The payload ``blob_id`` of subject digest ``subject``, checked against ``size`` and
        ``sha256``.

        Raises:
            NotFoundError: nothing is stored there (erased, collected, never written).
            CorruptFileError: the stored bytes are not the expected ones.
        """
        if not BLOB_ID.fullmatch(blob_id):
            raise InvalidPathError(blob_id, "a blob id is 32 lowercase hex digits")
        path = f"{blob_prefix(subject)}/{blob_id}"
        return await self.storage.get_verified(StoredFile(path, size, sha256))

    async def list(self, subject: str | None = None) -> builtins.list[BlobListing]:
        """Every blob (of ``subject``, a digest, if given), by path."""
        listings: builtins.list[BlobListing] = []
        for path in await self.storage.list(blob_prefix(subject)):
            if path.endswith(_META_SUFFIX):
                stored = await self._read_meta(path)
                if isinstance(stored, BlobMeta):
                    listings.append(BlobListing(stored.path, stored))
                else:
                    listings.append(BlobListing(path.removesuffix(_META_SUFFIX), None, stored))
        return listings

    async def erase(self, subject: str) -> int:
        """Delete every blob of subject digest ``subject``; the number of files deleted."""
        paths = await self.storage.list(blob_prefix(subject))
        for path in paths:
            await self.storage.delete(path)
        return len(paths)

    async def collect_expired(self, now: float) -> GcReport:
        """Delete the blobs past ``expires_at`` at ``now``; steps in the module docstring."""
        paths = await self.storage.list(BLOBS)
        present = set(paths)
        described = {p.removesuffix(_META_SUFFIX) for p in paths if p.endswith(_META_SUFFIX)}
        scanned = deleted = deleted_bytes = invalid = 0
        for path in paths:
            if not path.endswith(_META_SUFFIX):
                if path not in described:  # its metadata is gone: a crash within a delete
                    scanned += 1
                    deleted_bytes += await self._delete_sized(path)
                    deleted += 1
                continue
            scanned += 1
            stored = await self._read_meta(path)
            if not isinstance(stored, BlobMeta):
                invalid += 1
                logger.warning("blob metadata %s: %s; left in place", path, stored)
                continue
            if stored.meta_path != path:
                invalid += 1
                logger.warning("blob metadata %s names another blob; left in place", path)
                continue
            if stored.expired(now):
                if stored.path in present:
                    deleted_bytes += await self._delete_sized(stored.path)
                await self.storage.delete(path)
                deleted += 1
        return GcReport(scanned, deleted, deleted_bytes, invalid)

    async def _delete_sized(self, path: str) -> int:
        try:
            size = await self.storage.size(path)
        except NotFoundError:
            size = 0
        await self.storage.delete(path)
        return size

    async def _read_meta(self, path: str) -> BlobMeta | str | None:
        """The metadata at ``path``; None if absent; a reason if it cannot be read."""
        try:
            size = await self.storage.size(path)
            if size > MAX_META_BYTES:
                return f"{size} bytes, more than {MAX_META_BYTES}"
            raw = await self.storage.get(path)
        except NotFoundError:
            return None
        try:
            return BlobMeta.model_validate_json(raw)
        except ValidationError as exc:
            return f"invalid: {exc.errors()[0]['msg']}"

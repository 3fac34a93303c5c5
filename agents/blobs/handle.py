"""`BlobHandle`: what snapshots, the journal and events hold in place of a large payload.

A handle is a small JSON object with one key::

    {"$blob": {"id": "<32 hex>", "subject": "<32 hex>", "scope": "support/eu",
               "size": 1048576, "sha256": "<64 hex>", "expires_at": 1767225600.0,
               "kind": "json"}}

* ``id``: `blob_id` of the agent's scope and the effect key (so a retry of the effect after a
  crash names the same object, which is then not written again);
* ``subject``: the digest of whom the payload is about (`operators.storage.blobs.subject_digest`),
  never the subject itself; erasure deletes by it;
* ``scope``: who may read it back (the agent, and the task's tenant): a reader in another scope
  is refused;
* ``size`` and ``sha256``: what the stored bytes must be (checked on every read);
* ``expires_at``: seconds since the epoch, None for never;
* ``kind``: ``json`` (a tool's result, stored as the JSON text the model is shown) or ``text``
  (a model message's content).

Every handle read is hostile input: `handle_of` and `handle_of_text` return None for anything
that is not exactly a valid handle (wrong shape, extra fields, bad digests, oversized text).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = [
    "HANDLE_KEY",
    "MAX_BLOB_BYTES",
    "MAX_HANDLE_TEXT",
    "BlobHandle",
    "blob_id",
    "handle_of",
    "handle_of_text",
    "looks_like_handle",
    "looks_like_handle_text",
    "unavailable_marker",
]

HANDLE_KEY = "$blob"
MAX_BLOB_BYTES = 1 << 30
"""The largest payload a handle may describe (1 GiB)."""
_HEX32 = r"^[0-9a-f]{32}$"  # `operators.storage.blobs.BLOB_ID`, kept free of storage imports
MAX_HANDLE_TEXT = 1024
"""A message content longer than this is never read as a handle."""


class BlobHandle(BaseModel):
    """The body of a handle (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=_HEX32)
    subject: str = Field(pattern=_HEX32)
    scope: str = Field(pattern=r"^[^\x00-\x1f\x7f]{1,200}$")
    size: int = Field(ge=0, le=MAX_BLOB_BYTES)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    expires_at: float | None = None
    kind: Literal["json", "text"]

    @field_validator("expires_at")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def value(self) -> dict[str, Any]:
        """The handle as a JSON value: ``{"$blob": {...}}``."""
        return {HANDLE_KEY: self.model_dump(mode="json")}

    def text(self) -> str:
        """The handle as compact, canonical JSON text (what a message's content holds)."""
        return json.dumps(self.value(), sort_keys=True, separators=(",", ":"))


def blob_id(scope: str, effect_key: str, part: str) -> str:
    """The id of payload ``part`` (``result``, ``content``) of effect ``effect_key`` in
    ``scope``: deterministic, so a retry names the same object; the scope is part of it, so
    two agents with the same run ids never share one."""
    material = "\n".join((scope, effect_key, part)).encode()
    return hashlib.sha256(material).hexdigest()[:32]


def looks_like_handle(value: Any) -> bool:
    """Whether ``value`` could be taken for a handle: a dict with a ``$blob`` key. Such a value
    is always stored by reference, so that only handles written here ever look like one."""
    return isinstance(value, dict) and HANDLE_KEY in value


def looks_like_handle_text(text: str | None) -> bool:
    """Whether a message content could be taken for a handle (see `looks_like_handle`)."""
    return text is not None and text.lstrip().startswith("{") and HANDLE_KEY in text


def handle_of(value: Any) -> BlobHandle | None:
    """The handle ``value`` is, or None when it is anything else."""
    if not isinstance(value, dict) or set(value) != {HANDLE_KEY}:
        return None
    body = value[HANDLE_KEY]
    if not isinstance(body, dict):
        return None
    try:
        return BlobHandle.model_validate(body)
    except ValidationError:
        return None


def handle_of_text(text: str | None) -> BlobHandle | None:
    """The handle a message content is, or None (also for any text longer than
    `MAX_HANDLE_TEXT`, which is never parsed)."""
    if text is None or len(text) > MAX_HANDLE_TEXT or not looks_like_handle_text(text):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return handle_of(value)


def unavailable_marker(handle: BlobHandle, reason: str) -> str:
    """What a model is shown in place of a payload it can no longer read."""
    return (
        f"[payload unavailable ({reason}): blob {handle.id} was stored by reference and can "
        "no longer be read; its content cannot be shown]"
    )

"""Large payloads by reference: tool results and model messages above a size threshold are
stored once in the blob store, and a run holds only a handle to them.

Modules: :mod:`~agents.blobs.handle` (the handle, hostile-input safe parsing, ids),
:mod:`~agents.blobs.policy` (`BlobPolicy` on `agents.declaration.Agent`),
:mod:`~agents.blobs.references` (conversion at the operator boundary and lazy resolution).
The store itself (layout, write-once, erasure by subject, TTL collection) is
`operators.storage.blobs`, so the coordinator can collect expired blobs too. The guide is
``docs/blobs.md``.
"""

from __future__ import annotations

from sluicegate.agents.blobs.handle import (
    HANDLE_KEY,
    BlobHandle,
    blob_id,
    handle_of,
    handle_of_text,
    unavailable_marker,
)
from sluicegate.agents.blobs.policy import DEFAULT_THRESHOLD_BYTES, BlobPolicy

__all__ = [
    "DEFAULT_THRESHOLD_BYTES",
    "HANDLE_KEY",
    "BlobHandle",
    "BlobPolicy",
    "blob_id",
    "handle_of",
    "handle_of_text",
    "unavailable_marker",
]

"""`MemoryEntry`: one entry of a key's memory, a versioned pydantic document (no pickle).

Stored as JSON under ``memory/<key, hex>/<seq, 12 digits>`` in the keyed state of the
partition the key is routed to (`agents.memory.rows`). ``schema_version`` is its first field;
`UPGRADERS` maps each older version ``k`` to a pure function of the JSON document from ``k`` to
``k + 1``, applied in `MemoryEntry.decode`, like `agents.runs.versions` for `RunState` and the
journal's entries. A version newer than the code is refused.

History:

* 1: the first version. ``tests/fixtures/memory/`` keeps stored entries of every version,
  decoded in the tests; add one there whenever the version changes.
"""

from __future__ import annotations

import json
import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sluicegate.agents.documents import Document, DocumentVersionError, Upgraders, upgrade

__all__ = [
    "CURRENT",
    "UPGRADERS",
    "EntryKind",
    "MemoryEntry",
    "MemoryEntryError",
    "estimate_tokens",
    "upgrade_entry",
]

CURRENT = 1
"""The ``schema_version`` of `MemoryEntry` this code writes."""

UPGRADERS: Upgraders = {}
"""Version ``k`` -> the upgrader of a document from ``k`` to ``k + 1``."""

EntryKind = Literal["note", "summary"]
"""``note``: written by the ``remember`` tool; ``summary``: a run's answer (`Memory.summary`)."""


class MemoryEntryError(ValueError):
    """A stored memory entry that cannot be read (not JSON, a version this code does not
    know, a field that does not validate)."""


class MemoryEntry(BaseModel):
    """One entry of the memory of ``key``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    key: str = Field(min_length=1)
    seq: int = Field(ge=0)
    """Its place among the key's entries: written later, higher."""
    kind: EntryKind
    text: str
    run_id: str
    """The run that wrote it."""
    step: int = Field(ge=0)
    """The run's step when it was written."""
    source: str
    """What wrote it: the effect key of the ``remember`` call, or ``<run_id>/summary``."""
    written_at: float
    expires_at: float | None = None
    """When it is no longer read (`Memory.ttl_s`); None: never."""

    @property
    def entry_id(self) -> str:
        """``<key>#<seq>``: how history and the CLI name it."""
        return f"{self.key}#{self.seq}"

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def encode(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def decode(cls, data: bytes) -> MemoryEntry:
        """The entry ``data`` holds, upgraded to `CURRENT`; raises `MemoryEntryError`."""
        try:
            doc = json.loads(data)
        except ValueError as exc:
            raise MemoryEntryError(f"a memory entry is not JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise MemoryEntryError(f"a memory entry is a JSON {type(doc).__name__}")
        try:
            return cls.model_validate(upgrade_entry(doc))
        except ValueError as exc:  # a pydantic ValidationError is one
            raise MemoryEntryError(f"a memory entry does not validate: {exc}") from None


def upgrade_entry(doc: Document) -> Document:
    """``doc`` (a stored entry as JSON) at `CURRENT`; raises `MemoryEntryError` for a version
    newer than this code or without an upgrader."""
    try:
        return upgrade(doc, what="memory entry", current=CURRENT, upgraders=UPGRADERS)
    except DocumentVersionError as exc:
        raise MemoryEntryError(str(exc)) from None


def estimate_tokens(text: str) -> int:
    """The tokens ``text`` is counted as by the read rule: one per 4 bytes of UTF-8, rounded
    up, plus 4 for the entry's framing. A rule, not a tokenizer: it is the same for every
    model and every replay, and over-counts typical English text a little."""
    return math.ceil(len(text.encode()) / 4) + 4

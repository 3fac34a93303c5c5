"""At-least-once sink records: the deterministic id each one carries for dedup."""

from __future__ import annotations

import hashlib

from operators.contract import Record

__all__ = ["RECORD_ID_HEADER", "record_id"]

RECORD_ID_HEADER = "sg-id"
"""On at-least-once sink records: a deterministic id to drop duplicates by."""


def record_id(
    operator: str, source: Record | None, index: int, key: bytes | None, value: bytes
) -> str:
    """The id of the ``index``-th output of ``operator`` for ``source``: the same input record
    yields the same id in every replay."""
    if source is not None:
        return f"{operator}/{source.topic}/{source.partition}/{source.offset}/{index}"
    # a wake-up: the content names it (replays emit the same content)
    digest = hashlib.sha256((key or b"") + b"\0" + value).hexdigest()
    return f"{operator}/wake/{digest[:32]}"

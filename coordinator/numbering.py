"""The coordinator's durable numbering in checkpoint storage: attempts and checkpoint ids.

* An attempt is taken with create-if-absent at ``attempts/<A>`` before any subtask of ``A``
  produces a record, so two coordinators (or a restarted one) never share an attempt.
* Every checkpoint id leaves ``checkpoints/<n>/_triggered`` before a barrier carries it, so
  ids never repeat, across attempts and coordinator restarts too.
"""

from __future__ import annotations

from operators.storage import AlreadyExistsError, Storage
from operators.storage.layout import (
    ATTEMPTS,
    CHECKPOINTS,
    attempt_marker,
    full_checkpoint_marker,
    parse_checkpoint_id,
)

__all__ = ["mark_triggered", "next_checkpoint_id", "take_attempt"]


async def take_attempt(storage: Storage) -> int:
    """Take the next attempt number durably and return it."""
    taken = [int(p.rsplit("/", 1)[-1]) for p in await storage.list(ATTEMPTS)]
    attempt = max(taken, default=0) + 1
    while True:
        try:
            await storage.put_if_absent(attempt_marker(attempt), b"")
            return attempt
        except AlreadyExistsError:
            attempt += 1


async def next_checkpoint_id(storage: Storage) -> int:
    """One more than any checkpoint id ever triggered."""
    ids = [parse_checkpoint_id(p) for p in await storage.list(CHECKPOINTS)]
    return max((n for n in ids if n is not None), default=0) + 1


async def mark_triggered(storage: Storage, checkpoint_id: int, *, full: bool = False) -> None:
    """Record durably that ``checkpoint_id`` is used; call before injecting its barriers.
    ``full``: its subtasks upload every file to its own folder (`full_checkpoint_marker`)."""
    if full:
        await storage.put(full_checkpoint_marker(checkpoint_id), b"")
    await storage.put(f"{CHECKPOINTS}/{checkpoint_id}/_triggered", b"")

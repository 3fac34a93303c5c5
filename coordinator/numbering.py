"""The coordinator's durable numbering in checkpoint storage: attempts and checkpoint ids.

* An attempt is taken with create-if-absent at ``attempts/<A>`` before any subtask of ``A``
  produces a record, so two coordinators (or a restarted one) never share an attempt.
* Every checkpoint id leaves ``checkpoints/<n>/_triggered`` before a barrier carries it, so
  ids never repeat, across attempts and coordinator restarts too.
"""

from __future__ import annotations

from collections.abc import Callable

from sluicegate.operators.storage import AlreadyExistsError, Storage
from sluicegate.operators.storage.layout import (
    ATTEMPTS,
    CHECKPOINTS,
    attempt_marker,
    full_checkpoint_marker,
    parse_checkpoint_id,
)

__all__ = ["mark_triggered", "newest_number", "next_checkpoint_id", "take_attempt", "take_next"]


async def take_attempt(storage: Storage) -> int:
    """Take the next attempt number durably and return it."""
    return await take_next(storage, ATTEMPTS, attempt_marker)


async def newest_number(storage: Storage, prefix: str) -> int:
    """The largest number stored as a key under ``prefix`` (0: none); other keys are
    ignored."""
    names = (path.rsplit("/", 1)[-1] for path in await storage.list(prefix))
    return max((int(name) for name in names if name.isascii() and name.isdigit()), default=0)


async def take_next(storage: Storage, prefix: str, marker: Callable[[int], str]) -> int:
    """Take the number after `newest_number` under ``prefix`` durably, create-if-absent at
    ``marker(n)`` (the next one if another process took it first), and return it."""
    number = await newest_number(storage, prefix) + 1
    while True:
        try:
            await storage.put_if_absent(marker(number), b"")
            return number
        except AlreadyExistsError:
            number += 1


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

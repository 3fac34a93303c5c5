"""What a user's process function receives: a `Record` and a `Context`.

A process function is called once per input record, in offset order per input partition,
one record at a time per key. It may be a plain function or a coroutine function::

    def count(record: Record, ctx: Context) -> None:
        total = int(ctx.state.get(record.key) or b"0") + 1
        ctx.state.put(record.key, str(total).encode())
        ctx.emit("counts", str(total).encode(), key=record.key)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from operators.state.store import PartitionState

__all__ = ["Context", "ProcessFunction", "Record"]


@dataclass(frozen=True, slots=True)
class Record:
    """One input record and where it came from."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    timestamp_ms: int


class Context(Protocol):
    """The subtask as one process-function call sees it."""

    @property
    def state(self) -> PartitionState:
        """The keyed state of the partition the current record was read from."""
        ...

    def emit(self, topic: str, value: bytes, *, key: bytes | None = None) -> None:
        """Send ``value`` to an output topic; the partition is ``murmur2(key) mod partitions``."""
        ...


ProcessFunction = Callable[[Record, Context], Awaitable[None] | None]
"""A user's per-record function: sync, or async (awaited before the next record of its key)."""

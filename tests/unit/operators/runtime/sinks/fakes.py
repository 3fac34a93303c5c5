"""In-memory stand-ins for what the sinks talk to: a state area, the Kafka transactions of an
exactly-once sink, and the subtask's producer."""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field

from sluicegate.operators.runtime.sinks.write_ahead import SinkOutput


class MemoryState:
    """A `PartitionState` in a dict: rows in key order, iteration over a copy."""

    def __init__(self) -> None:
        self.rows: dict[bytes, bytes] = {}

    def get(self, key: bytes) -> bytes | None:
        return self.rows.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self.rows[key] = value

    def delete(self, key: bytes) -> None:
        self.rows.pop(key, None)

    def items(self, *, prefix: bytes = b"") -> Generator[tuple[bytes, bytes], None, None]:
        yield from sorted((k, v) for k, v in self.rows.items() if k.startswith(prefix))


@dataclass
class FakeTransactions:
    """`Transactions` whose committed transactions are a list; ``fail`` makes the next
    ``publish`` raise (the transaction aborts: nothing is committed); while ``hold`` is
    given and not set, a ``publish`` waits before it commits."""

    published: int = 0
    """What the progress topic says at ``start``."""
    committed: list[tuple[list[SinkOutput], int]] = field(default_factory=list)
    started: bool = False
    stopped: bool = False
    fail: bool = False
    hold: asyncio.Event | None = None

    async def start(self) -> None:
        self.started = True

    async def read_published(self) -> int:
        assert self.started, "read before start"
        return self.published

    async def publish(self, outputs: Sequence[SinkOutput], up_to: int) -> None:
        assert self.started
        assert not self.stopped
        if self.hold is not None:
            await self.hold.wait()
        if self.fail:
            self.fail = False
            raise ConnectionError("broker went away mid-transaction")
        self.committed.append((list(outputs), up_to))
        self.published = up_to

    async def stop(self) -> None:
        self.stopped = True

    @property
    def outputs(self) -> list[SinkOutput]:
        """Every committed output, in commit order."""
        return [out for outputs, _ in self.committed for out in outputs]


@dataclass
class FakeSender:
    """A `RecordAppender` that keeps what it was given."""

    sent: list[tuple[str, int, bytes | None, bytes, list[tuple[str, bytes]]]] = field(
        default_factory=list
    )

    def add(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes,
        headers: Sequence[tuple[str, bytes]],
    ) -> None:
        self.sent.append((topic, partition, key, value, list(headers)))

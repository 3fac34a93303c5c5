"""What a user's code receives: a `Record` and a `Context`; and the `Operator` lifecycle.

A process function is called once per input record, in offset order per input partition,
one record at a time per key. It may be a plain function, which returns None and is called
directly from the subtask's loop (the fast path), or a coroutine function (``async def``),
which runs through a bounded executor::

    def count(record: Record, ctx: Context) -> None:
        total = int(ctx.state.get(record.key) or b"0") + 1
        ctx.state.put(record.key, str(total).encode())
        ctx.emit("counts", str(total).encode(), key=record.key)

An operator that does work of its own between records (an agent run waiting on a model) is an
`Operator` subclass: one instance per subtask, with hooks around the checkpoint lifecycle. Its
contract, which the subtask guarantees:

1. `Operator.open` runs after the state is restored and before any record: it finds the keys
   with pending work in the restored state and calls `OpenContext.wake` for each.
2. `Operator.process` (per record) and `Operator.on_wake` (per woken key) are called one at a
   time per key, in order, through the same bounded executor. A call's state writes and emits
   become visible together when it returns; a snapshot is taken only between calls, so it
   never holds half of one. Keep each call short (one model or tool call, not a whole run).
3. `Operator.on_snapshot(n)` runs in the synchronous phase of checkpoint ``n``, after every
   call in flight has returned and before the state is snapshotted.
4. `Operator.on_completed(n)` runs when the coordinator says checkpoint ``n`` completed.
5. `Operator.close` runs when the subtask stops (also on failure); wake-ups not yet run are
   dropped, and come back through `open` after a restore (they are derived from state).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple, Protocol

from sluicegate.operators.state.store import PartitionState

if TYPE_CHECKING:
    from sluicegate.operators.kafka import KafkaLike
    from sluicegate.operators.storage import Storage

__all__ = ["Context", "OpenContext", "Operator", "OperatorFactory", "ProcessFunction", "Record"]


class Record(NamedTuple):
    """One input record and where it came from.

    A named tuple rather than a frozen dataclass: immutable all the same, and built once per
    record read, where a frozen dataclass's ``__init__`` cost five times as much."""

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

    @property
    def partition(self) -> int:
        """The number of that partition."""
        ...

    def emit(
        self, topic: str, value: bytes, *, key: bytes | None = None, partition: int | None = None
    ) -> None:
        """Send ``value`` to an output topic; the partition is ``murmur2(key) mod partitions``,
        or ``partition`` when given (a partition number of the topic: one that is not fails
        the subtask, as a programming error)."""
        ...

    def state_of(self, topic: str) -> PartitionState:
        """The keyed state of the same partition number of another (co-partitioned) input."""
        ...

    def wake(self, key: bytes, *, topic: str | None = None, after_s: float = 0.0) -> None:
        """Have `Operator.on_wake` called for ``key`` in this partition of ``topic`` (default:
        the current one), no sooner than ``after_s`` seconds from now, once this call returned.
        Wake-ups are not durable: derive them from state again in `Operator.open`."""
        ...


ProcessFunction = Callable[[Record, Context], Awaitable[None] | None]
"""A user's per-record function: sync, or async (awaited before the next record of its key)."""


class OpenContext(Protocol):
    """The subtask as `Operator.open` sees it."""

    @property
    def subtask(self) -> str:
        """``uid#index``."""
        ...

    @property
    def attempt(self) -> int: ...

    @property
    def bootstrap(self) -> KafkaLike:
        """How to reach Kafka (`operators.kafka.KafkaSettings`, or a PLAINTEXT bootstrap
        address), for an operator's own clients: build them with `operators.kafka.clients`."""
        ...

    @property
    def input_partitions(self) -> list[tuple[str, int]]:
        """The ``(topic, partition)`` pairs this subtask reads."""
        ...

    @property
    def storage(self) -> Storage:
        """The job's checkpoint storage, for an operator's own durable files, each under a
        prefix of its own in `operators.storage.layout` (an agent's payloads by reference go
        under ``blobs/``). Never write under ``checkpoints/``, ``shared/`` or ``savepoints/``:
        retention and orphan audits own them."""
        ...

    def owned_topic(self, suffix: str) -> str:
        """The name of a topic the operator declared with ``owned_topics``."""
        ...

    def state(self, topic: str, partition: int) -> PartitionState:
        """The keyed state of input partition ``topic[partition]``."""
        ...

    def wake(self, topic: str, partition: int, key: bytes, *, after_s: float = 0.0) -> None:
        """Have `Operator.on_wake` called for ``key`` of ``topic[partition]``."""
        ...


class Operator:
    """A stateful operator with a lifecycle: one instance per subtask. Steps in the module
    docstring. Subclasses override `process` and whichever hooks they need."""

    async def open(self, ctx: OpenContext) -> None:
        """The state is restored (or empty); no record was processed yet."""

    def process(self, record: Record, ctx: Context) -> Awaitable[None] | None:
        """Handle one input record."""
        raise NotImplementedError

    def on_wake(self, key: bytes, ctx: Context) -> Awaitable[None] | None:
        """Continue the work of ``key``, woken by `Context.wake` or `OpenContext.wake`."""
        return None

    def on_snapshot(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is being taken; nothing is in flight."""

    async def on_completed(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed: its state is durable."""

    async def close(self) -> None:
        """The subtask stops."""

    def status_counts(self) -> Mapping[str, Mapping[str, int]]:
        """Counts for ``sluicegate status``, by group then name: an agent answers
        ``{"runs": {"running": 3, "done": 40}}``. The worker's heartbeat carries them to the
        coordinator, which sums them over the operator's subtasks; called between records, so
        keep it cheap. The group ``records`` is the engine's (records in, out and lag,
        `operators.protocol.messages.RECORDS_GROUP`): an operator's own group of that name is
        replaced."""
        return {}


OperatorFactory = Callable[[], Operator]
"""Makes the `Operator` of one subtask (each subtask gets its own instance)."""


class FunctionOperator(Operator):
    """A plain process function as an `Operator` with no lifecycle."""

    def __init__(self, function: ProcessFunction) -> None:
        self.function = function

    def process(self, record: Record, ctx: Context) -> Awaitable[None] | None:
        return self.function(record, ctx)

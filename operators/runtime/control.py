"""Messages between subtasks and the coordinator, and the link that carries them.

Subtask → coordinator: `CheckpointAck` (after the upload), `CheckpointDecline` (buffer over its
bound), `SubtaskFailed` (the subtask stops with an error). Coordinator → subtask:
`CheckpointCompleted` (publish sink outputs up to n), `CheckpointAborted` (drop alignment) and
`StopSubtasks` (the job is stopping: finish the messages before this one, then stop).

`ControlLink` is what a subtask needs of the control plane; `InMemoryControl` connects subtasks
and a coordinator running in one process. (The coordinator issue adds a link over Kafka control
topics, so workers need nothing but Kafka.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from operators.protocol.records import TopicPartition
from operators.runtime.state_transfer import StateHandle

__all__ = [
    "Assign",
    "CheckpointAborted",
    "CheckpointAck",
    "CheckpointCompleted",
    "CheckpointDecline",
    "ControlLink",
    "FromWorker",
    "Heartbeat",
    "InMemoryControl",
    "InboxLink",
    "StopSubtasks",
    "SubtaskFailed",
    "ToCoordinator",
    "ToSubtask",
    "ToWorker",
]


@dataclass(frozen=True, slots=True)
class CheckpointAck:
    """Subtask ``subtask`` holds checkpoint ``checkpoint_id`` in storage.

    ``positions`` holds ``R_p`` per input partition. Durations are seconds.
    """

    subtask: str
    checkpoint_id: int
    attempt: int
    positions: Mapping[TopicPartition, int]
    handle: StateHandle
    alignment_seconds: float = 0.0
    sync_seconds: float = 0.0
    async_seconds: float = 0.0

    @property
    def full_size_bytes(self) -> int:
        return self.handle.full_bytes

    @property
    def incremental_size_bytes(self) -> int:
        return self.handle.uploaded_bytes


@dataclass(frozen=True, slots=True)
class CheckpointDecline:
    subtask: str
    checkpoint_id: int
    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class SubtaskFailed:
    """``subtask`` stopped with an error. ``corrupt_checkpoint`` names the checkpoint whose
    stored files failed verification on restore, when that was the cause."""

    subtask: str
    attempt: int
    reason: str
    corrupt_checkpoint: int | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A worker is alive, hosts ``subtasks`` of ``attempt``, and has ``slots`` in all.

    ``incarnation`` is new in every worker process: a worker that restarted under the same id
    has lost its subtasks, which the coordinator must notice even if no heartbeat was missed.
    """

    worker_id: str
    incarnation: str
    slots: int
    attempt: int
    subtasks: tuple[str, ...]
    counts: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    """Per running subtask, its operator's `Operator.status_counts` (for ``sluicegate status``)."""


@dataclass(frozen=True, slots=True)
class Assign:
    """Run ``assignment`` (worker id -> subtasks) at ``attempt``, restored from checkpoint
    ``restore_from`` (None: from the beginning); the next checkpoint id is ``next_checkpoint_id``.
    A worker stops every subtask of an older attempt first."""

    attempt: int
    restore_from: int | None
    next_checkpoint_id: int
    assignment: dict[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class CheckpointCompleted:
    checkpoint_id: int
    attempt: int


@dataclass(frozen=True, slots=True)
class CheckpointAborted:
    checkpoint_id: int
    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class StopSubtasks:
    """The job is stopping: every subtask of ``attempt`` handles the control messages sent
    before this one (``completed(n)`` of the final checkpoint publishes its sink outputs), then
    stops without error. A worker stops its subtasks of older attempts at once."""

    attempt: int


ToCoordinator = CheckpointAck | CheckpointDecline | SubtaskFailed
ToSubtask = CheckpointCompleted | CheckpointAborted | StopSubtasks
FromWorker = ToCoordinator | Heartbeat
ToWorker = ToSubtask | Assign


class ControlLink(Protocol):
    """One subtask's end of the control plane."""

    async def send(self, message: ToCoordinator) -> None:
        """Deliver ``message`` to the coordinator."""
        ...

    def poll(self) -> ToSubtask | None:
        """The next message for this subtask, or None when there is none now."""
        ...


@dataclass
class InboxLink:
    """A `ControlLink` that sends through ``deliver`` and polls a queue the host fills."""

    deliver: Callable[[ToCoordinator], Awaitable[None]]
    inbox: asyncio.Queue[ToSubtask] = field(default_factory=asyncio.Queue)

    async def send(self, message: ToCoordinator) -> None:
        await self.deliver(message)

    def poll(self) -> ToSubtask | None:
        try:
            return self.inbox.get_nowait()
        except asyncio.QueueEmpty:
            return None


@dataclass
class InMemoryControl:
    """Queues between a coordinator and the subtasks of one process."""

    to_coordinator: asyncio.Queue[ToCoordinator] = field(default_factory=asyncio.Queue)
    _links: dict[str, InboxLink] = field(default_factory=dict)

    def link(self, subtask: str) -> InboxLink:
        """The link of ``subtask``; a fresh inbox (a restarted subtask hears nothing old)."""
        self._links[subtask] = InboxLink(self.to_coordinator.put)
        return self._links[subtask]

    def broadcast(self, message: ToSubtask) -> None:
        """Send ``message`` to every subtask."""
        for link in self._links.values():
            link.inbox.put_nowait(message)

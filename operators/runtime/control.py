"""The link that carries control messages (`operators.protocol.messages`) to and from a subtask.

Three ends, one per party:

* `ControlLink`: a subtask's; its worker gives it an `InboxLink` fed from the worker's end
  (`InMemoryControl` connects bare subtasks to a test in one process);
* `WorkerLink`: a worker's; it hears every message for workers and sends to the coordinator;
* `CoordinatorLink`: the coordinator's; it sends to every worker.

Workers and the coordinator are joined over Kafka (`operators.runtime.kafka_control`) or, in one
process, by an `InMemoryBus` (`coordinator.local.LocalJob`); the coordinator and the worker are
the same code either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, cast

from sluicegate.operators.protocol.messages import FromWorker, ToCoordinator, ToSubtask, ToWorker
from sluicegate.operators.protocol.wire import decode_message, encode_message

__all__ = [
    "ControlLink",
    "CoordinatorLink",
    "InMemoryBus",
    "InMemoryControl",
    "InboxLink",
    "WorkerLink",
]

_M = TypeVar("_M")


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


class WorkerLink(Protocol):
    """A worker's end of the control plane: it hears every message for workers and talks to
    the coordinator. Used as an async context manager (clients start and stop with it)."""

    async def __aenter__(self) -> WorkerLink: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def send(self, message: FromWorker) -> None:
        """Deliver ``message`` to the coordinator."""
        ...

    async def receive(self, timeout_s: float) -> list[ToWorker]:
        """The messages for workers that arrived, waiting up to ``timeout_s`` for one."""
        ...


class CoordinatorLink(Protocol):
    """The coordinator's end of the control plane: what it sends reaches every worker."""

    async def __aenter__(self) -> CoordinatorLink: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def send(self, message: ToWorker) -> None:
        """Deliver ``message`` to every worker."""
        ...

    async def receive(self, timeout_s: float) -> list[FromWorker]:
        """The messages from workers that arrived, waiting up to ``timeout_s`` for one."""
        ...


def _over_the_wire(message: _M) -> _M:
    """``message`` encoded and decoded as the Kafka control topics carry it, so that jobs in
    one process exercise the wire format too. A message the decoder refuses raises here, in
    the sender; over Kafka the receiver would skip it, and the job would wait for it."""
    decoded = decode_message(encode_message(cast(FromWorker | ToWorker, message)))
    assert type(decoded) is type(message), (decoded, message)
    return cast(_M, decoded)


async def _drain(queue: asyncio.Queue[_M], timeout_s: float) -> list[_M]:
    try:
        # Not wait_for: on 3.11 it can swallow a cancel that lands as a message arrives.
        async with asyncio.timeout(timeout_s):
            first = await queue.get()
    except TimeoutError:
        return []
    messages = [first]
    while not queue.empty():
        messages.append(queue.get_nowait())
    return messages


@dataclass
class _InMemoryWorkerEnd:
    bus: InMemoryBus
    inbox: asyncio.Queue[ToWorker] = field(default_factory=asyncio.Queue)

    async def __aenter__(self) -> _InMemoryWorkerEnd:
        self.bus.workers.append(self.inbox)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.bus.workers.remove(self.inbox)

    async def send(self, message: FromWorker) -> None:
        self.bus.to_coordinator.put_nowait(_over_the_wire(message))

    async def receive(self, timeout_s: float) -> list[ToWorker]:
        return await _drain(self.inbox, timeout_s)


@dataclass
class _InMemoryCoordinatorEnd:
    bus: InMemoryBus

    async def __aenter__(self) -> _InMemoryCoordinatorEnd:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def send(self, message: ToWorker) -> None:
        message = _over_the_wire(message)
        for inbox in self.bus.workers:
            inbox.put_nowait(message)

    async def receive(self, timeout_s: float) -> list[FromWorker]:
        return await _drain(self.bus.to_coordinator, timeout_s)


@dataclass
class InMemoryBus:
    """The control plane of a coordinator and workers in one process (`coordinator.local`).

    Like the Kafka control topics, a worker hears only what is sent after it joined, and every
    message goes through the wire format (:func:`_over_the_wire`)."""

    to_coordinator: asyncio.Queue[FromWorker] = field(default_factory=asyncio.Queue)
    workers: list[asyncio.Queue[ToWorker]] = field(default_factory=list)

    def worker_end(self) -> WorkerLink:
        return _InMemoryWorkerEnd(self)

    def coordinator_end(self) -> CoordinatorLink:
        return _InMemoryCoordinatorEnd(self)

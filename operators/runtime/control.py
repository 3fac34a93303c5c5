"""The link that carries control messages (`operators.protocol.messages`) to and from a subtask.

`ControlLink` is what a subtask needs of the control plane; `InMemoryControl` connects subtasks
and a coordinator running in one process; a worker gives each of its subtasks an `InboxLink`
fed from the Kafka control topics.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from operators.protocol.messages import ToCoordinator, ToSubtask

__all__ = ["ControlLink", "InMemoryControl", "InboxLink"]


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

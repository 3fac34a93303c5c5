"""A coordinator without a broker, brought into a state through its public API only.

`Driving` builds a `Coordinator` whose control link is `Sent` (it keeps what the coordinator
sends to the workers), starts it (`Coordinator.start`: its epoch, then adoption or a new
attempt) and feeds it worker messages and ticks (`Coordinator.step`); tests read what it knows
from `Coordinator.facts` and what it sent from `Sent`. Nothing here reads or sets the
coordinator's attributes, so its insides can change shape without the tests.
"""

from __future__ import annotations

import uuid

from sluicegate.coordinator.facts import CoordinatorFacts
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.protocol.messages import (
    Assign,
    CheckpointAck,
    FromWorker,
    Heartbeat,
    Retired,
    SubtaskFailed,
    ToWorker,
)
from sluicegate.operators.protocol.wire import decode_message, encode_message
from sluicegate.operators.storage import Storage, open_storage
from sluicegate.testing import word_count
from tests.helpers import fake_state_handle

__all__ = ["AT_ONCE", "Driving", "Sent"]

AT_ONCE = CoordinatorSettings(settle_seconds=0, restart_delay_seconds=0, periodic_checkpoints=False)
"""Placement as soon as the workers have the slots (these tests join workers by hand), recovery
without delay, and checkpoints only when a test asks for one."""


class Sent:
    """Stands in for the coordinator's control link: keeps what it sends to the workers (in
    their wire form)."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []

    async def __aenter__(self) -> Sent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def send(self, message: ToWorker) -> None:
        self.messages.append(encode_message(message))

    async def receive(self, timeout_s: float) -> list[FromWorker]:
        return []

    def decoded(self) -> list[FromWorker | ToWorker]:
        return [decode_message(m) for m in self.messages]

    def assigns(self) -> list[Assign]:
        return [m for m in self.decoded() if isinstance(m, Assign)]


class Driving:
    """One coordinator and the fake link it sends on; see the module docstring."""

    def __init__(
        self,
        graph: JobGraph | None = None,
        *,
        storage: Storage | None = None,
        settings: CoordinatorSettings = AT_ONCE,
    ) -> None:
        self.graph = graph or word_count(uuid.uuid4().hex[:8])
        self.storage = storage or open_storage("memory://")
        self.settings = settings
        self.sent = Sent()
        self.coordinator = Coordinator(
            self.graph,
            bootstrap="127.0.0.1:1",  # never contacted: the link is `Sent`
            storage=self.storage,
            settings=settings,
            link=self.sent,
        )

    def facts(self, now: float | None = None) -> CoordinatorFacts:
        return self.coordinator.facts(now)

    async def start(self, now: float | None = None) -> None:
        await self.coordinator.start(now)

    async def step(self, *messages: FromWorker, now: float | None = None) -> None:
        await self.coordinator.step(messages, now)

    async def join(
        self, worker: str, *, slots: int = 4, attempt: int = 0, now: float | None = None
    ) -> None:
        """A heartbeat of ``worker`` (incarnation ``<worker>-1``), then a tick."""
        await self.step(Heartbeat(worker, f"{worker}-1", slots, attempt, ()), now=now)

    async def retire_all(self, now: float | None = None) -> None:
        """Every live worker answers the current attempt's `Retire` (phase one)."""
        facts = self.facts(now)
        await self.step(*(Retired(w.worker_id, facts.attempt) for w in facts.alive()), now=now)

    async def complete_a_checkpoint(self) -> int:
        """The checkpoint in flight, or one triggered now, acked by every subtask."""
        facts = self.facts()
        n = facts.checkpoints.in_flight or await self.coordinator.trigger_checkpoint()
        assert n is not None
        assert facts.assign is not None
        acks = [
            CheckpointAck(
                subtask, n, facts.attempt, {}, fake_state_handle(f"shared/{subtask}-{n}", n)
            )
            for subs in facts.assign.assignment.values()
            for subtask in subs
        ]
        await self.step(*acks)
        return n

    async def recover(self) -> Assign | None:
        """The running attempt fails (if one runs: the settings' restart delay must be 0), and
        every live worker retires for the next one: its assignment, if it could be placed."""
        facts = self.facts()
        if facts.assign is not None:
            subtask = next(s for subs in facts.assign.assignment.values() for s in subs)
            await self.step(SubtaskFailed(subtask, facts.attempt, "failed to recover"))
        await self.retire_all()
        return self.facts().assign

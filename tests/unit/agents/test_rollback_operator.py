"""`AgentOperator` rolling runs back without Kafka: compensations through the in-memory
journal (once across a crash), the wait for a person, the commands the operator refuses."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pydantic import BaseModel

from sluicegate import Agent
from sluicegate.agents.journal import InMemoryJournal
from sluicegate.agents.messages import ApprovalDecision, RollbackRun, TaskRequest
from sluicegate.agents.operator import AgentOperator
from sluicegate.agents.runs.state import RunStatus
from sluicegate.operators.contract import Record
from tests.unit.agents.seat_tools import seat_tools
from tests.unit.agents.test_agent_operator import (
    LABELS,
    TOPICS,
    FakeContext,
    FakeOpenContext,
    Turn,
    World,
    scripted,
)

TWO_HOLDS_AND_A_PAYMENT: list[Turn] = [
    [("hold", {"seat": "1a"})],
    [("hold", {"seat": "2b"})],
    [("pay", {"amount": 9.5})],
    "booked",
]


class Booking:
    """An agent holding seats (reversible: ``unhold``) and paying (irreversible)."""

    def __init__(self, turns: list[Turn], *, refuse: str = "", **agent: Any) -> None:
        self.calls: list[str] = []
        calls = self.calls

        self.agent = Agent("desk", scripted(turns), seat_tools(calls, refuse), "Book.", **agent)
        self.journal = InMemoryJournal()
        self.registry = CollectorRegistry()
        self.world = World()
        self.now = 1000.0
        self.op = self._operator()

    def _operator(self) -> AgentOperator:
        return AgentOperator(
            self.agent, TOPICS, pipeline="p", journal=self.journal, registry=self.registry,
            clock=lambda: self.now,
        )  # fmt: skip

    async def open(self) -> None:
        await self.op.open(FakeOpenContext(self.world))

    async def crash(self, states: dict[str, Any]) -> None:
        self.world = World(states=states)
        self.op = self._operator()
        await self.open()

    async def send(self, topic: str, message: BaseModel, key: bytes = b"r1") -> None:
        record = Record(topic, 0, 0, key, message.model_dump_json().encode(), 0)
        await self.op.process(record, FakeContext(self.world, topic))

    async def step(self) -> bool:
        due = [w for w in self.world.wakes if w.after_s == 0.0]
        if not due:
            return False
        self.world.wakes.remove(due[0])
        await self.op.on_wake(due[0].key, FakeContext(self.world, due[0].topic))
        return True

    async def drain(self) -> None:
        for _ in range(100):
            if not await self.step():
                return
        raise AssertionError("still busy after 100 wake-ups")

    async def approve(self, approved: bool = True) -> None:
        decision = ApprovalDecision(run_id="r1", approved=approved, by="ann")
        await self.send(TOPICS.approvals, decision)

    async def rollback(self, to_step: int) -> None:
        await self.send(TOPICS.approvals, RollbackRun(run_id="r1", to_step=to_step, by="ann"))

    def types(self) -> list[str]:
        return [e["type"] for e in self.world.events()]

    def gauge(self, name: str) -> float | None:
        return self.registry.get_sample_value(name, LABELS)


async def booked(**agent: Any) -> Booking:
    """A run that held two seats and paid (approved), finished ``done``."""
    desk = Booking(TWO_HOLDS_AND_A_PAYMENT, **agent)
    await desk.open()
    await desk.send(TOPICS.tasks, TaskRequest(run_id="r1", goal="book"))
    await desk.drain()
    await desk.approve()
    await desk.drain()
    assert desk.world.run().status is RunStatus.DONE
    return desk


async def test_a_finished_run_is_rolled_back_latest_first_and_waits_on_the_payment() -> None:
    desk = await booked(approval_timeout_s=5.0)
    await desk.rollback(0)
    await desk.drain()
    run = desk.world.run()
    # The payment (step 3) comes first: it blocks until a person says it was handled.
    assert run.status is RunStatus.WAITING_APPROVAL
    assert run.pending_approval is not None
    assert (run.pending_approval.kind, run.pending_approval.tool) == ("compensation", "pay")
    assert desk.types()[-2:] == ["rollback_started", "compensation_needed"]
    assert desk.gauge("sluicegate_agent_compensations_waiting") == 1.0
    assert desk.gauge("sluicegate_agent_compensation_alerts_total") == 1.0
    desk.now += 3600  # long past the approval timeout: still nobody but a person decides
    for wake in list(desk.world.wakes):
        desk.world.wakes.remove(wake)
        await desk.op.on_wake(wake.key, FakeContext(desk.world, wake.topic))
    assert desk.world.run().status is RunStatus.WAITING_APPROVAL

    await desk.approve()
    await desk.drain()
    run = desk.world.run()
    assert run.status is RunStatus.ROLLED_BACK
    assert desk.calls[-2:] == [
        "unhold h-2b as r1/2/0/compensate/1",
        "unhold h-1a as r1/1/0/compensate/1",
    ]
    assert [e.undone for e in run.effects] == ["compensated", "compensated", "by_hand"]
    results = desk.world.results()
    assert [r.status for r in results] == ["done", "rolled_back"]
    assert results[-1].effects[0]["undone"] == "compensated"
    compensations = [e for e in desk.world.events() if e["type"] == "compensation"]
    assert [(e["tool"], e["result"]) for e in compensations] == [
        ("unhold", "released h-2b"), ("unhold", "released h-1a"),
    ]  # fmt: skip
    assert desk.gauge("sluicegate_agent_compensations_waiting") == 0.0
    assert (
        desk.registry.get_sample_value(
            "sluicegate_agent_compensations_total", {**LABELS, "outcome": "compensated"}
        )
        == 2.0
    )


async def test_a_compensation_replayed_after_a_crash_is_not_called_again() -> None:
    desk = Booking([*TWO_HOLDS_AND_A_PAYMENT[:2], "held"])
    await desk.open()
    await desk.send(TOPICS.tasks, TaskRequest(run_id="r1", goal="book"))
    await desk.drain()
    await desk.rollback(0)
    before = copy.deepcopy(desk.world.states)  # the checkpoint: rolling back, nothing undone
    assert await desk.step()  # unhold h-2b runs, its done is journaled
    assert desk.calls[-1] == "unhold h-2b as r1/2/0/compensate/1"
    await desk.crash(before)
    await desk.drain()
    assert desk.world.run().status is RunStatus.ROLLED_BACK
    assert Counter(c for c in desk.calls if c.startswith("unhold")) == {
        "unhold h-2b as r1/2/0/compensate/1": 1,
        "unhold h-1a as r1/1/0/compensate/1": 1,
    }


async def test_a_running_run_is_rolled_back_between_two_actions() -> None:
    desk = Booking(TWO_HOLDS_AND_A_PAYMENT)
    await desk.open()
    await desk.send(TOPICS.tasks, TaskRequest(run_id="r1", goal="book"))
    while desk.calls != ["hold 1a"]:
        assert await desk.step()
    wakes = len(desk.world.wakes)
    await desk.rollback(0)
    assert len(desk.world.wakes) == wakes, "the run's own wake-up drives the rollback"
    await desk.drain()
    assert desk.world.run().status is RunStatus.ROLLED_BACK
    assert desk.calls == ["hold 1a", "unhold h-1a as r1/1/0/compensate/1"]


async def test_a_compensation_failing_for_good_alerts_and_waits_for_a_person() -> None:
    desk = Booking([*TWO_HOLDS_AND_A_PAYMENT[:2], "held"], refuse="h-2b")
    await desk.open()
    await desk.send(TOPICS.tasks, TaskRequest(run_id="r1", goal="book"))
    await desk.drain()
    await desk.rollback(0)
    await desk.drain()
    assert desk.world.run().status is RunStatus.WAITING_APPROVAL
    failed, needed = desk.world.events()[-2:]
    assert (failed["type"], failed["error"]) == ("compensation", "ValueError: h-2b was sold on")
    assert needed["type"] == "compensation_needed"
    assert "the compensation unhold (r1/2/0/compensate/1) failed" in needed["problem"]
    assert desk.gauge("sluicegate_agent_compensations_waiting") == 1.0
    await desk.approve()  # released by hand: the rollback goes on with the first hold
    await desk.drain()
    run = desk.world.run()
    assert run.status is RunStatus.ROLLED_BACK
    assert [e.undone for e in run.effects] == ["compensated", "by_hand"]
    assert desk.calls.count("unhold h-2b as r1/2/0/compensate/1") == 1


async def test_rejecting_a_compensation_wait_stops_the_rollback_as_failed() -> None:
    desk = await booked()
    await desk.rollback(2)
    await desk.drain()
    await desk.approve(approved=False)
    await desk.drain()
    run = desk.world.run()
    assert (run.status, run.reason) == (RunStatus.FAILED, "rollback_stopped")
    assert not any(c.startswith("unhold") for c in desk.calls)
    assert [r.status for r in desk.world.results()] == ["done", "failed"]


async def test_a_rollback_cancels_the_pending_forget_of_a_finished_run() -> None:
    desk = await booked()
    desk.op.on_snapshot(7)
    await desk.rollback(2)
    await desk.op.on_completed(7 + 5)
    assert desk.journal.get("r1/3/0")[1] is not None, "the run's journal was forgotten"


@pytest.mark.parametrize(
    ("command", "key", "problem"),
    [
        (RollbackRun(run_id="r1", to_step=0), b"r2", "under record key"),
        (RollbackRun(run_id="r2", to_step=0), b"r2", "unknown run 'r2'"),
        (RollbackRun(run_id="r1", to_step=4), b"r1", "is at step 4"),
    ],
)
async def test_commands_that_cannot_apply_raise_so_they_are_dead_lettered(
    command: RollbackRun, key: bytes, problem: str
) -> None:
    desk = await booked()
    events = len(desk.world.events())
    with pytest.raises(ValueError, match=problem):
        await desk.send(TOPICS.approvals, command, key=key)
    assert len(desk.world.events()) == events
    assert desk.world.run().status is RunStatus.DONE

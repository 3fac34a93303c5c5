"""`agents.history.replay` over every kind of event: runs driven by the real `AgentOperator` that
roll back (compensating, blocking on a person who approves or rejects), lose a payload stored by
reference, and fork (and roll the fork back): the state replayed from the emitted events is
the stored `RunState`, field for field, at every safe point."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from pydantic import BaseModel

from sluicegate import Agent
from sluicegate.agents.blobs import BlobPolicy, handle_of, handle_of_text
from sluicegate.agents.exceptions import ForkRefusedError, HistoryError
from sluicegate.agents.fork.patch import ForkSeedError
from sluicegate.agents.fork.request import fork_request
from sluicegate.agents.history.replay import replay, settled_at
from sluicegate.agents.journal import InMemoryJournal
from sluicegate.agents.messages import ApprovalDecision, RollbackRun, TaskRequest
from sluicegate.agents.operator import AgentOperator
from sluicegate.agents.rollback import machine as rollback
from sluicegate.agents.runs.state import RunState, RunStatus, run_key
from sluicegate.agents.tools import ToolContext, tool
from sluicegate.operators.contract import Record
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.blobs import BlobStore, subject_digest
from tests.unit.agents.seat_tools import seat_tools
from tests.unit.agents.test_agent_operator import (
    TOPICS,
    FakeContext,
    FakeOpenContext,
    Turn,
    World,
    scripted,
)

BIG = "p" * 3000
FORK = "r1.fork"


class Shop:
    """An agent that holds seats (reversible, ``unhold`` undoes; it refuses ``refuse``), pays
    (irreversible: approval, and a rollback blocks on it) and fetches pages (large results,
    stored by reference in memory)."""

    def __init__(self, turns: list[Turn], refuse: str = "") -> None:
        self.calls: list[str] = []
        calls = self.calls

        @tool()
        async def fetch(ctx: ToolContext, page: int) -> str:
            """A large page."""
            return f"{page}:{BIG}"

        self.storage = open_storage("memory://")
        blobs = BlobPolicy(threshold_bytes=1024, storage=self.storage)
        tools = [*seat_tools(calls, refuse), fetch]
        self.agent = Agent("desk", scripted(turns), tools, "Shop.", blobs=blobs)
        self.world = World()
        self.op = AgentOperator(
            self.agent, TOPICS, pipeline="p", journal=InMemoryJournal(), clock=lambda: 1000.0
        )

    async def send(self, topic: str, message: BaseModel, run_id: str) -> None:
        record = Record(topic, 0, 0, run_id.encode(), message.model_dump_json().encode(), 0)
        await self.op.process(record, FakeContext(self.world, topic))

    async def step(self) -> bool:
        due = [w for w in self.world.wakes if w.after_s == 0.0]
        if not due:
            return False
        self.world.wakes.remove(due[0])
        await self.op.on_wake(due[0].key, FakeContext(self.world, due[0].topic))
        return True

    def run(self, run_id: str) -> RunState:
        raw = self.world.state(TOPICS.tasks).get(run_key(run_id))
        assert raw is not None
        return RunState.decode(raw)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return [e for e in self.world.events() if e["run_id"] == run_id]

    async def erase(self) -> None:
        await BlobStore(self.storage).erase(subject_digest("alice"))

    def check_replay(self, run_id: str) -> RunState:
        """The replay of ``run_id``'s events is its stored state, field for field."""
        stored = self.run(run_id)
        replayed = replay(self.events(run_id))[-1].state
        assert replayed.model_dump(mode="json") == stored.model_dump(mode="json")
        assert replayed == stored
        return stored


@dataclass
class Plan:
    """What happens to a run while it is driven: a rollback after ``rollback_after`` wake-ups
    (to the step ``to_step`` fraction of the way), payloads erased after ``erase_after``,
    each person's decision in turn (default: approve)."""

    rollback_after: int | None = None
    to_step: float = 0.0
    erase_after: int | None = None
    decisions: list[bool] = field(default_factory=list)


async def drive(shop: Shop, run_id: str, plan: Plan) -> RunState:
    wakes, rolled, erased = 0, False, False
    for _ in range(400):
        shop.check_replay(run_id)
        if plan.erase_after is not None and not erased and wakes >= plan.erase_after:
            await shop.erase()
            erased = True
        if plan.rollback_after is not None and not rolled and wakes >= plan.rollback_after:
            rolled = True
            await roll_back(shop, run_id, plan.to_step)
            continue
        if await shop.step():
            wakes += 1
            continue
        state = shop.run(run_id)
        if state.status is RunStatus.WAITING_APPROVAL:
            approved = plan.decisions.pop(0) if plan.decisions else True
            decision = ApprovalDecision(run_id=run_id, approved=approved, by="ann")
            await shop.send(TOPICS.approvals, decision, run_id)
            continue
        if plan.rollback_after is not None and not rolled:
            wakes = plan.rollback_after  # the run ended first: roll the finished run back
            continue
        return state
    raise AssertionError("the run did not come to rest")


async def roll_back(shop: Shop, run_id: str, fraction: float) -> None:
    state = shop.run(run_id)
    to_step = int(fraction * max(0, state.step - 1))
    if rollback.refusal(state, to_step) is None:
        command = RollbackRun(run_id=run_id, to_step=to_step, by="ann")
        await shop.send(TOPICS.approvals, command, run_id)


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("hold", {"seat": "1a"}),
    ("hold", {"seat": "2b"}),
    ("pay", {"amount": 9.5}),
    ("fetch", {"page": 1}),
    ("fetch", {"page": 2}),
]

turns = st.lists(
    st.lists(st.sampled_from(CALLS), min_size=1, max_size=2), min_size=1, max_size=4
).map(lambda calls: [*calls, "done"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=turns,
    refuse=st.sampled_from(["", "h-1a", "h-2b"]),
    rollback_after=st.one_of(st.none(), st.integers(min_value=1, max_value=10)),
    to_step=st.floats(min_value=0.0, max_value=1.0),
    erase_after=st.one_of(st.none(), st.integers(min_value=2, max_value=6)),
    decisions=st.lists(st.booleans(), max_size=4),
    fork=st.data(),
)
def test_every_run_replays_to_its_stored_state(
    script: list[Turn],
    refuse: str,
    rollback_after: int | None,
    to_step: float,
    erase_after: int | None,
    decisions: list[bool],
    fork: st.DataObject,
) -> None:
    asyncio.run(
        scenario(script, refuse, Plan(rollback_after, to_step, erase_after, decisions), fork)
    )


async def scenario(script: list[Turn], refuse: str, plan: Plan, data: st.DataObject) -> None:
    shop = Shop(script, refuse=refuse)
    await shop.op.open(FakeOpenContext(shop.world))
    task = TaskRequest(run_id="r1", goal="shop", metadata={"subject": "alice"})
    await shop.send(TOPICS.tasks, task, "r1")
    parent = await drive(shop, "r1", plan)
    shop.check_replay("r1")

    # A fork after a step the parent settled at (before any rollback's step).
    history = replay(shop.events("r1"))
    undone = parent.rollback.to_step if parent.rollback is not None else parent.step
    steps = [s for s in range(undone + 1) if settled_at(history, s) is not None]
    if not steps:
        return
    from_step = data.draw(st.sampled_from(steps), label="fork from step")
    recorded_only = data.draw(st.booleans(), label="recorded only")
    command = fork_request(
        shop.events("r1"), from_step, run_id=FORK, recorded_only=recorded_only, by="bo"
    )
    seed = settled_at(history, from_step)
    assert seed is not None
    assert set(command.blobs) == set(seed.blobs)  # no patch: every handle of the seed stays
    await shop.send(TOPICS.approvals, command, FORK)
    fork_plan = Plan(
        rollback_after=data.draw(st.one_of(st.none(), st.integers(0, 8)), label="fork rollback"),
        to_step=data.draw(st.floats(0.0, 1.0), label="fork to step"),
    )
    before, made = shop.run("r1"), len(shop.calls)
    forked = await drive(shop, FORK, fork_plan)
    shop.check_replay(FORK)
    assert shop.run("r1") == before, "driving the fork changed its parent"
    # A rollback of the fork undoes the fork's own effects only.
    assert all(e.key.startswith(f"{FORK}/") for e in forked.effects)
    compensated = [c for c in shop.calls[made:] if c.startswith("unhold")]
    assert all(f" as {FORK}/" in c for c in compensated), compensated


async def rolled_back_run() -> tuple[list[dict[str, Any]], RunState]:
    """Run r1 that held two seats and paid, rolled back to step 0: its events and state."""
    shop = Shop([[CALLS[0]], [CALLS[1]], [CALLS[2]], "done"])
    await shop.op.open(FakeOpenContext(shop.world))
    await shop.send(TOPICS.tasks, TaskRequest(run_id="r1", goal="shop"), "r1")
    state = await drive(shop, "r1", Plan(rollback_after=99, to_step=0.0))
    return shop.events("r1"), state


async def test_a_rolled_back_run_and_its_fork_replay_event_by_event() -> None:
    """Two holds and a payment, rolled back to step 0: the payment blocks, a person handles
    it, both holds are compensated; then a fork from step 0 (the history before the
    rollback), rolled back in turn, never undoes the parent's holds."""
    shop = Shop([[CALLS[0]], [CALLS[1]], [CALLS[2]], "done"])
    await shop.op.open(FakeOpenContext(shop.world))
    await shop.send(TOPICS.tasks, TaskRequest(run_id="r1", goal="shop"), "r1")
    parent = await drive(shop, "r1", Plan(rollback_after=99, to_step=0.0))
    assert parent.status is RunStatus.ROLLED_BACK
    types = [e["type"] for e in shop.events("r1")]
    assert types[-6:] == ["rollback_started", "compensation_needed", "approval",
                          "compensation", "compensation", "status"]  # fmt: skip
    history = replay(shop.events("r1"))
    assert [r.state for r in history][-1] == parent
    with pytest.raises(ForkRefusedError, match="rolled back to step 0"):
        fork_request(shop.events("r1"), 1, run_id=FORK)
    await shop.send(TOPICS.approvals, fork_request(shop.events("r1"), 0, run_id=FORK), FORK)
    forked = await drive(shop, FORK, Plan(rollback_after=99, to_step=0.0))
    assert forked.status is RunStatus.ROLLED_BACK
    assert shop.check_replay(FORK) == forked
    compensations = [c for c in shop.calls if c.startswith("unhold")]
    assert compensations == [
        "unhold h-2b as r1/2/0/compensate/1",
        "unhold h-1a as r1/1/0/compensate/1",
        f"unhold h-2b as {FORK}/2/0/compensate/1",
        f"unhold h-1a as {FORK}/1/0/compensate/1",
    ]


async def test_a_rejected_compensation_and_a_lost_blob_replay() -> None:
    shop = Shop([[CALLS[3]], [CALLS[0]], [CALLS[2]], "done"])
    await shop.op.open(FakeOpenContext(shop.world))
    task = TaskRequest(run_id="r1", goal="shop", metadata={"subject": "alice"})
    await shop.send(TOPICS.tasks, task, "r1")
    # Erased after the page was fetched: the next model call loses it.
    stored = await drive(
        shop, "r1", Plan(erase_after=3, rollback_after=99, decisions=[True, False])
    )
    assert (stored.status, stored.reason) == (RunStatus.FAILED, rollback.ROLLBACK_STOPPED)
    events = shop.events("r1")
    (lost,) = [e for e in events if e["type"] == "blob_unavailable"]
    (fetched,) = [e for e in events if e["type"] == "tool" and e["tool"] == "fetch"]
    handle = handle_of(fetched["result"])
    assert handle is not None
    assert fetched["blob"] == lost["blob"] == handle.id
    assert handle_of_text(lost["content"]) == handle
    assert stored.blobs == ()
    assert replay(events)[-1].state == stored


async def test_a_rollback_between_an_intent_and_its_call_settles_the_effect() -> None:
    """Rolled back while a hold is issued but not called: the journal is asked (nothing:
    skipped, the call never started); had the call run, its result settles the effect."""
    shop = Shop([[CALLS[0]], "done"])
    await shop.op.open(FakeOpenContext(shop.world))
    await shop.send(TOPICS.tasks, TaskRequest(run_id="r1", goal="shop"), "r1")
    while [e["type"] for e in shop.events("r1")][-1] != "effect_issued":
        assert await shop.step()
    issued = shop.events("r1")
    stored = await drive(shop, "r1", Plan(rollback_after=0, to_step=0.0))
    assert stored.status is RunStatus.ROLLED_BACK
    settled, skipped = [e for e in shop.events("r1") if e["type"] in ("effect_settled",
                                                                       "compensation")]  # fmt: skip
    assert (settled["outcome"], settled["result"]) == ("issued", None)
    assert skipped["skipped"] == "the call never started: nothing to undo"
    assert not [c for c in shop.calls if c.startswith(("hold", "unhold"))]
    # Had the hold run before the crash, the journal's done would settle it with its result.
    start = rollback.start_rollback(replay(issued)[-1].state, 0, "ann", None, 2000.0)
    action = rollback.next_action(start.state, {})
    assert isinstance(action, rollback.Settle)
    done = rollback.settled(start.state, action, "done", {"hold_id": "h-1a"}, 2001.0)
    recorded = [*issued, *(json.loads(json.dumps(s.event)) for s in (start, done))]
    assert replay(recorded)[-1].state == done.state
    assert done.state.effects[0].result == {"hold_id": "h-1a"}


async def test_a_webhook_alert_replays() -> None:
    """A rollback blocked with an alert webhook configured: ``compensation_needed`` says so,
    ``alert_sent`` follows (the transitions as the compensator applies them)."""
    shop = Shop([[CALLS[2]], "done"])
    await shop.op.open(FakeOpenContext(shop.world))
    await shop.send(TOPICS.tasks, TaskRequest(run_id="r1", goal="shop"), "r1")
    done = await drive(shop, "r1", Plan())
    events = shop.events("r1")
    step = rollback.start_rollback(done, 0, "ann", None, 2000.0)
    block = rollback.next_action(step.state, {})
    assert isinstance(block, rollback.Block)
    steps = [step, rollback.block(step.state, block, 2001.0, webhook=True)]
    notify = rollback.next_action(steps[-1].state, {})
    assert isinstance(notify, rollback.Notify)
    steps.append(rollback.after_notify(steps[-1].state, notify, None, 2002.0))
    decided = rollback.decide_compensation(steps[-1].state, True, "ann", None, 2003.0)
    assert decided is not None
    steps.append(decided)
    steps.append(rollback.finish(decided.state, 2004.0))
    recorded = [*events, *(json.loads(json.dumps(s.event)) for s in steps)]
    history = replay(recorded)
    assert [r.state for r in history[-len(steps) :]] == [s.state for s in steps]
    assert steps[1].event["webhook"] is True
    assert history[-1].state.status is RunStatus.ROLLED_BACK


async def _rolled_back_events() -> list[dict[str, Any]]:
    shop = Shop([[CALLS[3]], [CALLS[0]], [CALLS[1]], "done"])
    await shop.op.open(FakeOpenContext(shop.world))
    await shop.send(TOPICS.tasks, TaskRequest(run_id="r1", goal="shop"), "r1")
    await drive(shop, "r1", Plan(rollback_after=99, to_step=0.0))
    return shop.events("r1")


def _first(events: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(e for e in events if e["type"] == kind)


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (lambda es: _first(es, "tool").update(blob="0" * 32), "is not the handle"),
        (lambda es: _first(es, "compensation").update(effect="r1/2/0"), "undoes 'r1/3/0' next"),
        (lambda es: _first(es, "compensation").update(key="r1/3/0/compensate/7"), "key"),
        (lambda es: _first(es, "rollback_started").update(to_step=9), "roll back to a step"),
        (lambda es: _first(es, "status").pop("status"), "status event to None"),
    ],
)
async def test_a_tampered_rollback_or_blob_event_is_refused(tamper: Any, reason: str) -> None:
    events = await _rolled_back_events()
    tamper(events)
    with pytest.raises(HistoryError, match=reason):
        replay(events)


async def test_a_fork_refuses_blob_ids_its_seed_does_not_hold() -> None:
    shop = Shop([[CALLS[3]], [CALLS[0]], "done"])
    await shop.op.open(FakeOpenContext(shop.world))
    await shop.send(TOPICS.tasks, TaskRequest(run_id="r1", goal="shop"), "r1")
    await drive(shop, "r1", Plan())
    command = fork_request(shop.events("r1"), 1, run_id=FORK)
    assert len(command.blobs) == 1
    forged = command.model_copy(update={"blobs": ("f" * 32,)})
    with pytest.raises(ForkSeedError, match="not handles in the seed's messages"):
        await shop.send(TOPICS.approvals, forged, FORK)
    await shop.send(TOPICS.approvals, command, FORK)
    forked = await drive(shop, FORK, Plan())
    assert forked.status is RunStatus.DONE
    # The fork resolved the parent's page: nothing was lost.
    assert not [e for e in shop.events(FORK) if e["type"] == "blob_unavailable"]
    assert shop.check_replay(FORK).blobs == command.blobs

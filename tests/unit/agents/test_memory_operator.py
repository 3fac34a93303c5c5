"""An agent with memory, without Kafka: what runs write, what later runs of the key see,
interleaved runs of one key, a restore to an earlier snapshot, erasure, the summary entry."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import JsonValue

from sluicegate import Agent
from sluicegate.agents.fork.request import fork_request
from sluicegate.agents.history.replay import replay
from sluicegate.agents.memory.config import Memory
from sluicegate.agents.memory.rows import MemoryRows
from sluicegate.agents.messages import (
    ApprovalDecision,
    EraseMemory,
    ForkRun,
    RollbackRun,
    TaskRequest,
)
from sluicegate.agents.models import ScriptedModel
from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.agents.runs.state import RunState, run_key
from sluicegate.agents.tools import ToolContext, ToolDeclarationError, ToolKind, tool
from sluicegate.operators.contract import Record
from tests.unit.agents.test_agent_operator import LABELS, TOPICS, Desk, FakeContext

MEMORY_HEADER = "Memory of "


def seen_memory(messages: Sequence[ChatMessage]) -> str:
    """The memory message a model call was given, or ``none``."""
    for m in messages:
        if m.role == "system" and (m.content or "").startswith(MEMORY_HEADER):
            return m.content or ""
    return "none"


def remembering(messages: Sequence[ChatMessage]) -> ChatMessage:
    """Goal ``remember: <text>``: remember the text, then answer; any other goal: answer
    with the memory it was shown."""
    goal = next(m.content or "" for m in messages if m.role == "user")
    answered = sum(1 for m in messages if m.role == "assistant")
    if goal.startswith("remember: ") and answered == 0:
        arguments = json.dumps({"text": goal.removeprefix("remember: ")})
        call = ToolCall(id="c0", name="remember", arguments=arguments)
        return ChatMessage(role="assistant", tool_calls=(call,))
    return ChatMessage(role="assistant", content=seen_memory(messages))


class MemoryDesk(Desk):
    def __init__(self, memory: Memory | None = None, clock: Any = lambda: 1000.0) -> None:
        super().__init__(["unused"], clock, memory=memory or Memory(key="customer_id"))
        self.model = ScriptedModel(remembering)
        self.agent = Agent("desk", self.model, [], "Settle.", memory=self.agent.memory)
        self.op = self._operator()

    async def start(self, run_id: str, goal: str, customer: str | None = "c-1") -> None:
        metadata: dict[str, JsonValue] = {} if customer is None else {"customer_id": customer}
        await self.send(TOPICS.tasks, TaskRequest(run_id=run_id, goal=goal, metadata=metadata))

    def answers(self) -> dict[str, str | None]:
        return {r.run_id: r.answer for r in self.world.results()}

    def run_state(self, run_id: str) -> RunState:
        raw = self.world.state(TOPICS.tasks).get(run_key(run_id))
        assert raw is not None
        return RunState.decode(raw)

    def memory(self, key: str) -> list[str]:
        return [e.text for e in MemoryRows(self.world.state(TOPICS.tasks)).entries(key)]


async def opened() -> MemoryDesk:
    desk = MemoryDesk()
    await desk.open()
    return desk


async def test_a_later_run_of_the_key_sees_what_an_earlier_one_remembered() -> None:
    desk = await opened()
    await desk.start("r1", "remember: refunded order o-1")
    await desk.drain()
    assert desk.memory("c-1") == ["refunded order o-1"]
    await desk.start("r2", "anything known?")
    await desk.start("r3", "anything known?", customer="c-2")
    await desk.start("r4", "anything known?", customer=None)
    await desk.drain()
    answers = desk.answers()
    # The writing run's next model call sees its entry too.
    for run in ("r1", "r2"):
        assert 'c-1#0, note, run r1] "refunded order o-1"' in (answers[run] or "")
    assert (answers["r3"], answers["r4"]) == ("none", "none")
    events = {(e["run_id"], e["type"]): e for e in desk.world.events()}
    assert events["r1", "tool"]["memory_written"] == ["c-1#0"]
    assert desk.registry is not None
    counted = {
        action: desk.registry.get_sample_value(
            "sluicegate_agent_memory_entries_total", {**LABELS, "action": action}
        )
        for action in ("written", "read", "erased")
    }
    assert counted == {"written": 1.0, "read": 2.0, "erased": 0.0}  # r1's second call and r2
    assert events["r2", "model"]["memory_read"] == ["c-1#0"]
    assert "memory_read" not in events["r3", "model"]
    # The memory message is given to the model, never kept in the run's conversation.
    assert [m.role for m in desk.run_state("r2").messages] == ["system", "user", "assistant"]


async def test_interleaved_runs_of_one_key_lose_no_update() -> None:
    desk = await opened()
    for i in range(5):
        await desk.start(f"r{i}", f"remember: fact {i}")
    # One wake-up of each run in turn, as a subtask interleaves their steps.
    while desk.world.wakes:
        for wake in sorted(desk.world.wakes, key=lambda w: w.key, reverse=True):
            await desk.fire(wake)
    assert sorted(desk.memory("c-1")) == [f"fact {i}" for i in range(5)]
    rows = MemoryRows(desk.world.state(TOPICS.tasks)).entries("c-1")
    assert [e.seq for e in rows] == [0, 1, 2, 3, 4]
    assert sorted(e.run_id for e in rows) == [f"r{i}" for i in range(5)]


async def test_a_restore_to_an_earlier_snapshot_writes_the_entry_once() -> None:
    desk = await opened()
    await desk.start("r1", "remember: refunded order o-1")
    for _ in range(3):  # the model's reply, the call's intent, the call and its result
        await desk.step()
        if desk.memory("c-1"):
            break
        snapshot = copy.deepcopy(desk.world.states)
    assert desk.memory("c-1") == ["refunded order o-1"]
    await desk.crash(snapshot)  # the state of before the write; the journal is not rolled back
    assert desk.memory("c-1") == []
    await desk.drain()
    assert desk.memory("c-1") == ["refunded order o-1"]
    (tool,) = [e for e in desk.world.events() if e["type"] == "tool"]
    assert tool["replayed"] is True
    assert tool["memory_written"] == ["c-1#0"]


async def test_erase_removes_every_entry_of_the_key_and_later_runs_see_none() -> None:
    desk = await opened()
    await desk.start("r1", "remember: card ends 4242")
    await desk.start("r2", "remember: other customer", customer="c-2")
    await desk.drain()
    await desk.send(TOPICS.approvals, EraseMemory(key="c-1", by="dpo"))
    assert desk.memory("c-1") == []
    assert desk.memory("c-2") == ["other customer"]
    assert not any(b"4242" in v for k, v in desk.world.state(TOPICS.tasks).rows.items()
                   if k.startswith(b"memory"))  # fmt: skip
    await desk.start("r3", "anything known?")
    await desk.drain()
    assert desk.answers()["r3"] == "none"


async def test_a_decision_for_a_run_another_partition_holds_is_ignored() -> None:
    desk = await opened()  # the router sends it to every partition: only the holder applies it
    before = list(desk.world.emitted)
    record = Record(
        TOPICS.approvals, 0, 0, b"elsewhere",
        ApprovalDecision(run_id="elsewhere", approved=True).model_dump_json().encode(), 0,
    )  # fmt: skip
    await desk.op.process(record, FakeContext(desk.world, TOPICS.approvals))
    assert desk.world.emitted == before


async def test_with_summary_a_run_that_finishes_done_leaves_its_answer_and_ttl_applies() -> None:
    now = [1000.0]
    desk = MemoryDesk(Memory(key="customer_id", summary=True, ttl_s=60.0), lambda: now[0])
    await desk.open()
    await desk.start("r1", "anything known?")
    await desk.drain()
    [entry] = MemoryRows(desk.world.state(TOPICS.tasks)).entries("c-1")
    assert (entry.kind, entry.text, entry.expires_at) == ("summary", "none", 1060.0)
    await desk.start("r2", "anything known?")
    await desk.drain()
    assert "c-1#0, summary" in (desk.answers()["r2"] or "")
    now[0] = 2000.0  # both entries expired: not read, and deleted when the key is read
    await desk.start("r3", "anything known?")
    await desk.drain()
    assert desk.answers()["r3"] == "none"
    assert [e.text for e in MemoryRows(desk.world.state(TOPICS.tasks)).entries("c-1")] == ["none"]


def test_an_agent_with_memory_may_not_declare_its_own_remember_tool() -> None:
    @tool(kind=ToolKind.READ_ONLY)
    async def remember(ctx: ToolContext, text: str) -> str:
        return text

    with pytest.raises(ToolDeclarationError, match="built in"):
        Agent("a", ScriptedModel(remembering), [remember], "x", memory=Memory(key="k"))
    Agent("a", ScriptedModel(remembering), [remember], "x")  # without memory it is a tool


async def test_a_rollback_removes_the_entries_the_run_wrote_after_the_step() -> None:
    desk = MemoryDesk(Memory(key="customer_id", summary=True))
    await desk.open()
    await desk.start("r1", "remember: refunded order o-1")
    await desk.start("r2", "remember: kept by another run")
    await desk.drain()
    assert sorted(desk.memory("c-1")) == sorted(
        ["refunded order o-1", "kept by another run"]
        + [desk.answers()[r] or "" for r in ("r1", "r2")]
    )
    rows = MemoryRows(desk.world.state(TOPICS.tasks))
    of_r1 = sorted(e.entry_id for e in rows.entries("c-1") if e.run_id == "r1")
    assert len(of_r1) == 2  # its note and its summary
    await desk.send(TOPICS.approvals, RollbackRun(run_id="r1", to_step=0, by="ann"))
    await desk.drain()
    assert desk.run_state("r1").status.value == "rolled_back"
    # r1's note (compensated by forget) and its summary (at the rollback's start) are gone.
    assert sorted(desk.memory("c-1")) == sorted(["kept by another run", desk.answers()["r2"] or ""])
    events = [e for e in desk.world.events() if e["run_id"] == "r1"]
    removed = [i for e in events for i in e.get("memory_removed", [])]
    assert sorted(removed) == of_r1
    (forget,) = [e for e in events if e["type"] == "compensation" and e.get("tool") == "forget"]
    assert forget["arguments"] == {"source": "r1/1/0"}


async def test_the_events_of_runs_with_memory_replay_to_their_stored_state() -> None:
    desk = MemoryDesk(Memory(key="customer_id", summary=True))
    await desk.open()
    await desk.start("r1", "remember: refunded order o-1")
    await desk.drain()
    await desk.send(TOPICS.approvals, RollbackRun(run_id="r1", to_step=0, by="ann"))
    await desk.drain()
    events = [e for e in desk.world.events() if e["run_id"] == "r1"]
    assert {"memory_read", "memory_written", "memory_removed"} <= {k for e in events for k in e}
    rebuilt = replay(events)[-1].state
    assert rebuilt.model_dump(exclude={"updated_at"}) == desk.run_state("r1").model_dump(
        exclude={"updated_at"}
    )


async def test_a_fork_reads_the_memory_as_of_its_parent_s_step_and_its_own_entries() -> None:
    now = [1000.0]
    desk = MemoryDesk(Memory(key="customer_id"), lambda: now[0])
    await desk.open()
    await desk.start("p", "remember: before the fork point")
    await desk.drain()
    now[0] = 2000.0
    await desk.start("q", "remember: after the fork point")
    await desk.drain()
    messages = (
        ChatMessage(role="system", content="Settle."),
        ChatMessage(role="user", content="anything known?"),
    )
    for run_id, as_of in (("p.as-of", 1500.0), ("p.now", None)):
        fork = ForkRun(
            run_id=run_id, parent_run_id="p", from_step=0, goal="anything known?",
            messages=messages, metadata={"customer_id": "c-1"}, memory_as_of=as_of,
        )  # fmt: skip
        await desk.send(TOPICS.approvals, fork)
    await desk.drain()
    answers = desk.answers()
    assert seen_texts(answers["p.as-of"]) == ["before the fork point"]
    assert seen_texts(answers["p.now"]) == ["before the fork point", "after the fork point"]
    # Left out when None, so that agents without the field still read forks.
    plain = ForkRun(run_id="f", parent_run_id="p", from_step=0, goal="g", messages=messages)
    assert "memory_as_of" not in plain.model_dump_json()
    # A fork request names the moment the parent settled after the step.
    parent = [e for e in desk.world.events() if e["run_id"] == "p"]
    asked = fork_request(parent, 0, run_id="p.f", by="ann")
    assert asked.memory_as_of == 1000.0


def seen_texts(answer: str | None) -> list[str]:
    return [json.loads(line.split("] ", 1)[1]) for line in (answer or "").splitlines()[1:]]


async def test_a_key_function_that_fails_in_the_agent_leaves_the_run_without_memory() -> None:
    calls = []

    def flaky(task: TaskRequest) -> str:
        calls.append(task.run_id)
        if len(calls) > 1:  # the router's call works, the agent's do not
            raise KeyError("budget")
        return "c-1"

    desk = MemoryDesk(Memory(key=flaky))
    await desk.open()
    assert desk.agent.memory is not None
    assert desk.agent.memory.key_of(TaskRequest(run_id="r1", goal="g")) == "c-1"
    await desk.start("r1", "remember: lost")
    await desk.drain()
    assert desk.answers()["r1"] == "none"
    assert desk.memory("c-1") == []

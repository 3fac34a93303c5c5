"""`AgentOperator` without Kafka: an in-memory journal, and contexts over dict-backed state."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pydantic import BaseModel

from sluicegate import Agent, AgentTopics
from sluicegate.agents.journal import EffectKind, InMemoryJournal, JournalEntry, effect_key
from sluicegate.agents.messages import ApprovalDecision, RunResult, TaskRequest
from sluicegate.agents.models import ScriptedModel
from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.agents.operator import JOURNAL_LAG, AgentOperator
from sluicegate.agents.runs.state import Budget, RunState, RunStatus, run_key
from sluicegate.agents.tools import Tool, ToolContext, ToolKind, tool
from sluicegate.operators.contract import Record
from sluicegate.operators.exceptions import RetryableError
from sluicegate.operators.storage import Storage, open_storage

TOPICS = AgentTopics(
    tasks="desk.tasks", approvals="desk.approvals", events="desk.events", results="desk.results"
)
LABELS = {"pipeline": "p", "operator": "desk", "subtask": "desk#0"}

Turn = str | list[tuple[str, dict[str, Any]]]


class DictState:
    """A `PartitionState` in a dict."""

    def __init__(self, rows: dict[bytes, bytes] | None = None) -> None:
        self.rows = dict(rows or {})

    def get(self, key: bytes) -> bytes | None:
        return self.rows.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self.rows[key] = value

    def delete(self, key: bytes) -> None:
        self.rows.pop(key, None)

    def items(self, *, prefix: bytes = b"") -> Generator[tuple[bytes, bytes], None, None]:
        yield from sorted((k, v) for k, v in self.rows.items() if k.startswith(prefix))


@dataclass(frozen=True)
class Wake:
    topic: str
    key: bytes
    after_s: float


@dataclass
class World:
    """What survives a crash (``states``) and what the operator sent (``emitted``, ``wakes``)."""

    states: dict[str, DictState] = field(default_factory=dict)
    emitted: list[tuple[str, bytes | None, bytes]] = field(default_factory=list)
    wakes: list[Wake] = field(default_factory=list)

    def state(self, topic: str) -> DictState:
        return self.states.setdefault(topic, DictState())

    def on(self, topic: str) -> list[bytes]:
        return [value for t, _, value in self.emitted if t == topic]

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(value) for value in self.on(TOPICS.events)]

    def results(self) -> list[RunResult]:
        return [RunResult.model_validate_json(value) for value in self.on(TOPICS.results)]

    def run(self) -> RunState:
        raw = self.state(TOPICS.tasks).get(run_key("r1"))
        assert raw is not None
        return RunState.decode(raw)


@dataclass
class FakeContext:
    """`operators.contract.Context` of partition 0 of ``topic``."""

    world: World
    topic: str
    partition: int = 0

    @property
    def state(self) -> DictState:
        return self.world.state(self.topic)

    def state_of(self, topic: str) -> DictState:
        return self.world.state(topic)

    def emit(
        self, topic: str, value: bytes, *, key: bytes | None = None, partition: int | None = None
    ) -> None:
        assert partition is None, "one partition here: the agent never asks for another"
        self.world.emitted.append((topic, key, value))

    def wake(self, key: bytes, *, topic: str | None = None, after_s: float = 0.0) -> None:
        self.world.wakes.append(Wake(topic or self.topic, key, after_s))


@dataclass
class FakeOpenContext:
    """`operators.contract.OpenContext` of subtask ``desk#0``, which reads partition 0."""

    world: World
    subtask: str = "desk#0"
    attempt: int = 1
    bootstrap: str = "no-kafka:9092"
    input_partitions: list[tuple[str, int]] = field(
        default_factory=lambda: [(TOPICS.tasks, 0), (TOPICS.approvals, 0)]
    )
    storage: Storage = field(default_factory=lambda: open_storage("memory://"))

    def owned_topic(self, suffix: str) -> str:
        raise AssertionError("an operator given a journal needs no topic of its own")

    def state(self, topic: str, partition: int) -> DictState:
        assert partition == 0
        return self.world.state(topic)

    def wake(self, topic: str, partition: int, key: bytes, *, after_s: float = 0.0) -> None:
        self.world.wakes.append(Wake(topic, key, after_s))


def make_tools(calls: Counter[str]) -> list[Tool]:
    @tool()
    async def look(ctx: ToolContext, x: int) -> dict[str, int]:
        calls["look"] += 1
        return {"x": x}

    @tool(kind=ToolKind.REVERSIBLE, compensate="release")
    async def reserve(ctx: ToolContext, x: int) -> str:
        calls["reserve"] += 1
        return f"held {x}"

    @tool(kind=ToolKind.IRREVERSIBLE)
    async def release(ctx: ToolContext, x: int) -> str:
        return f"released {x}"

    @tool(kind=ToolKind.IRREVERSIBLE)
    async def refund(ctx: ToolContext, amount: float) -> str:
        calls["refund"] += 1
        return f"refunded {amount}"

    @tool()
    async def flaky(ctx: ToolContext) -> str:
        calls["flaky"] += 1
        if calls["flaky"] <= 2:
            raise RetryableError("busy")
        return "ok"

    @tool(kind=ToolKind.IDEMPOTENT_WRITE)
    async def tag(ctx: ToolContext, label: str) -> str:
        calls[f"tag {label} for {ctx.metadata.get('tenant')}"] += 1
        return f"tagged {label}"

    return [look, reserve, release, refund, flaky, tag]


def scripted(turns: Sequence[Turn]) -> ScriptedModel:
    """The ``n``-th reply is ``turns[n]`` (the last one repeats): a final text, or calls."""

    def policy(messages: Sequence[ChatMessage]) -> ChatMessage:
        step = sum(1 for m in messages if m.role == "assistant")
        turn = turns[min(step, len(turns) - 1)]
        if isinstance(turn, str):
            return ChatMessage(role="assistant", content=turn)
        calls = tuple(
            ToolCall(id=f"c{step}-{i}", name=name, arguments=json.dumps(arguments))
            for i, (name, arguments) in enumerate(turn)
        )
        return ChatMessage(role="assistant", tool_calls=calls)

    return ScriptedModel(policy)


class Desk:
    """An agent, its operator and the world around it; ``crash`` keeps state and journal."""

    def __init__(
        self, turns: Sequence[Turn], clock: Callable[[], float] = lambda: 1000.0, **agent: Any
    ) -> None:
        self.calls: Counter[str] = Counter()
        self.model = scripted(turns)
        self.agent = Agent("desk", self.model, make_tools(self.calls), "Settle.", **agent)
        self.journal = InMemoryJournal()
        self.registry = CollectorRegistry()
        self.clock = clock
        self.world = World()
        self.op = self._operator()

    def _operator(self) -> AgentOperator:
        return AgentOperator(
            self.agent,
            TOPICS,
            pipeline="p",
            journal=self.journal,
            registry=self.registry,
            clock=self.clock,
        )

    async def open(self) -> None:
        await self.op.open(FakeOpenContext(self.world))

    async def crash(self, states: dict[str, DictState] | None = None) -> None:
        """Drop the operator, its wake-ups and outputs; restore ``states`` (default: as is)."""
        self.world = World(states=states if states is not None else self.world.states)
        self.op = self._operator()
        await self.open()

    async def send(self, topic: str, message: BaseModel) -> None:
        """Deliver ``message`` keyed by its run, as the routing stage keys it."""
        key = str(getattr(message, "run_id", "r1")).encode()
        record = Record(topic, 0, 0, key, message.model_dump_json().encode(), 0)
        await self.op.process(record, FakeContext(self.world, topic))

    async def task(self, budget: Budget | None = None, **fields: Any) -> None:
        task = TaskRequest(run_id="r1", goal="refund 7", budget=budget, **fields)
        await self.send(TOPICS.tasks, task)

    async def decide(self, approved: bool, call_id: str = "") -> None:
        decision = ApprovalDecision(run_id="r1", approved=approved, call_id=call_id, by="ann")
        await self.send(TOPICS.approvals, decision)

    async def fire(self, wake: Wake) -> None:
        self.world.wakes.remove(wake)
        await self.op.on_wake(wake.key, FakeContext(self.world, wake.topic))

    async def step(self) -> bool:
        """Run the first wake-up due now; False if there is none."""
        due = [w for w in self.world.wakes if w.after_s == 0.0]
        if not due:
            return False
        await self.fire(due[0])
        return True

    async def drain(self, limit: int = 100) -> None:
        for _ in range(limit):
            if not await self.step():
                return
        raise AssertionError(f"still busy after {limit} wake-ups")


LOOK_THEN_ANSWER: list[Turn] = [[("look", {"x": 1})], "order 7 refunded"]


async def opened(turns: Sequence[Turn], **agent: Any) -> Desk:
    desk = Desk(turns, **agent)
    await desk.open()
    return desk


async def test_a_task_starts_a_run_and_emits_started() -> None:
    desk = await opened(LOOK_THEN_ANSWER)
    await desk.task()
    (started,) = desk.world.events()
    assert (started["type"], started["run_id"], started["seq"]) == ("started", "r1", 0)
    assert started["status"] == "running"
    assert desk.world.run().status is RunStatus.RUNNING
    assert desk.world.wakes == [Wake(TOPICS.tasks, b"r1", 0.0)]


async def test_a_run_driven_to_the_end_gives_exactly_one_result() -> None:
    desk = await opened(LOOK_THEN_ANSWER)
    await desk.task()
    await desk.drain()
    (result,) = desk.world.results()
    assert (result.status, result.answer, result.steps) == ("done", "order 7 refunded", 2)
    assert (desk.model.calls, desk.calls) == (2, Counter(look=1))
    events = desk.world.events()
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert desk.world.wakes == []


async def test_a_duplicate_task_is_ignored() -> None:
    desk = await opened(LOOK_THEN_ANSWER)
    await desk.task()
    before = dict(desk.world.state(TOPICS.tasks).rows), list(desk.world.emitted)
    await desk.task()
    assert (dict(desk.world.state(TOPICS.tasks).rows), desk.world.emitted) == before
    await desk.drain()
    await desk.task()  # not even once the run is done
    assert len(desk.world.results()) == 1
    assert desk.world.wakes == []


async def test_an_irreversible_call_waits_for_a_decision_on_the_approvals_topic() -> None:
    desk = await opened([[("refund", {"amount": 5.0})], "refunded"])
    await desk.task()
    await desk.drain()
    assert desk.world.run().status is RunStatus.WAITING_APPROVAL
    assert desk.world.events()[-1]["type"] == "approval_requested"
    assert desk.world.wakes == []  # no timeout: nothing to wake for
    assert desk.calls["refund"] == 0
    await desk.decide(True, call_id="not-the-pending-call")
    assert desk.world.wakes == []
    await desk.decide(True, call_id="c0-0")
    assert desk.world.wakes == [Wake(TOPICS.tasks, b"r1", 0.0)]
    await desk.drain()
    (result,) = desk.world.results()
    assert (result.status, result.answer) == ("done", "refunded")
    assert result.effects == [{"key": "r1/1/0", "tool": "refund", "status": "done"}]
    assert desk.calls["refund"] == 1


async def test_runs_by_status_follow_each_run_in_the_counts_and_the_gauges() -> None:
    desk = await opened([[("refund", {"amount": 5.0})], "refunded"])

    def gauge(status: RunStatus) -> float | None:
        labels = {**LABELS, "status": status.value}
        return desk.registry.get_sample_value("sluicegate_agent_runs", labels)

    assert desk.op.status_counts() == {"runs": {}}
    assert {gauge(s) for s in RunStatus} == {0}  # a series for every status from the start
    await desk.task()
    assert desk.op.status_counts() == {"runs": {"running": 1}}
    await desk.drain()
    assert desk.op.status_counts() == {"runs": {"waiting_approval": 1}}
    assert (gauge(RunStatus.RUNNING), gauge(RunStatus.WAITING_APPROVAL)) == (0, 1)
    await desk.decide(True, call_id="c0-0")
    await desk.drain()
    assert desk.op.status_counts() == {"runs": {"done": 1}}
    assert (gauge(RunStatus.WAITING_APPROVAL), gauge(RunStatus.DONE)) == (0, 1)
    await desk.crash()  # restored runs are counted again, once
    assert desk.op.status_counts() == {"runs": {"done": 1}}
    assert gauge(RunStatus.DONE) == 1


async def test_a_restore_replays_from_the_journal_without_calling_anything_again() -> None:
    desk = await opened([[("reserve", {"x": 1}), ("look", {"x": 2})], "all set"])
    await desk.task()
    # The last snapshot: taken before the run's first step.
    checkpoint = {topic: DictState(s.rows) for topic, s in desk.world.states.items()}
    await desk.drain()
    (first,) = desk.world.results()
    counts = (desk.model.calls, Counter(desk.calls))
    assert counts == (2, Counter(reserve=1, look=1))
    await desk.crash(checkpoint)
    assert desk.world.wakes == [Wake(TOPICS.tasks, b"r1", 0.0)]  # open re-drives the run
    await desk.drain()
    assert desk.world.results() == [first]
    assert (desk.model.calls, desk.calls) == counts
    replayed = {**LABELS, "kind": "tool", "outcome": "replayed"}
    assert desk.registry.get_sample_value("sluicegate_agent_effects_total", replayed) == 2


async def test_an_issued_effect_without_done_fails_closed_when_the_tool_cannot_settle_it() -> None:
    desk = await opened([[("reserve", {"x": 1})], "held"])
    await desk.task()
    while desk.world.events()[-1]["type"] != "effect_issued":
        assert await desk.step()
    key = effect_key("r1", 1, 0)
    assert desk.world.events()[-1]["key"] == key
    call_id = desk.world.events()[-1]["call_id"]
    # The worker wrote `issued`, then died before the call's outcome was recorded.
    issued = JournalEntry(
        key=key,
        run_id="r1",
        status="issued",
        kind=EffectKind.TOOL,
        name="reserve",
        attempt=1,
        written_at=1000.0,
    )
    await desk.journal.write(issued, partition=0)
    await desk.crash()
    await desk.drain()
    (result,) = desk.world.results()
    assert (result.status, result.reason) == ("failed", "outcome_unknown")
    assert result.effects == [{"key": key, "tool": "reserve", "status": "unknown"}]
    assert desk.calls["reserve"] == 0
    assert desk.registry.get_sample_value("sluicegate_agent_outcome_unknown_total", LABELS) == 1
    failure = desk.world.events()[-1]
    assert failure["type"] == "status"
    assert (failure["reason"], failure["unknown_key"]) == ("outcome_unknown", key)
    assert (failure["tool"], failure["on_unknown"]) == ("reserve", "fail")
    assert failure["call_id"] == call_id  # the call effect_issued named


async def test_an_idempotent_write_issued_without_done_is_called_again_with_its_key() -> None:
    desk = await opened([[("tag", {"label": "x"})], "tagged"])
    await desk.task(metadata={"tenant": "eu"})
    while desk.world.events()[-1]["type"] != "effect_issued":
        assert await desk.step()
    key = effect_key("r1", 1, 0)
    issued = JournalEntry(
        key=key,
        run_id="r1",
        status="issued",
        kind=EffectKind.TOOL,
        name="tag",
        attempt=1,
        written_at=1000.0,
    )
    await desk.journal.write(issued, partition=0)
    await desk.crash()
    await desk.drain()
    (result,) = desk.world.results()
    assert (result.status, result.answer) == ("done", "tagged")
    assert result.effects == [{"key": key, "tool": "tag", "status": "done"}]
    assert desk.calls == Counter({"tag x for eu": 1})
    written = [(e.key, e.status) for _, e in desk.journal.writes if e and e.name == "tag"]
    assert written == [(key, "issued"), (key, "done")]
    # The result is marked as a retry's, from the journal's done: a replay of it says so too.
    (done,) = [e for _, e in desk.journal.writes if e and e.name == "tag" and e.status == "done"]
    assert done.settled_by == "retry"
    (tool_event,) = [e for e in desk.world.events() if e["type"] == "tool"]
    assert tool_event["settled_by"] == "retry"


async def test_tools_see_the_task_metadata_before_and_after_a_restore() -> None:
    desk = await opened([[("tag", {"label": "a"})], [("tag", {"label": "b"})], "tagged"])
    await desk.task(metadata={"tenant": "eu", "customer_id": "c-9"})
    while desk.world.events()[-1]["type"] != "tool":
        assert await desk.step()
    await desk.crash()  # the run is decoded again from its JSON in the state
    await desk.drain()
    assert desk.world.run().metadata == {"tenant": "eu", "customer_id": "c-9"}
    assert desk.calls == Counter({"tag a for eu": 1, "tag b for eu": 1})


async def test_the_step_budget_ends_the_run_as_failed() -> None:
    desk = await opened([[("look", {"x": 1})]])  # never answers
    await desk.task(budget=Budget(max_steps=2))
    await desk.drain()
    (result,) = desk.world.results()
    assert result.status == "failed"
    assert result.reason is not None
    assert result.reason.startswith("budget_exceeded")
    assert (result.steps, desk.model.calls, desk.calls["look"]) == (2, 2, 2)


async def test_a_task_asking_for_more_steps_than_the_ceiling_gets_the_ceiling() -> None:
    desk = await opened([[("look", {"x": 1})]], budget_ceiling=Budget(max_steps=3))
    await desk.task(budget=Budget(max_steps=50))
    await desk.drain()
    started = desk.world.events()[0]
    assert started["budget"] == {"max_steps": 3, "max_cost_usd": None, "max_tokens": None}
    (result,) = desk.world.results()
    assert (result.status, result.steps) == ("failed", 3)


async def test_a_retryable_tool_error_wakes_the_run_later_and_changes_nothing() -> None:
    desk = await opened([[("flaky", {})], "fine"])  # flaky raises RetryableError twice
    await desk.task()
    # The model call, then at once the read-only tool call it asked for, which raises: the
    # model's safe point stands, and the tool is tried again at the next wake-up, at once.
    assert await desk.step()
    assert [e["type"] for e in desk.world.events()] == ["started", "model"]
    assert [w.after_s for w in desk.world.wakes] == [0.0]
    rows, emitted = dict(desk.world.state(TOPICS.tasks).rows), len(desk.world.emitted)
    assert await desk.step()  # the tool call alone, which raises again: backs off
    assert dict(desk.world.state(TOPICS.tasks).rows) == rows
    assert len(desk.world.emitted) == emitted
    (later,) = desk.world.wakes
    assert (later.key, later.after_s > 0) == (b"r1", True)
    await desk.fire(later)
    await desk.drain()
    (result,) = desk.world.results()
    assert (result.status, desk.calls["flaky"]) == ("done", 3)


async def waiting_for_approval(now: list[float]) -> tuple[Desk, Wake]:
    """A run waiting for approval of a refund with a 60 s timeout; ``now[0]`` is the clock."""
    desk = await opened(
        [[("refund", {"amount": 5.0})], "not refunded"],
        clock=lambda: now[0],
        approval_timeout_s=60.0,
    )
    await desk.task()
    await desk.drain()
    (timeout,) = desk.world.wakes
    return desk, timeout


async def test_an_approval_timeout_rejects_the_call() -> None:
    now = [1000.0]
    desk, timeout = await waiting_for_approval(now)
    assert timeout.after_s == 60.0
    now[0] += 61.0
    await desk.fire(timeout)
    run = desk.world.run()
    assert run.status is RunStatus.RUNNING
    assert run.messages[-1].content == "rejected by timeout: no decision within 60.0 s"
    await desk.drain()
    (result,) = desk.world.results()
    assert (result.status, result.answer, desk.calls["refund"]) == ("done", "not refunded", 0)
    approval = next(e for e in desk.world.events() if e["type"] == "approval")
    assert (approval["approved"], approval["by"]) == (False, "timeout")


async def test_an_early_wake_up_of_a_waiting_run_keeps_its_timeout() -> None:
    now = [1000.0]
    desk, timeout = await waiting_for_approval(now)
    now[0] += 59.0  # the operator's clock says one second is left
    await desk.fire(timeout)
    assert [w.after_s for w in desk.world.wakes] == [pytest.approx(1.0)]


async def test_a_finished_runs_journal_is_forgotten_only_after_a_later_checkpoint() -> None:
    desk = await opened(LOOK_THEN_ANSWER)
    await desk.op.on_completed(1)  # nothing finished yet
    await desk.task()
    await desk.drain()
    assert desk.journal.entries_by_status() == {"issued": 0, "done": 3}  # 2 models, 1 tool
    await desk.op.on_completed(2)  # the final state is in no snapshot yet
    desk.op.on_snapshot(3)
    for completed in range(3, 3 + JOURNAL_LAG):
        await desk.op.on_completed(completed)
        assert desk.journal.get("r1/1/0")[1] is not None
    await desk.op.on_completed(3 + JOURNAL_LAG)
    assert desk.journal.get("r1/1/0") == (None, None)
    assert desk.journal.get("r1/1/model") == (None, None)
    assert desk.journal.entries_by_status() == {"issued": 0, "done": 0}
    done = {**LABELS, "status": "done"}
    assert desk.registry.get_sample_value("sluicegate_agent_journal_entries", done) == 0


async def test_a_restore_counts_a_parked_run_without_decoding_it_and_keeps_its_timeout() -> None:
    now = [1000.0]
    desk, _ = await waiting_for_approval(now)
    now[0] += 20.0
    await desk.crash()  # the parked run is read through its header (`agents.runs.header`)
    assert desk.op.status_counts() == {"runs": {"waiting_approval": 1}}
    assert [w.after_s for w in desk.world.wakes] == [pytest.approx(40.0)]
    waits = {**LABELS}
    assert desk.registry.get_sample_value("sluicegate_agent_approvals_waiting", waits) == 1
    age = desk.registry.get_sample_value("sluicegate_agent_oldest_approval_wait_seconds", waits)
    assert age == pytest.approx(20.0)
    await desk.decide(True, call_id="c0-0")  # decoded in full now, and carried on
    await desk.drain()
    (result,) = desk.world.results()
    assert (result.status, desk.calls["refund"]) == ("done", 1)


async def test_a_parked_run_whose_document_is_corrupt_fails_when_it_is_next_used() -> None:
    desk = await opened([[("refund", {"amount": 5.0})], "refunded"])
    await desk.task()
    await desk.drain()
    tasks = desk.world.state(TOPICS.tasks)
    doc = json.loads(tasks.rows[run_key("r1")])
    doc["messages"] = "not a list of messages"  # its header (id, status, approval) still reads
    tasks.rows[run_key("r1")] = json.dumps(doc, separators=(",", ":")).encode()
    await desk.crash()
    assert desk.op.status_counts() == {"runs": {"waiting_approval": 1}}
    with pytest.raises(ValueError, match="messages"):
        await desk.decide(True, call_id="c0-0")

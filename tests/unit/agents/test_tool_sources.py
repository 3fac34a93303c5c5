"""Tools listed by a `ToolSource` (an MCP server, in production) in the agent operator: the
listing rule of `agents.mcp.source`, with a source in memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from sluicegate import Agent
from sluicegate.agents.fork.request import fork_request
from sluicegate.agents.history.replay import replay
from sluicegate.agents.runs.state import RunState, run_key
from sluicegate.agents.tools import (
    Tool,
    ToolContext,
    ToolDeclarationError,
    ToolKind,
    offered_digests,
    tool,
)
from sluicegate.operators.exceptions import RetryableError
from tests.unit.agents.test_agent_operator import TOPICS, Desk, Turn, make_tools


class ListedTools:
    """A `ToolSource` whose listing a test changes; ``down`` makes listing fail (retryable)."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.listing, self.down, self.listed, self.users = list(tools), False, 0, 0
        self._stale = True

    @property
    def name(self) -> str:
        return "listed"

    @property
    def stale(self) -> bool:
        return self._stale

    def invalidate(self) -> None:
        self._stale = True

    async def acquire(self) -> None:
        self.users += 1

    async def release(self) -> None:
        self.users -= 1

    async def tools(self) -> Sequence[Tool]:
        if self._stale:
            if self.down:
                raise RetryableError("server down")
            self.listed += 1
            self._stale = False
        return list(self.listing)


def listed_tool(name: str, calls: list[dict[str, Any]]) -> Tool:
    @tool(kind=ToolKind.IDEMPOTENT_WRITE, name=name)
    async def act(ctx: ToolContext, x: int) -> str:
        calls.append({"tool": name, "key": ctx.idempotency_key, "x": x})
        return f"{name} {x}"

    return act


def desk_with(source: ListedTools, turns: Sequence[Turn]) -> Desk:
    desk = Desk(turns)
    desk.agent = Agent("desk", desk.model, [*make_tools(desk.calls), source], "Settle.")
    desk.op = desk._operator()
    return desk


async def test_a_source_down_at_open_delays_the_runs_and_does_not_fail_the_subtask() -> None:
    calls: list[dict[str, Any]] = []
    source = ListedTools([listed_tool("note", calls)])
    source.down = True
    desk = desk_with(source, [[("note", {"x": 1})], "noted"])
    await desk.open()  # no exception: listed before each step until it works
    await desk.task()
    assert await desk.step()  # the step backs off before calling anything
    (later,) = desk.world.wakes
    assert later.after_s > 0
    assert desk.model.calls == 0
    source.down = False
    await desk.fire(later)
    await desk.drain()
    (result,) = desk.world.results()
    assert result.status == "done"
    assert [c["key"] for c in calls] == ["r1/1/0"]
    await desk.op.close()
    assert source.users == 0


async def test_a_tool_the_model_asks_for_that_is_not_listed_is_listed_again() -> None:
    calls: list[dict[str, Any]] = []
    source = ListedTools([])
    desk = desk_with(source, [[("note", {"x": 2})], "noted"])
    await desk.open()
    assert source.listed == 1
    source.listing = [listed_tool("note", calls)]  # the server gained it since
    await desk.task()
    await desk.drain()
    (result,) = desk.world.results()
    assert (result.status, source.listed) == ("done", 2)
    assert [c["x"] for c in calls] == [2]


async def test_a_tool_neither_declared_nor_listed_is_rejected_to_the_model() -> None:
    source = ListedTools([])
    desk = desk_with(source, [[("gone", {"x": 2})], "gave up"])
    await desk.open()
    await desk.task()
    await desk.drain()
    (result,) = desk.world.results()
    assert result.status == "done"
    rejected = [e for e in desk.world.events() if e["type"] == "tool_rejected"]
    assert "unknown tool 'gone'" in rejected[0]["error"]
    assert source.listed == 2  # listed again once, before the call was rejected


async def test_a_listed_tool_named_like_a_declared_one_is_refused_at_open() -> None:
    source = ListedTools([listed_tool("look", [])])
    desk = desk_with(source, ["fine"])
    with pytest.raises(ToolDeclarationError, match="look"):
        await desk.open()


async def test_a_run_records_the_tools_it_was_offered() -> None:
    source = ListedTools([listed_tool("note", [])])
    desk = desk_with(source, [[("note", {"x": 1})], "noted"])
    await desk.open()
    await desk.task()
    await desk.drain()
    state = state_of(desk)
    assert set(state.offered_tools) == {"look", "reserve", "release", "refund", "flaky", "tag",
                                        "note"}  # fmt: skip
    offered = offered_digests(desk.op._schemas)
    assert state.offered_tools == offered
    (first_model,) = [e for e in desk.world.events() if e.get("offered_tools")]
    assert first_model["offered_tools"] == offered  # recorded once, in the first model event
    assert replay(desk.world.events())[-1].state == state


async def test_a_restored_run_whose_offered_tool_is_gone_fails_naming_it() -> None:
    calls: list[dict[str, Any]] = []
    source = ListedTools([listed_tool("note", calls)])
    desk = desk_with(source, [[("note", {"x": 1})], "noted"])
    await desk.open()
    await desk.task()
    assert await desk.step()  # the model asked for note; its call is the next wake-up's
    assert state_of(desk).pending_calls[0].name == "note"
    source.listing = []  # the server lost the tool; the worker restarts
    source.invalidate()
    await desk.crash()
    await desk.drain()
    (result,) = desk.world.results()
    assert (result.status, result.reason) == ("failed", "tool_gone: note")
    assert calls == []


def state_of(desk: Desk) -> RunState:
    raw = desk.world.state(TOPICS.tasks).get(run_key("r1"))
    assert raw is not None
    return RunState.decode(raw)


async def test_a_fork_after_the_server_lost_a_tool_fails_naming_it() -> None:
    calls: list[dict[str, Any]] = []
    source = ListedTools([listed_tool("note", calls)])
    desk = desk_with(source, [[("note", {"x": 1})], "noted"])
    await desk.open()
    await desk.task()
    await desk.drain()
    history = desk.world.events()
    source.listing = []  # the server lost the tool
    source.invalidate()
    command = fork_request(history, 0, run_id="r1.dry", recorded_only=True)
    assert "note" in command.offered_tools
    await desk.send(TOPICS.approvals, command)
    await desk.drain()
    fork = RunState.decode(desk.world.state(TOPICS.tasks).rows[run_key("r1.dry")])
    assert (fork.status, fork.reason) == ("failed", "tool_gone: note")
    assert len(calls) == 1  # the parent's call only
    fork_events = [e for e in desk.world.events() if e["run_id"] == "r1.dry"]
    assert replay(fork_events)[-1].state == fork

"""A task's metadata: accepted on the wire (old tasks still parse), kept in `RunState`
across encode/decode, and shown read-only to every tool call as ``ctx.metadata``."""

from __future__ import annotations

import json

import pytest
from pydantic import JsonValue, ValidationError

from sluicegate.agents.messages import TaskRequest
from sluicegate.agents.models.contract import ChatMessage, ModelResponse, ToolCall, Usage
from sluicegate.agents.runs.machine import (
    CallTool,
    after_model,
    next_action,
    start_run,
    tool_context,
)
from sluicegate.agents.runs.state import Budget, RunState
from sluicegate.agents.tools import ToolContext, tool

METADATA: dict[str, JsonValue] = {
    "customer_id": "c-9",
    "tenant": "eu",
    "tags": ["vip"],
    "limits": {"refund": 50},
}


@tool()
async def whoami(ctx: ToolContext) -> str:
    """Say who the run is for."""
    return str(ctx.metadata["customer_id"])


def test_a_task_without_metadata_parses_as_before() -> None:
    old = TaskRequest.model_validate_json(b'{"schema_version": 1, "run_id": "r1", "goal": "g"}')
    assert old.metadata == {}


def test_a_task_carries_json_metadata_but_no_unknown_top_level_field() -> None:
    task = TaskRequest.model_validate_json(
        json.dumps({"run_id": "r1", "goal": "g", "metadata": METADATA})
    )
    assert task.metadata == METADATA
    assert TaskRequest.model_validate_json(task.model_dump_json()) == task
    with pytest.raises(ValidationError, match="customer_id"):
        TaskRequest.model_validate_json(b'{"run_id": "r1", "goal": "g", "customer_id": "c-9"}')


def test_a_run_state_written_before_metadata_existed_reads_with_none() -> None:
    state = start_run("r1", "g", "i", Budget(), 0.0).state
    old = state.model_dump(mode="json")
    del old["metadata"]
    old["schema_version"] = 1  # written before metadata existed: version 1, upgraded on read
    assert RunState.decode(json.dumps(old).encode()) == state
    assert state.metadata == {}


def calling_whoami(state: RunState) -> tuple[RunState, CallTool]:
    """The state once the model asked for ``whoami``, and the action that calls it."""
    message = ChatMessage(
        role="assistant", tool_calls=(ToolCall(id="c0", name="whoami", arguments="{}"),)
    )
    state = after_model(state, ModelResponse(message=message, usage=Usage()), 1.0).state
    action = next_action(state, {"whoami": whoami})
    assert isinstance(action, CallTool)
    return state, action


async def test_a_tool_sees_the_metadata_also_after_the_state_is_restored_from_json() -> None:
    state = start_run("r1", "g", "i", Budget(), 0.0, metadata=METADATA).state
    restored = RunState.decode(state.encode())
    assert restored.metadata == METADATA
    ctx = tool_context(*calling_whoami(restored))
    assert (ctx.run_id, ctx.step, ctx.idempotency_key) == ("r1", 1, "r1/1/0")
    assert ctx.metadata == METADATA
    assert await whoami.call(ctx, {}) == "c-9"


def test_the_metadata_a_tool_sees_is_read_only_and_changes_nothing_in_the_run() -> None:
    state = start_run("r1", "g", "i", Budget(), 0.0, metadata=METADATA).state
    ctx = tool_context(*calling_whoami(state))
    with pytest.raises(TypeError):
        ctx.metadata["tenant"] = "us"  # type: ignore[index]
    ctx.metadata["limits"]["refund"] = 10_000  # a nested value: a copy, not the run's own
    assert state.metadata == METADATA
    assert ToolContext("r1", 0, "k").metadata == {}

"""Forking a run, sans-IO: a new run from another run's state after step ``n``, with one change.

Who forks (``sluicegate runs fork``, ``POST /agents/{agent}/runs/{run}/fork``) replays the
parent's events up to step ``n`` (`agents.history.replay`), applies a `ForkPatch` and writes a
`agents.messages.ForkRun` to the agent's approvals topic; the agent starts the fork with
`fork_run`. Step ``n`` is a step boundary: the ``n``-th model reply and every one of its tool
results are settled, so the fork's next action is model call ``n + 1``.

A seed comes off a topic, so `check_seed` treats it as hostile: the conversation must be the
shape a run writes (system, user, then each assistant reply with tool calls followed by one
tool message per call, in order), hold exactly ``n`` replies, and end at the boundary. No
approval and no pending call carries over; the parent's effects stay the parent's (the fork's
effect keys derive from its own run id, so nothing it does can replay or repeat them, and a
rollback of the fork has none of them to undo). The parent's blob ids at the step carry over
(``blobs``, checked by `check_blobs`: only ids of handles in the seed's messages), so the fork
resolves the payloads its conversation refers to, within the same scope checks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, ValidationError

from sluicegate.agents.blobs.handle import handle_of_text
from sluicegate.agents.models.contract import ChatMessage
from sluicegate.agents.runs.machine import (
    Event,
    Transition,
    _emit,
)  # the machine's own stamping of events
from sluicegate.agents.runs.state import Budget, ForkOrigin, RunState, RunUsage
from sluicegate.operators.exceptions import FatalError

__all__ = [
    "MAX_PATCH_BYTES",
    "ForkPatch",
    "ForkSeedError",
    "GoalChange",
    "InstructionsChange",
    "MessageChange",
    "ToolResultChange",
    "apply_patch",
    "check_blobs",
    "check_seed",
    "describe_patch",
    "fork_run",
    "parse_patch",
    "read_patch",
    "seed_handles",
    "seed_of",
]


class ForkSeedError(FatalError):
    """The seed of fork ``run_id`` is not a conversation ending at a step boundary."""

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(f"fork {run_id!r}: {reason}")
        self.run_id, self.reason = run_id, reason


class _MessagePatch(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int = Field(ge=0)
    content: str


class _ToolResultPatch(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str = Field(min_length=1)
    result: JsonValue = None
    error: str | None = None


class MessageChange(BaseModel):
    """``{"message": {"index": 3, "content": "..."}}``: replace message 3's content (0 is the
    system message, 1 the user's goal)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    message: _MessagePatch


class ToolResultChange(BaseModel):
    """``{"tool_result": {"call_id": "c2", "result": {...}}}``: the tool message answering
    call ``c2`` says ``result`` instead of what the tool returned (``"error": "..."`` instead:
    a tool error)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool_result: _ToolResultPatch


class InstructionsChange(BaseModel):
    """``{"instructions": "..."}``: a new system message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instructions: str = Field(min_length=1)


class GoalChange(BaseModel):
    """``{"goal": "..."}``: a new user message (and goal)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    goal: str = Field(min_length=1)


ForkPatch = MessageChange | ToolResultChange | InstructionsChange | GoalChange
"""The one change a fork makes to the parent's state (the JSON of ``--patch``): exactly one
of the four (each refuses other fields)."""

_PATCH: TypeAdapter[ForkPatch] = TypeAdapter(ForkPatch)


def parse_patch(data: str | bytes) -> ForkPatch:
    """A patch from JSON; a pydantic ``ValidationError`` (a ``ValueError``) if it is none."""
    return _PATCH.validate_json(data)


MAX_PATCH_BYTES = 1024 * 1024
"""The largest patch a person may give (``runs fork --patch FILE``, the console's field)."""


def read_patch(data: str | bytes) -> ForkPatch:
    """A patch as a person gives one, to ``sluicegate runs fork --patch`` or the console: at
    most `MAX_PATCH_BYTES` of JSON, one change. Raises ``ValueError`` saying what is wrong,
    to follow the patch's origin ("patch.json is larger than ...", "the patch is not ...").
    """
    size = len(data.encode() if isinstance(data, str) else data)
    if size > MAX_PATCH_BYTES:
        raise ValueError(f"is larger than {MAX_PATCH_BYTES} bytes")
    try:
        return parse_patch(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'patch'}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(
            'is not a patch (one of {"goal": ...}, {"instructions": ...}, {"message": '
            '{"index": N, "content": ...}}, {"tool_result": {"call_id": ..., "result": ...}}): '
            f"{problems}"
        ) from None


def describe_patch(patch: ForkPatch) -> str:
    """One line saying what ``patch`` changes."""
    if isinstance(patch, MessageChange):
        return f"message {patch.message.index} replaced"
    if isinstance(patch, ToolResultChange):
        return f"result of call {patch.tool_result.call_id} replaced"
    return "instructions replaced" if isinstance(patch, InstructionsChange) else "goal replaced"


def apply_patch(
    goal: str, messages: Sequence[ChatMessage], patch: ForkPatch
) -> tuple[str, tuple[ChatMessage, ...]]:
    """``goal`` and ``messages`` with ``patch`` applied; ``ValueError`` when it does not fit
    them (no such message, no tool message answering the call)."""
    out = list(messages)
    if isinstance(patch, InstructionsChange):
        out[0] = out[0].model_copy(update={"content": patch.instructions})
    elif isinstance(patch, GoalChange):
        goal = patch.goal
        out[1] = out[1].model_copy(update={"content": patch.goal})
    elif isinstance(patch, MessageChange):
        index = patch.message.index
        if index >= len(out):
            raise ValueError(f"no message {index}: the state at this step has {len(out)}")
        if index == 1:
            goal = patch.message.content
        out[index] = out[index].model_copy(update={"content": patch.message.content})
    else:
        swap = patch.tool_result
        where = [
            i for i, m in enumerate(out) if m.role == "tool" and m.tool_call_id == swap.call_id
        ]
        if not where:
            raise ValueError(f"no tool result of call {swap.call_id!r} up to this step")
        if swap.error is not None:
            content = f"error: {swap.error}"
        else:
            content = json.dumps(swap.result, sort_keys=True)
        for i in where:
            out[i] = out[i].model_copy(update={"content": content})
    return goal, tuple(out)


def check_seed(run_id: str, messages: Sequence[ChatMessage], step: int) -> None:
    """Raise `ForkSeedError` unless ``messages`` are a run's conversation after ``step``
    settled replies (see the module docstring)."""
    if len(messages) < 2 or messages[0].role != "system" or messages[1].role != "user":
        raise ForkSeedError(run_id, "the conversation must start with a system and a user message")
    replies, i = 0, 2
    while i < len(messages):
        reply = messages[i]
        if reply.role != "assistant":
            raise ForkSeedError(run_id, f"message {i} is a {reply.role} message, not a reply")
        if not reply.tool_calls:
            raise ForkSeedError(
                run_id, f"message {i} is a final answer: the run ended at step {replies + 1}"
            )
        replies += 1
        for call in reply.tool_calls:
            i += 1
            if i >= len(messages):
                raise ForkSeedError(
                    run_id, f"call {call.id!r} of step {replies} has no result: not settled"
                )
            answer = messages[i]
            if answer.role != "tool" or answer.tool_call_id != call.id:
                raise ForkSeedError(
                    run_id, f"message {i} is not the result of call {call.id!r} of step {replies}"
                )
        i += 1
    if replies != step:
        raise ForkSeedError(run_id, f"the conversation holds {replies} replies, not {step}")


def fork_run(
    run_id: str,
    origin: ForkOrigin,
    *,
    goal: str,
    messages: Sequence[ChatMessage],
    usage: RunUsage,
    budget: Budget,
    metadata: dict[str, JsonValue],
    now: float,
    note: str | None = None,
    blobs: Sequence[str] = (),
    offered_tools: Mapping[str, str] | None = None,
) -> Transition:
    """The first safe point of a fork: the seed checked (`check_seed`, `check_blobs`), the run
    at step ``origin.step`` with the parent's usage so far and ``budget``, resolving the
    handles ``blobs`` names, knowing the tools the parent was offered (``offered_tools``: a
    call of one that is gone fails the fork, naming it). Its event carries the whole seed, so
    the fork's history rebuilds it alone."""
    check_seed(run_id, messages, origin.step)
    check_blobs(run_id, messages, blobs)
    state = RunState(
        run_id=run_id,
        goal=goal,
        metadata=dict(metadata),
        messages=tuple(messages),
        step=origin.step,
        usage=usage,
        budget=budget,
        forked_from=origin,
        blobs=tuple(blobs),
        offered_tools=dict(offered_tools or {}),
        created_at=now,
        updated_at=now,
    )
    event: Event = {
        "type": "forked",
        "goal": goal,
        "metadata": dict(metadata),
        "messages": [m.model_dump(mode="json") for m in messages],
        "usage": usage.model_dump(mode="json"),
        "budget": budget.model_dump(mode="json"),
        "forked_from": origin.model_dump(mode="json"),
        "note": note,
        "blobs": list(blobs),
    }
    if offered_tools:
        event["offered_tools"] = dict(offered_tools)
    return _emit(state, event)


def seed_handles(messages: Sequence[ChatMessage]) -> set[str]:
    """The ids of the handles that are the content of one of ``messages``."""
    handles = (handle_of_text(m.content) for m in messages)
    return {h.id for h in handles if h is not None}


def check_blobs(run_id: str, messages: Sequence[ChatMessage], blobs: Sequence[str]) -> None:
    """Raise `ForkSeedError` unless every id of ``blobs`` (once each) is the id of a handle in
    ``messages``: a fork resolves the parent's handles it holds, and nothing else."""
    held = seed_handles(messages)
    strange = [b for b in blobs if not isinstance(b, str) or b not in held]
    if not strange and len(set(blobs)) != len(blobs):
        raise ForkSeedError(run_id, "a blob id is named twice")
    if strange:
        raise ForkSeedError(run_id, f"blobs {strange[:3]!r} are not handles in the seed's messages")


def seed_of(event: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of `fork_run` a ``forked`` event carries (for a replay)."""
    return {
        "goal": event["goal"],
        "messages": tuple(ChatMessage.model_validate(m) for m in event["messages"]),
        "usage": RunUsage.model_validate(event["usage"]),
        "budget": Budget.model_validate(event["budget"]),
        "metadata": dict(event.get("metadata") or {}),
        "note": event.get("note"),
        "blobs": tuple(event.get("blobs") or ()),
        "offered_tools": dict(event.get("offered_tools") or {}),
    }

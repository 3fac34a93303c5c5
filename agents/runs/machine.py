"""The run state machine, sans-IO: what a run does next, and the state after each safe point.

`next_action` reads a `RunState` and returns one action; the runtime performs it (through the
journal) and applies its outcome with one of the transition functions, each returning the new
state and the event to publish. Nothing here does I/O or reads a clock (``now`` is passed in).

Status transitions (`ALLOWED`)::

    running           -> running | waiting_approval | done | failed | cancelled | rolling_back
    waiting_approval  -> running | failed | cancelled | rolling_back
    rolling_back      -> waiting_approval | rolled_back | failed
    done | failed | cancelled | rolled_back -> rolling_back

A finished run changes only by a person's rollback (`agents.rollback.machine`, which drives the
``rolling_back`` status and a ``waiting_approval`` of kind ``compensation``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import JsonValue

from sluicegate.agents.journal import effect_key
from sluicegate.agents.models.contract import ChatMessage, ModelResponse, ToolCall
from sluicegate.agents.runs.actions import (
    Action,
    AskApproval,
    CallModel,
    CallTool,
    Fail,
    Idle,
    RecordIntent,
    RejectCall,
    ReuseRecorded,
)
from sluicegate.agents.runs.state import Budget, EffectRecord, PendingApproval, RunState, RunStatus
from sluicegate.agents.tools import Tool, ToolArgumentsError, ToolContext, ToolKind

__all__ = [
    "ALLOWED",
    "Action",
    "AskApproval",
    "CallModel",
    "CallTool",
    "Event",
    "Fail",
    "Idle",
    "RecordIntent",
    "RejectCall",
    "ReuseRecorded",
    "Transition",
    "after_model",
    "after_tool",
    "ask_approval",
    "blob_unavailable",
    "budget_exceeded",
    "decide_approval",
    "emit",
    "fail",
    "next_action",
    "record_intent",
    "reject_call",
    "start_run",
    "tool_context",
    "with_status",
]

ALLOWED: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.RUNNING: frozenset(RunStatus) - {RunStatus.ROLLED_BACK},
    RunStatus.WAITING_APPROVAL: frozenset(
        {RunStatus.RUNNING, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.ROLLING_BACK}
    ),
    RunStatus.ROLLING_BACK: frozenset(
        {RunStatus.WAITING_APPROVAL, RunStatus.ROLLED_BACK, RunStatus.FAILED}
    ),
    RunStatus.DONE: frozenset({RunStatus.ROLLING_BACK}),
    RunStatus.FAILED: frozenset({RunStatus.ROLLING_BACK}),
    RunStatus.CANCELLED: frozenset({RunStatus.ROLLING_BACK}),
    RunStatus.ROLLED_BACK: frozenset({RunStatus.ROLLING_BACK}),
}

Event = dict[str, Any]


_EFFECT_KINDS: dict[ToolKind, Literal["idempotent_write", "reversible", "irreversible"]] = {
    ToolKind.IDEMPOTENT_WRITE: "idempotent_write",
    ToolKind.REVERSIBLE: "reversible",
    ToolKind.IRREVERSIBLE: "irreversible",
}
"""What an `EffectRecord` calls each kind of tool with an effect."""


@dataclass(frozen=True, slots=True)
class Transition:
    state: RunState
    event: Event


def start_run(
    run_id: str,
    goal: str,
    instructions: str,
    budget: Budget,
    now: float,
    *,
    metadata: Mapping[str, JsonValue] | None = None,
) -> Transition:
    """The first safe point of a run: the system and user messages, the budget, the task's
    ``metadata`` (for tools; the model does not see it)."""
    messages = (
        ChatMessage(role="system", content=instructions),
        ChatMessage(role="user", content=goal),
    )
    state = RunState(
        run_id=run_id,
        goal=goal,
        metadata=dict(metadata or {}),
        messages=messages,
        budget=budget,
        created_at=now,
        updated_at=now,
    )
    event: Event = {
        "type": "started",
        "goal": goal,
        "instructions": instructions,
        "metadata": dict(state.metadata),
        "budget": budget.model_dump(mode="json"),
    }
    return _emit(state, event)


def budget_exceeded(state: RunState) -> str | None:
    """The first budget a next model call would exceed, as a reason; None if within all."""
    budget, usage = state.budget, state.usage
    if state.step >= budget.max_steps:
        return f"budget_exceeded: max_steps {budget.max_steps} reached"
    if budget.max_cost_usd is not None and usage.cost_usd >= budget.max_cost_usd:
        return f"budget_exceeded: cost {usage.cost_usd:.6f} >= {budget.max_cost_usd} USD"
    if budget.max_tokens is not None and usage.tokens >= budget.max_tokens:
        return f"budget_exceeded: tokens {usage.tokens} >= {budget.max_tokens}"
    return None


def next_action(state: RunState, tools: Mapping[str, Tool]) -> Action:
    """What the run does next."""
    if state.status is not RunStatus.RUNNING:
        return Idle()
    if not state.pending_calls:
        reason = budget_exceeded(state)
        if reason is not None:
            return Fail(reason)
        return CallModel(effect_key(state.run_id, state.step + 1, "model"))
    call = state.pending_calls[0]
    tool = tools.get(call.name)
    if tool is None and call.name in state.offered_tools:
        return Fail(f"tool_gone: {call.name}")  # offered to the run once: not the model's slip
    if tool is None:
        return RejectCall(call, f"unknown tool {call.name!r}; tools: {sorted(tools)}")
    try:
        arguments = tool.parse(call.arguments)
    except ToolArgumentsError as exc:
        return RejectCall(call, str(exc))
    key = effect_key(state.run_id, state.step, state.call_index)
    fork = state.forked_from
    if fork is not None and fork.recorded_only and tool.kind.has_effect:
        result, error = fork.recorded_outcome(state.step, tool.name, arguments)
        return ReuseRecorded(call, tool, arguments, key, result, error)
    # Approval is of this effect (its key), not of a call id a model may reuse.
    if tool.needs_approval and key not in state.approved_calls:
        return AskApproval(call, tool, arguments, key)
    if tool.kind.has_effect and not any(e.key == key for e in state.effects):
        return RecordIntent(call, tool, arguments, key)
    return CallTool(call, tool, arguments, key)


def tool_context(state: RunState, action: CallTool) -> ToolContext:
    """What the tool of ``action`` is told: the run, the step, the effect key, the metadata."""
    return ToolContext.of_run(state.run_id, state.step, action.key, state.metadata)


def after_model(
    state: RunState,
    response: ModelResponse,
    now: float,
    *,
    blob: str | None = None,
    offered: Mapping[str, str] | None = None,
) -> Transition:
    """Safe point: the model answered step ``state.step + 1``. ``blob``: the id of the handle
    the reply's content was stored under (`agents.blobs`), which joins the run's ``blobs``.
    ``offered``: the tools the call offered (`agents.tools.offered_digests`); those new to
    the run or changed join its ``offered_tools``, and the event names them
    (``offered_tools``), so that a replay records them too."""
    message = response.message
    step = state.step + 1
    changed = {
        name: digest
        for name, digest in (offered or {}).items()
        if state.offered_tools.get(name) != digest
    }
    update: dict[str, Any] = {
        "step": step,
        "messages": (*state.messages, message),
        "usage": state.usage.add(response.usage),
        "blobs": _with_blob(state.blobs, blob),
        "updated_at": now,
    }
    if changed:
        update["offered_tools"] = state.offered_tools | changed
    event: Event = {
        "type": "model",
        "step": step,
        "tool_calls": [c.name for c in message.tool_calls],
        "prompt_tokens": response.usage.prompt_tokens,
        "completion_tokens": response.usage.completion_tokens,
        "cost_usd": response.usage.cost_usd,
        "message": message.model_dump(mode="json"),
        "usage": response.usage.model_dump(mode="json"),
    }
    if blob is not None:
        event["blob"] = blob
    if changed:
        event["offered_tools"] = changed
    if message.tool_calls:  # the usual step: one copy of the run
        return _emit(state, event, **update, pending_calls=message.tool_calls, call_index=0)
    base = state.model_copy(update=update)
    done = _finish(base, RunStatus.DONE, None, answer=message.content or "")
    return _emit(done, event | {"status": "done"})


def record_intent(state: RunState, action: RecordIntent, now: float) -> Transition:
    """Safe point before a tool with an effect runs."""
    effect = EffectRecord(
        key=action.key,
        tool=action.tool.name,
        call_id=action.call.id,
        step=state.step,
        arguments=action.arguments,
        kind=_EFFECT_KINDS[action.tool.kind],
        compensate=action.tool.compensate,
    )
    state = state.model_copy(update={"effects": (*state.effects, effect), "updated_at": now})
    event: Event = {
        "type": "effect_issued",
        "tool": action.tool.name,
        "key": action.key,
        "call_id": action.call.id,
        "arguments": action.arguments,
        "kind": effect.kind,
        "compensate": effect.compensate,
    }
    return _emit(state, event)


def after_tool(
    state: RunState,
    action: CallTool | ReuseRecorded,
    result: Any,
    error: str | None,
    now: float,
    *,
    blob: str | None = None,
) -> Transition:
    """Safe point: a tool's result (or its permanent failure) is recorded. The event carries
    ``result`` and ``error`` as given, so a replay of the events rebuilds the same state.
    ``blob``: the id of the handle ``result`` is (`agents.blobs`), which joins ``blobs``."""
    content = f"error: {error}" if error is not None else json.dumps(result, sort_keys=True)
    effects = tuple(
        e.model_copy(update={"status": "failed" if error else "done", "result": result})
        if e.key == action.key
        else e
        for e in state.effects
    )
    update = _popped_call(state, action.call, content, now)
    update |= {"effects": effects, "blobs": _with_blob(state.blobs, blob)}
    event: Event = {
        "type": "tool",
        "tool": action.tool.name,
        "key": action.key,
        "call_id": action.call.id,
        "arguments": action.arguments,
        "result": result,
        "error": error,
    }
    if isinstance(action, ReuseRecorded):
        event["recorded"] = True
    if blob is not None:
        event["blob"] = blob
    return _emit(state, event, **update)


def reject_call(state: RunState, action: RejectCall, now: float) -> Transition:
    update = _popped_call(state, action.call, f"error: {action.error}", now)
    event: Event = {"type": "tool_rejected", "tool": action.call.name, "error": action.error}
    return _emit(state, event | {"call_id": action.call.id}, **update)


def blob_unavailable(
    state: RunState, blob_id: str, reason: str, content: str, marker: str, now: float
) -> Transition:
    """Safe point: a payload stored by reference cannot be read any more (``reason``:
    expired, erased, corrupt, out_of_scope). Every message whose content is the handle text
    ``content`` holds ``marker`` instead, the handle leaves ``blobs``, and the run goes on.
    The event carries ``content`` and ``marker`` too, so a replay rebuilds the messages."""
    messages = tuple(
        m.model_copy(update={"content": marker}) if m.content == content else m
        for m in state.messages
    )
    state = state.model_copy(
        update={
            "messages": messages,
            "blobs": tuple(b for b in state.blobs if b != blob_id),
            "updated_at": now,
        }
    )
    event: Event = {"type": "blob_unavailable", "blob": blob_id, "reason": reason}
    return _emit(state, event | {"content": content, "marker": marker})


def ask_approval(state: RunState, action: AskApproval, now: float) -> Transition:
    """Safe point: an irreversible call waits for a person."""
    pending = PendingApproval(
        call=action.call,
        key=action.key,
        tool=action.tool.name,
        arguments=action.arguments,
        proposed_at=now,
    )
    state = _status(state, RunStatus.WAITING_APPROVAL).model_copy(
        update={"pending_approval": pending, "updated_at": now}
    )
    event: Event = {"type": "approval_requested", "tool": action.tool.name}
    event |= {"call_id": action.call.id, "arguments": action.arguments, "key": action.key}
    return _emit(state, event)


def decide_approval(
    state: RunState, call_id: str, approved: bool, by: str, reason: str | None, now: float
) -> Transition | None:
    """Safe point: a person decided; None if the decision is not for the pending call."""
    pending = state.pending_approval
    if state.status is not RunStatus.WAITING_APPROVAL or pending is None:
        return None
    if pending.kind != "call":  # a rollback's wait: `agents.rollback.machine.decide_compensation`
        return None
    if call_id not in ("", pending.call.id):
        return None
    running = _status(state, RunStatus.RUNNING).model_copy(update={"pending_approval": None})
    event: Event = {"type": "approval", "approved": approved, "by": by, "reason": reason}
    event["call_id"] = pending.call.id
    if approved:
        approved_calls = (*running.approved_calls, pending.key)
        state = running.model_copy(update={"approved_calls": approved_calls, "updated_at": now})
        return _emit(state, event)
    content = f"rejected by {by}: {reason or 'no reason given'}"
    return _emit(running, event, **_popped_call(running, pending.call, content, now))


def fail(state: RunState, reason: str, now: float, *, unknown_key: str | None = None) -> Transition:
    """The run fails with ``reason``; ``unknown_key``: the effect whose outcome nobody can
    settle, marked ``unknown`` (the run is parked, failed closed)."""
    if unknown_key is not None:
        effects = tuple(
            e.model_copy(update={"status": "unknown"}) if e.key == unknown_key else e
            for e in state.effects
        )
        state = state.model_copy(update={"effects": effects})
    failed = _finish(state, RunStatus.FAILED, reason).model_copy(update={"updated_at": now})
    event: Event = {"type": "status", "status": "failed", "reason": reason}
    if unknown_key is not None:
        event["unknown_key"] = unknown_key
    return _emit(failed, event)


def _with_blob(blobs: tuple[str, ...], blob: str | None) -> tuple[str, ...]:
    return blobs if blob is None or blob in blobs else (*blobs, blob)


def _popped_call(state: RunState, call: ToolCall, content: str, now: float) -> dict[str, Any]:
    """The update that answers ``call``, the first pending call, with a tool message."""
    assert state.pending_calls
    assert state.pending_calls[0].id == call.id
    message = ChatMessage(role="tool", content=content, tool_call_id=call.id)
    return {
        "messages": (*state.messages, message),
        "pending_calls": state.pending_calls[1:],
        "call_index": state.call_index + 1,
        "updated_at": now,
    }


def _finish(state: RunState, status: RunStatus, reason: str | None, **update: Any) -> RunState:
    return _status(state, status).model_copy(
        update={"reason": reason, "pending_calls": (), "pending_approval": None, **update}
    )


def _status(state: RunState, status: RunStatus) -> RunState:
    if status not in ALLOWED[state.status]:
        raise ValueError(f"run {state.run_id}: {state.status.value} -> {status.value} not allowed")
    return state.model_copy(update={"status": status})


def _emit(state: RunState, event: Event, **update: Any) -> Transition:
    """``state`` with ``update`` (one copy of the run, the event counted); the event stamped
    with the run, its sequence number, step and time (``at``: the ``now`` of the transition,
    which every transition writes to ``updated_at``) as of the new state."""
    seq = state.events
    state = state.model_copy(update={**update, "events": seq + 1})
    stamped = {
        "run_id": state.run_id,
        "seq": seq,
        "step": state.step,
        "at": state.updated_at,
        **event,
    }
    stamped.setdefault("status", state.status.value)
    return Transition(state, stamped)


def with_status(state: RunState, status: RunStatus) -> RunState:
    """``state`` moved to ``status``; raises ``ValueError`` unless `ALLOWED`."""
    return _status(state, status)


def emit(state: RunState, event: Event) -> Transition:
    """The transition to ``state`` publishing ``event`` (stamped with run, seq and step)."""
    return _emit(state, event)

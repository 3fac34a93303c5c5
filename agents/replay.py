"""Replaying a run from its events, sans-IO: the `RunState` after each event, calling nothing.

Every event of a run carries the inputs of the transition that wrote it (`agents.run`): the
seed of a ``started`` or ``forked`` run, a model reply with its usage, a tool call's arguments
and result, a person's decision, a failure's reason. `replay` folds the events, in ``seq``
order, through the SAME transition functions the agent ran, so the state it rebuilds is the
state the run stored at each safe point, without calling a model or a tool.

Each event is checked against the run: the first is ``seq`` 0 and starts the run, each next
one is the next ``seq`` of the same ``run_id``, of a known type, about the call the run has
pending, and equal in every field the transition writes to the event the transition writes
again (fields the operator adds, such as ``duration_ms``, are not the transition's). A
mismatch raises `HistoryError` with the run, the ``seq`` and the reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from agents import run as machine
from agents.exceptions import HistoryError
from agents.fork import ForkSeedError, fork_run, seed_of
from agents.journal import OnUnknown
from agents.models.contract import ChatMessage, ModelResponse, ToolCall, Usage
from agents.state import Budget, ForkOrigin, RunState, RunStatus
from agents.tools import Tool, ToolKind

__all__ = ["EVENT_TYPES", "Replayed", "replay", "settled_at"]

Event = dict[str, Any]

EVENT_TYPES = frozenset(
    {
        "started",
        "forked",
        "model",
        "effect_issued",
        "tool",
        "tool_rejected",
        "approval_requested",
        "approval",
        "status",
    }
)


@dataclass(frozen=True, slots=True)
class Replayed:
    """One event and the run's state after it."""

    event: Event
    state: RunState


def replay(events: Iterable[Event]) -> list[Replayed]:
    """The state after each of ``events`` (one run's, ordered by ``seq``; see module doc)."""
    out: list[Replayed] = []
    state: RunState | None = None
    run_id = ""
    for expected, event in enumerate(events):
        if not isinstance(event, dict):
            raise HistoryError(run_id or "?", expected, f"event is a {type(event).__name__}")
        if expected == 0:
            run_id = str(event.get("run_id", ""))
        _check_envelope(run_id, expected, event)
        try:
            step = _apply(state, run_id, event)
        except HistoryError:
            raise
        except KeyError as exc:
            raise HistoryError(run_id, expected, f"{event['type']} event lacks {exc}") from None
        except (ValueError, TypeError, AssertionError, ValidationError) as exc:
            raise HistoryError(run_id, expected, f"{event['type']}: {exc}") from None
        _check_same(run_id, expected, event, step.event)
        state = step.state
        out.append(Replayed(event, state))
    return out


def settled_at(history: Sequence[Replayed], step: int) -> RunState | None:
    """The run's state after its ``step``-th model reply and all that reply's tool results
    were settled, before model call ``step + 1``; None if the run never was there (it ended
    at that step, or never got that far, or was parked inside it)."""
    found = None
    for replayed in history:
        state = replayed.state
        if state.step > step:
            break
        settled = not state.pending_calls and state.pending_approval is None
        if state.step == step and settled and state.status is RunStatus.RUNNING:
            found = state
    return found


def _check_envelope(run_id: str, seq: int, event: Event) -> None:
    if event.get("run_id") != run_id:
        raise HistoryError(run_id, seq, f"event of run {event.get('run_id')!r}")
    if event.get("seq") != seq:
        raise HistoryError(run_id, seq, f"expected seq {seq}, got {event.get('seq')!r}: a gap")
    kind = event.get("type")
    if kind not in EVENT_TYPES:
        raise HistoryError(run_id, seq, f"unknown event type {kind!r}")
    if (seq == 0) != (kind in ("started", "forked")):
        raise HistoryError(run_id, seq, f"a {kind} event at seq {seq}")


def _apply(state: RunState | None, run_id: str, event: Event) -> machine.Transition:
    kind, at = event["type"], float(event["at"])
    if kind == "started":
        budget = Budget.model_validate(event["budget"])
        return machine.start_run(
            run_id, event["goal"], event["instructions"], budget, at, metadata=event["metadata"]
        )
    if kind == "forked":
        try:
            origin = ForkOrigin.model_validate(event["forked_from"])
            return fork_run(run_id, origin, now=at, **seed_of(event))
        except ForkSeedError as exc:
            raise HistoryError(run_id, 0, exc.reason) from None
    assert state is not None
    apply = _TRANSITIONS[kind]
    return apply(state, event, at)


def _model(state: RunState, event: Event, at: float) -> machine.Transition:
    response = ModelResponse(
        message=ChatMessage.model_validate(event["message"]),
        usage=Usage.model_validate(event["usage"]),
    )
    return machine.after_model(state, response, at)


def _record_intent(state: RunState, event: Event, at: float) -> machine.Transition:
    call = _pending(state, event)
    tool = _tool(event["tool"], ToolKind(event["kind"]), event.get("compensate"))
    action = machine.RecordIntent(call, tool, event["arguments"], event["key"])
    return machine.record_intent(state, action, at)


def _after_tool(state: RunState, event: Event, at: float) -> machine.Transition:
    call = _pending(state, event)
    tool = _tool(event["tool"])
    step = machine.ReuseRecorded if event.get("recorded") else machine.CallTool
    action = step(call, tool, event["arguments"], event["key"])
    return machine.after_tool(state, action, event["result"], event["error"], at)


def _reject(state: RunState, event: Event, at: float) -> machine.Transition:
    action = machine.RejectCall(_pending(state, event), event["error"])
    return machine.reject_call(state, action, at)


def _ask(state: RunState, event: Event, at: float) -> machine.Transition:
    call = _pending(state, event)
    action = machine.AskApproval(call, _tool(event["tool"]), event["arguments"], event["key"])
    return machine.ask_approval(state, action, at)


def _decide(state: RunState, event: Event, at: float) -> machine.Transition:
    step = machine.decide_approval(
        state, event["call_id"], bool(event["approved"]), event["by"], event["reason"], at
    )
    if step is None:
        raise ValueError(f"no pending approval of call {event['call_id']!r}")
    return step


def _status(state: RunState, event: Event, at: float) -> machine.Transition:
    if event.get("status") != RunStatus.FAILED.value:
        raise ValueError(f"a status event to {event.get('status')!r}")
    return machine.fail(state, event["reason"], at, unknown_key=event.get("unknown_key"))


_TRANSITIONS: dict[str, Callable[[RunState, Event, float], machine.Transition]] = {
    "model": _model,
    "effect_issued": _record_intent,
    "tool": _after_tool,
    "tool_rejected": _reject,
    "approval_requested": _ask,
    "approval": _decide,
    "status": _status,
}


def _pending(state: RunState, event: Event) -> ToolCall:
    """The call the run has pending, which the event must be about."""
    if not state.pending_calls:
        raise ValueError(f"no pending call, but the event is about call {event['call_id']!r}")
    call = state.pending_calls[0]
    if call.id != event["call_id"]:
        raise ValueError(f"the pending call is {call.id!r}, the event's {event['call_id']!r}")
    return call


async def _never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a replay calls no tool")


def _tool(name: str, kind: ToolKind = ToolKind.READ_ONLY, compensate: str | None = None) -> Tool:
    """A stand-in for the tool an event names: what the transitions read of it, and nothing
    that could run."""
    return Tool(
        name=name,
        description="",
        function=_never,
        arguments=BaseModel,
        kind=kind,
        on_unknown=OnUnknown.FAIL,
        compensate=compensate,
    )


def _check_same(run_id: str, seq: int, recorded: Event, replayed: Event) -> None:
    """Every field the transition writes is what the recorded event says."""
    again = json.loads(json.dumps(replayed))
    for field, value in again.items():
        if recorded.get(field) != value:
            raise HistoryError(
                run_id,
                seq,
                f"field {field!r} is {recorded.get(field)!r} in the event, {value!r} on replay",
            )

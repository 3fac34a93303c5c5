"""Replaying a run from its events, sans-IO: the `RunState` after each event, calling nothing.

Every event of a run carries the inputs of the transition that wrote it: the seed of a
``started`` or ``forked`` run (with the parent's blob ids it resolves), a model reply with its
usage, a tool call's arguments and result, the id of the blob a step stored its payload under
(``blob``), a payload lost (``blob_unavailable``, with the handle text and the marker shown in
its place), a person's decision, a failure's reason; and each step of a rollback
(`agents.rollback.machine`: ``rollback_started``, ``effect_settled`` with the journal's result,
``compensation`` skipped or with its result or error, ``compensation_needed`` with whether a
webhook is alerted, ``alert_sent``, a decision on a compensation wait, the final
``rolled_back`` status). `replay` folds the events, in ``seq`` order, through the SAME
transition functions the agent ran (`agents.runs.machine`, `agents.rollback.machine`), so the
state it rebuilds is the state the run stored at each safe point, field for field, without
calling a model, a tool, a compensation, a webhook or the blob store.

Each event is checked against the run: the first is ``seq`` 0 and starts the run, each next
one is the next ``seq`` of the same ``run_id``, of a known type, about the call the run has
pending (or the effect its rollback undoes next; a blob id must be the handle the payload
is), and equal in every field the transition writes to the event the transition writes
again (fields the operator adds, such as ``duration_ms``, are not the transition's). A
mismatch raises `HistoryError` with the run, the ``seq`` and the reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from sluicegate.agents.blobs.handle import BlobHandle, handle_of, handle_of_text, unavailable_marker
from sluicegate.agents.exceptions import HistoryError
from sluicegate.agents.fork.patch import ForkSeedError, fork_run, seed_of
from sluicegate.agents.journal import OnUnknown
from sluicegate.agents.models.contract import ChatMessage, ModelResponse, ToolCall, Usage
from sluicegate.agents.rollback import machine as rollback
from sluicegate.agents.runs import machine
from sluicegate.agents.runs.state import Budget, EffectRecord, ForkOrigin, RunState, RunStatus
from sluicegate.agents.tools import Tool, ToolKind

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
        "blob_unavailable",
        "rollback_started",
        "effect_settled",
        "compensation",
        "compensation_needed",
        "alert_sent",
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
    blob = _blob(event, handle_of_text(response.message.content))
    offered = event.get("offered_tools")
    return machine.after_model(state, response, at, blob=blob, offered=offered)


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
    blob = _blob(event, handle_of(event["result"]))
    return machine.after_tool(state, action, event["result"], event["error"], at, blob=blob)


def _blob(event: Event, handle: BlobHandle | None) -> str | None:
    """The blob id the event says its step stored: the id of the handle its payload is."""
    blob = event.get("blob")
    if blob is not None and (handle is None or handle.id != blob):
        raise ValueError(f"blob {blob!r} is not the handle the event's payload is")
    return None if blob is None else str(blob)


def _blob_unavailable(state: RunState, event: Event, at: float) -> machine.Transition:
    blob, reason, content, marker = (event[k] for k in ("blob", "reason", "content", "marker"))
    handle = handle_of_text(content) if isinstance(content, str) else None
    if handle is None or handle.id != blob or blob not in state.blobs:
        raise ValueError(f"content is not the handle of blob {blob!r} of the run")
    if marker != unavailable_marker(handle, str(reason)):
        raise ValueError("the marker is not the one the run shows for this blob")
    return machine.blob_unavailable(state, handle.id, str(reason), content, marker, at)


def _reject(state: RunState, event: Event, at: float) -> machine.Transition:
    action = machine.RejectCall(_pending(state, event), event["error"])
    return machine.reject_call(state, action, at)


def _ask(state: RunState, event: Event, at: float) -> machine.Transition:
    call = _pending(state, event)
    action = machine.AskApproval(call, _tool(event["tool"]), event["arguments"], event["key"])
    return machine.ask_approval(state, action, at)


def _decide(state: RunState, event: Event, at: float) -> machine.Transition:
    """A person's decision: on a compensation wait during a rollback (as the operator
    dispatches it), else on a call."""
    approved, by, reason = bool(event["approved"]), event["by"], event["reason"]
    if rollback.in_rollback(state):
        step = rollback.decide_compensation(state, approved, by, reason, at)
    else:
        step = machine.decide_approval(state, event["call_id"], approved, by, reason, at)
    if step is None:
        raise ValueError(f"no pending approval of {event.get('call_id') or event.get('key')!r}")
    return step


def _status(state: RunState, event: Event, at: float) -> machine.Transition:
    if event.get("status") == RunStatus.ROLLED_BACK.value:
        _next(state, rollback.Finish)
        return rollback.finish(state, at)
    if event.get("status") != RunStatus.FAILED.value:
        raise ValueError(f"a status event to {event.get('status')!r}")
    return machine.fail(state, event["reason"], at, unknown_key=event.get("unknown_key"))


def _rollback_started(state: RunState, event: Event, at: float) -> machine.Transition:
    reason = event["reason"]
    return rollback.start_rollback(state, int(event["to_step"]), event["by"], reason, at)


def _settled(state: RunState, event: Event, at: float) -> machine.Transition:
    action = _next(state, rollback.Settle)
    outcome = event["outcome"]
    if action.effect.key != event["key"] or outcome not in get_args(rollback.SettledAs):
        raise ValueError(f"effect {event['key']!r} settled as {outcome!r}")
    result = event["result"] if outcome in ("done", "failed") else event.get("result")
    return rollback.settled(state, action, outcome, result, at)


def _compensation(state: RunState, event: Event, at: float) -> machine.Transition:
    """A skipped effect (``skipped`` says why), or a compensation's result or error."""
    if "skipped" in event:
        return rollback.skip(state, _next(state, rollback.Skip), at)
    effect, number = _head(state, event["effect"])
    if event["key"] != rollback.compensation_key(effect.key, number):
        raise ValueError(f"compensation key {event['key']!r} of effect {effect.key!r}")
    action = rollback.Compensate(effect, _tool(event["tool"]), event["arguments"], event["key"])
    return rollback.after_compensation(state, action, event.get("result"), event.get("error"), at)


def _compensation_needed(state: RunState, event: Event, at: float) -> machine.Transition:
    effect, _ = _head(state, event["key"])
    if not isinstance(event["webhook"], bool):
        raise ValueError(f"webhook is {event['webhook']!r}")
    action = rollback.Block(effect, str(event["problem"]))
    return rollback.block(state, action, at, webhook=event["webhook"])


def _alert_sent(state: RunState, event: Event, at: float) -> machine.Transition:
    action = _next(state, rollback.Notify)
    if (action.effect.key, action.key) != (event["effect"], event["key"]):
        raise ValueError(f"an alert {event['key']!r}, the run's is {action.key!r}")
    return rollback.after_notify(state, action, event.get("error"), at)


_TRANSITIONS: dict[str, Callable[[RunState, Event, float], machine.Transition]] = {
    "model": _model,
    "effect_issued": _record_intent,
    "tool": _after_tool,
    "tool_rejected": _reject,
    "approval_requested": _ask,
    "approval": _decide,
    "status": _status,
    "blob_unavailable": _blob_unavailable,
    "rollback_started": _rollback_started,
    "effect_settled": _settled,
    "compensation": _compensation,
    "compensation_needed": _compensation_needed,
    "alert_sent": _alert_sent,
}

_A = TypeVar("_A", rollback.Settle, rollback.Skip, rollback.Notify, rollback.Finish)


def _next(state: RunState, kind: type[_A]) -> _A:
    """The rollback's next action, which the event must be (tools play no part in these)."""
    action = rollback.next_action(state, {})
    if not isinstance(action, kind):
        raise ValueError(f"the rollback's next action is not to {kind.__name__.lower()}")
    return action


def _head(state: RunState, key: str) -> tuple[EffectRecord, int]:
    """The effect a rolling-back run undoes next, which the event must be about, and the
    rollback's number."""
    undo = state.rollback
    if state.status is not RunStatus.ROLLING_BACK or undo is None or not undo.queue:
        raise ValueError(f"no rollback is undoing an effect, but the event is about {key!r}")
    if undo.queue[0] != key:
        raise ValueError(f"the rollback undoes {undo.queue[0]!r} next, the event's {key!r}")
    (effect,) = [e for e in state.effects if e.key == key]
    return effect, undo.number


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

"""Rolling a run back to a step, sans-IO: which effects to undo, in which order, and what
blocks. The runtime (`agents.rollback.compensation`) performs each action and applies its
outcome here.

A `RollbackRun` command asks to undo the effects of the steps after ``to_step``.
`start_rollback` queues them, the latest first; then `next_action` takes the queue's head:

1. an effect left ``issued`` (its call may have started) not yet asked about: `Settle`
   (the journal says whether it ended, and how);
2. a ``failed`` effect, or one whose call never started: `Skip` (nothing to undo);
3. a reversible effect that is ``done``, or whose outcome is unknown (compensations are
   idempotent by their own key, so undoing what may not have happened is safe; if it did not,
   the compensation fails and a person looks): `Compensate` with its compensating tool, the
   arguments filled by parameter name from the effect's result (a dict), then its arguments;
4. anything else (irreversible, idempotent_write, arguments that cannot be filled, a
   compensation that failed for good): `Block` - the run waits for a person
   (``waiting_approval`` with a `PendingApproval` of kind ``compensation``; no approval
   timeout decides it). `decide_compensation`: approve = handled by hand, go on; reject =
   stop here, the run ends ``failed`` with reason ``rollback_stopped``.
5. nothing left: `Finish` - ``rolled_back``, a final status (a second `RunResult`).

Who may be rolled back (`refusal`): a finished run (done, failed, cancelled, rolled_back: a
second rollback goes further back), a run waiting for approval of a call (the call never ran:
it is dropped), and a running run: its rollback takes effect between two actions, because the
engine runs `process` and `on_wake` of one key (the run id) one after the other, never
interleaved (`operators.runtime.executor.KeyedExecutor`), and an action is one call. Not a run
whose rollback is under way.

Journal keys, per rollback ``n`` of the run (`Rollback.number`): the compensation of effect
``k`` runs under ``k/compensate/n``, its alert webhook under ``k/alert/n``; the same on every
replay, so after a crash the journal answers instead of calling again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import ValidationError

from sluicegate.agents.journal import JournalEntry
from sluicegate.agents.models.contract import ToolCall
from sluicegate.agents.rollback.actions import (
    Block,
    Compensate,
    Finish,
    Notify,
    RollbackAction,
    Settle,
    Skip,
    alert_key,
    compensation_key,
)
from sluicegate.agents.runs.machine import Event, Idle, Transition, emit, with_status
from sluicegate.agents.runs.state import (
    EffectRecord,
    PendingApproval,
    Rollback,
    RunState,
    RunStatus,
)
from sluicegate.agents.tools import Tool

__all__ = [
    "ROLLBACK_STOPPED",
    "Block",
    "Compensate",
    "Finish",
    "Notify",
    "RollbackAction",
    "Settle",
    "SettledAs",
    "Skip",
    "after_compensation",
    "after_notify",
    "alert_key",
    "block",
    "compensation_arguments",
    "compensation_key",
    "decide_compensation",
    "finish",
    "in_rollback",
    "next_action",
    "refusal",
    "settle",
    "settled",
    "skip",
    "start_rollback",
]

SettledAs = Literal["issued", "done", "failed", "unknown"]
"""What the journal says of an effect a rollback settles (`settled`)."""

ROLLBACK_STOPPED = "rollback_stopped"
"""The reason of a run whose rollback a person stopped (rejected a compensation wait)."""


def in_rollback(state: RunState) -> bool:
    """Whether the run is rolling back, or waits for a person during a rollback."""
    if state.status is RunStatus.ROLLING_BACK:
        return True
    pending = state.pending_approval
    return (
        state.status is RunStatus.WAITING_APPROVAL
        and pending is not None
        and pending.kind == "compensation"
    )


def refusal(state: RunState, to_step: int) -> str | None:
    """Why run ``state`` cannot be rolled back to ``to_step``; None if it can."""
    if in_rollback(state):
        return f"run {state.run_id!r} is being rolled back already (to step {_to(state)})"
    if to_step < 0 or to_step >= state.step:
        return (
            f"run {state.run_id!r} is at step {state.step}: roll back to a step from 0 to "
            f"{max(0, state.step - 1)}"
        )
    if (
        state.status is RunStatus.ROLLED_BACK
        and state.rollback is not None
        and to_step >= state.rollback.to_step
    ):
        return (
            f"run {state.run_id!r} is rolled back to step {state.rollback.to_step} already: "
            "roll back to an earlier step to undo more"
        )
    return None


def start_rollback(
    state: RunState, to_step: int, by: str, reason: str | None, now: float
) -> Transition:
    """Safe point: queue the effects after ``to_step`` (latest first) and start undoing them.
    A pending call (not yet run, or waiting for approval) is dropped. Raises ``ValueError``
    with the `refusal` if there is one."""
    problem = refusal(state, to_step)
    if problem is not None:
        raise ValueError(problem)
    after = [e for e in state.effects if e.step > to_step and e.undone is None]
    queue = tuple(e.key for e in reversed(after) if e.status != "failed")
    rollback = Rollback(
        number=state.rollback.number + 1 if state.rollback is not None else 1,
        to_step=to_step,
        by=by,
        reason=reason,
        requested_at=now,
        was=state.status,
        queue=queue,
    )
    rolling = with_status(state, RunStatus.ROLLING_BACK).model_copy(
        update={
            "rollback": rollback,
            "pending_calls": (),
            "pending_approval": None,
            "updated_at": now,
        }
    )
    event: Event = {
        "type": "rollback_started",
        "to_step": to_step,
        "by": by,
        "reason": reason,
        "was": state.status.value,
        "effects": list(queue),
        "nothing_to_undo": [e.key for e in after if e.status == "failed"],
    }
    return emit(rolling, event)


def next_action(state: RunState, tools: Mapping[str, Tool]) -> RollbackAction:
    """What the rollback of ``state`` does next (`Idle` when it is not rolling back)."""
    rollback = state.rollback
    if rollback is None or not in_rollback(state):
        return Idle()
    if state.status is RunStatus.WAITING_APPROVAL:
        pending = state.pending_approval
        if rollback.notified or pending is None:
            return Idle()
        effect = _effect(state, pending.key)
        return Notify(effect, pending.problem or "", alert_key(effect.key, rollback.number))
    if not rollback.queue:
        return Finish()
    effect = _effect(state, rollback.queue[0])
    if rollback.failure is not None:
        return Block(effect, rollback.failure)
    if effect.status == "issued" and effect.key not in rollback.settled:
        return Settle(effect)
    if effect.status == "failed":
        return Skip(effect, "the effect failed: nothing to undo")
    if effect.status == "issued":
        return Skip(effect, "the call never started: nothing to undo")
    unknown = " (its outcome is unknown)" if effect.status == "unknown" else ""
    if effect.kind != "reversible" or effect.compensate is None:
        return Block(effect, f"{effect.tool} is {effect.kind}{unknown}: it has no compensation")
    tool = tools.get(effect.compensate)
    if tool is None:
        return Block(effect, f"the compensating tool {effect.compensate!r} is not among the tools")
    arguments = compensation_arguments(tool, effect)
    if isinstance(arguments, str):
        return Block(effect, f"cannot compensate {effect.tool}{unknown}: {arguments}")
    return Compensate(effect, tool, arguments, compensation_key(effect.key, rollback.number))


def compensation_arguments(tool: Tool, effect: EffectRecord) -> dict[str, Any] | str:
    """The arguments of ``tool`` to undo ``effect``, each parameter filled by name from the
    effect's result (when a dict), then from its arguments, and validated by the tool's
    schema; or what is wrong, as a string."""
    result = effect.result if isinstance(effect.result, dict) else {}
    values = {
        name: result[name] if name in result else effect.arguments[name]
        for name in tool.arguments.model_fields
        if name in result or name in effect.arguments
    }
    try:
        return tool.arguments.model_validate(values).model_dump(mode="json")
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        return f"arguments of {tool.name} cannot be filled from the effect: {problems}"


def settle(
    state: RunState,
    action: Settle,
    issued: JournalEntry | None,
    done: JournalEntry | None,
    now: float,
) -> Transition:
    """Safe point: what the journal holds of the effect. Its ``done`` settles it as ``done``
    or ``failed``; ``issued`` alone makes it ``unknown`` (the call started, its outcome was
    never recorded); neither leaves it ``issued``: the call never started."""
    if done is not None:
        return settled(
            state, action, "failed" if done.error is not None else "done", done.result, now
        )
    return settled(state, action, "issued" if issued is None else "unknown", None, now)


def settled(
    state: RunState, action: Settle, outcome: SettledAs, result: Any, now: float
) -> Transition:
    """`settle` once the journal was read: the effect is ``outcome``, with ``result`` when it
    is ``done`` or ``failed`` (the event carries both, so a replay rebuilds the effect)."""
    effect = action.effect
    if outcome in ("done", "failed"):
        effect = effect.model_copy(update={"status": outcome, "result": result})
    elif outcome == "unknown":
        effect = effect.model_copy(update={"status": "unknown"})
    rollback = _rollback(state)
    rollback = rollback.model_copy(update={"settled": (*rollback.settled, effect.key)})
    state = _replace_effect(state, effect).model_copy(
        update={"rollback": rollback, "updated_at": now}
    )
    event: Event = {"type": "effect_settled", "key": effect.key, "outcome": effect.status}
    return emit(state, event | {"result": effect.result})


def skip(state: RunState, action: Skip, now: float) -> Transition:
    state = _pop(state, now)
    event = {"type": "compensation", "effect": action.effect.key, "skipped": action.why}
    return emit(state, event | {"tool": action.effect.tool})


def after_compensation(
    state: RunState, action: Compensate, result: Any, error: str | None, now: float
) -> Transition:
    """Safe point: the compensation of ``action`` ran (``error``: it failed for good, and the
    next action blocks on it)."""
    event: Event = {
        "type": "compensation",
        "tool": action.tool.name,
        "key": action.key,
        "effect": action.effect.key,
        "arguments": action.arguments,
    }
    if error is not None:
        problem = f"the compensation {action.tool.name} ({action.key}) failed: {error}"
        rollback = _rollback(state).model_copy(update={"failure": problem})
        state = state.model_copy(update={"rollback": rollback, "updated_at": now})
        return emit(state, event | {"error": error})
    undone = action.effect.model_copy(update={"undone": "compensated"})
    state = _pop(_replace_effect(state, undone), now)
    return emit(state, event | {"result": result})


def block(state: RunState, action: Block, now: float, *, webhook: bool) -> Transition:
    """Safe point: the rollback waits for a person about ``action.effect``; the alert event
    ``compensation_needed`` carries the effect's tool, key and arguments. ``webhook``: an
    alert webhook is configured (`Notify` comes next; the event says so too)."""
    effect = action.effect
    call = ToolCall(id=effect.call_id, name=effect.tool, arguments=json.dumps(effect.arguments))
    pending = PendingApproval(
        call=call,
        key=effect.key,
        tool=effect.tool,
        arguments=effect.arguments,
        proposed_at=now,
        kind="compensation",
        problem=action.problem,
    )
    rollback = _rollback(state).model_copy(update={"notified": not webhook, "failure": None})
    waiting = with_status(state, RunStatus.WAITING_APPROVAL).model_copy(
        update={"pending_approval": pending, "rollback": rollback, "updated_at": now}
    )
    event: Event = {
        "type": "compensation_needed",
        "tool": effect.tool,
        "key": effect.key,
        "call_id": effect.call_id,
        "kind": effect.kind,
        "effect_status": effect.status,
        "arguments": effect.arguments,
        "problem": action.problem,
        "webhook": webhook,
    }
    return emit(waiting, event)


def after_notify(state: RunState, action: Notify, error: str | None, now: float) -> Transition:
    """Safe point: the alert webhook was called (``error``: it refused for good)."""
    rollback = _rollback(state).model_copy(update={"notified": True})
    state = state.model_copy(update={"rollback": rollback, "updated_at": now})
    event: Event = {"type": "alert_sent", "key": action.key, "effect": action.effect.key}
    if error is not None:
        event["error"] = error
    return emit(state, event)


def decide_compensation(
    state: RunState, approved: bool, by: str, reason: str | None, now: float
) -> Transition | None:
    """Safe point: a person decided on the effect the rollback waits on; None if it waits on
    none. Approved: handled by hand, the rollback goes on. Rejected: it stops here, the run
    ends ``failed`` with reason `ROLLBACK_STOPPED`."""
    pending = state.pending_approval
    if not in_rollback(state) or state.status is not RunStatus.WAITING_APPROVAL:
        return None
    assert pending is not None
    event: Event = {
        "type": "approval",
        "kind": "compensation",
        "approved": approved,
        "by": by,
        "reason": reason,
        "key": pending.key,
    }
    if approved:
        rolling = with_status(state, RunStatus.ROLLING_BACK)
        by_hand = _effect(state, pending.key).model_copy(update={"undone": "by_hand"})
        rolling = _pop(_replace_effect(rolling, by_hand), now)
        return emit(rolling.model_copy(update={"pending_approval": None}), event)
    stopped = with_status(state, RunStatus.FAILED).model_copy(
        update={"reason": ROLLBACK_STOPPED, "pending_approval": None, "updated_at": now}
    )
    return emit(stopped, event)


def finish(state: RunState, now: float) -> Transition:
    """Safe point: every effect after the step is undone; the run is ``rolled_back``."""
    rollback = _rollback(state)
    done = with_status(state, RunStatus.ROLLED_BACK).model_copy(
        update={
            "reason": f"rolled back to step {rollback.to_step}",
            "pending_calls": (),
            "pending_approval": None,
            "updated_at": now,
        }
    )
    return emit(done, {"type": "status", "to_step": rollback.to_step, "by": rollback.by})


def _to(state: RunState) -> int:
    return state.rollback.to_step if state.rollback is not None else -1


def _rollback(state: RunState) -> Rollback:
    if state.rollback is None:
        raise ValueError(f"run {state.run_id!r} has no rollback")
    return state.rollback


def _effect(state: RunState, key: str) -> EffectRecord:
    for effect in state.effects:
        if effect.key == key:
            return effect
    raise ValueError(f"run {state.run_id!r} has no effect {key!r}")


def _replace_effect(state: RunState, effect: EffectRecord) -> RunState:
    effects = tuple(effect if e.key == effect.key else e for e in state.effects)
    return state.model_copy(update={"effects": effects})


def _pop(state: RunState, now: float) -> RunState:
    """The state with the queue's head done with."""
    rollback = _rollback(state)
    rollback = rollback.model_copy(update={"queue": rollback.queue[1:], "failure": None})
    return state.model_copy(update={"rollback": rollback, "updated_at": now})

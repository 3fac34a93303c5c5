"""The `ForkRun` command a person's tool writes, built from the parent's events, sans-IO.

1. replay the parent's events (`agents.history.replay.replay`), which checks them;
2. take the state at the step boundary asked for (`agents.history.replay.settled_at`),
   refusing a step the run never settled at;
3. apply the patch (`agents.fork.patch.apply_patch`) and check the seed as the agent will;
4. for a recorded-only fork, carry the parent's tool calls after that step, so the fork can
   answer a call the parent made with what it answered then;
5. carry the parent's blob ids at that step whose handles the (patched) seed still holds, so
   the fork resolves them.

A run that was rolled back forks from a step up to the (earliest) rollback's ``to_step``
only: the state there is the history before the rollback, with every effect of it standing.
A later step's conversation tells of effects the rollback undid, so it is refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from sluicegate.agents.exceptions import ForkRefusedError
from sluicegate.agents.fork.patch import (
    ForkPatch,
    ForkSeedError,
    apply_patch,
    check_seed,
    describe_patch,
    seed_handles,
)
from sluicegate.agents.history.replay import replay, settled_at
from sluicegate.agents.messages import MAX_FORK_MESSAGES, ForkRun
from sluicegate.agents.models.contract import ChatMessage
from sluicegate.agents.runs.state import RecordedCall, RunState, RunStatus

__all__ = ["fork_request", "new_fork_id"]


def new_fork_id(parent_run_id: str) -> str:
    """A fresh run id for a fork of ``parent_run_id``."""
    return f"{parent_run_id[:150]}.fork-{uuid.uuid4().hex[:12]}"


def fork_request(
    history: Sequence[dict[str, Any]],
    from_step: int,
    *,
    run_id: str,
    patch: ForkPatch | None = None,
    recorded_only: bool = False,
    by: str = "unknown",
) -> ForkRun:
    """The command forking the run of ``history`` after ``from_step`` (see module doc).

    Raises:
        HistoryError: the events do not replay.
        ForkRefusedError: the run never settled at ``from_step``, or the patch does not fit.
    """
    states = replay(history)
    parent = states[-1].state.run_id if states else "?"
    undone_after = min(
        (r.event["to_step"] for r in states if r.event["type"] == "rollback_started"),
        default=None,
    )
    if undone_after is not None and from_step > undone_after:
        raise ForkRefusedError(
            parent,
            from_step,
            f"the run was rolled back to step {undone_after}: the effects of the steps after "
            "it were undone, so its conversation there no longer says what happened",
            f"fork after a step from 0 to {undone_after} (the history before the rollback)",
        )
    state = settled_at(states, from_step)
    if state is None:
        boundaries = sorted(
            {
                r.state.step
                for r in states
                if r.state.status is RunStatus.RUNNING
                and not r.state.pending_calls
                and r.state.pending_approval is None
            }
        )
        raise ForkRefusedError(
            parent,
            from_step,
            "the run never settled at that step (it ended there, never got that far, or "
            "waited inside it)",
            f"fork after one of the steps {boundaries} (`sluicegate runs replay RUN`)",
        )
    goal, messages = state.goal, state.messages
    if patch is not None:
        try:
            goal, messages = apply_patch(goal, messages, patch)
        except ValueError as exc:
            raise ForkRefusedError(parent, from_step, str(exc), "fix the patch") from None
    try:
        check_seed(run_id, messages, from_step)
    except ForkSeedError as exc:
        raise ForkRefusedError(parent, from_step, exc.reason, "fix the patch") from None
    recorded: list[RecordedCall] = []
    if recorded_only:
        recorded = [
            RecordedCall(
                step=r.event["step"],
                tool=r.event["tool"],
                arguments=r.event["arguments"],
                result=r.event["result"],
                error=r.event["error"],
            )
            for r in states
            if r.event["type"] == "tool" and r.event["step"] > from_step
        ][:MAX_FORK_MESSAGES]
    try:
        note = None if patch is None else describe_patch(patch)
        command = _command(
            state, goal, messages, run_id, from_step, recorded, recorded_only, by, note
        )
        # Every tool the parent was offered, after the step too: its recorded decisions
        # may call any of them, and a fork refuses the ones gone since by name.
        offered = states[-1].state.offered_tools if states else state.offered_tools
        # The memory of the run's key as of the step: entries written up to this moment.
        update = {"offered_tools": dict(offered), "memory_as_of": state.updated_at}
        return command.model_copy(update=update)
    except ValidationError as exc:
        raise ForkRefusedError(
            parent, from_step, f"not a valid fork: {exc}", "see the error"
        ) from None


def _command(
    state: RunState,
    goal: str,
    messages: tuple[ChatMessage, ...],
    run_id: str,
    from_step: int,
    recorded: list[RecordedCall],
    recorded_only: bool,
    by: str,
    note: str | None,
) -> ForkRun:
    return ForkRun(
        run_id=run_id,
        parent_run_id=state.run_id,
        from_step=from_step,
        goal=goal,
        messages=messages,
        usage=state.usage,
        budget=state.budget,
        metadata=dict(state.metadata),
        recorded_only=recorded_only,
        recorded=tuple(recorded),
        by=by,
        note=note,
        blobs=tuple(b for b in state.blobs if b in seed_handles(messages)),
    )

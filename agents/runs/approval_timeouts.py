"""`ApprovalTimeouts`: when a call waiting for a person's decision times out, and what then.

An agent's ``approval_timeout_s`` (None: wait for ever) runs from the moment the call was
proposed. When it is up, the run's next wake-up either rejects the call (``reject``, as if a
person had said no, ``by: timeout``) or fails the run (``fail``, reason
``approval_timeout``). Compensations waiting for approval never time out: only a person
decides them. Pure apart from the clock it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from sluicegate.agents.runs import machine
from sluicegate.agents.runs.state import RunState, RunStatus

__all__ = ["ApprovalTimeouts"]


class ApprovalTimeouts:
    """The approval timeout rule of one agent."""

    def __init__(
        self,
        timeout_s: float | None,
        on_timeout: Literal["reject", "fail"],
        clock: Callable[[], float],
    ) -> None:
        self.timeout_s, self.on_timeout, self._clock = timeout_s, on_timeout, clock

    def remaining(self, state: RunState) -> float | None:
        """Seconds until the run's pending approval times out (None: it does not)."""
        pending = state.pending_approval
        if self.timeout_s is None or pending is None or pending.kind == "compensation":
            return None
        return self.remaining_since(pending.proposed_at)

    def remaining_since(self, proposed_at: float) -> float | None:
        """Seconds until a call proposed at ``proposed_at`` times out (None: no timeout)."""
        if self.timeout_s is None:
            return None
        return max(0.0, proposed_at + self.timeout_s - self._clock())

    def expire(self, state: RunState, now: float) -> machine.Transition | None:
        """The run's timeout transition if its pending approval has timed out, else None."""
        delay = self.remaining(state)
        if delay is None or delay > 0 or state.status is not RunStatus.WAITING_APPROVAL:
            return None
        if self.on_timeout == "fail":
            return machine.fail(state, "approval_timeout", now)
        reason = f"no decision within {self.timeout_s} s"
        return machine.decide_approval(state, "", False, "timeout", reason, now)

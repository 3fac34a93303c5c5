"""The recovering phase of a job, sans-IO: when the next attempt starts.

`Recovery` is told of failures, rebalances, stops and the job running again, with times from
the coordinator's clock, and answers what to do:

* a failure asks the `RestartPolicy`: `RecoverAt` (start the next attempt once its delay has
  passed) or `GiveUp` (fail the job). A failure while a recovery is already due adds nothing:
  the next attempt recovers from both;
* a rebalance (a worker joined) recovers at once, without the policy: nothing failed;
* a stop cancels the recovery that is due (a stop recovers nothing);
* `due(now)` says, once, that the next attempt starts now.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from sluicegate.coordinator.restart import GiveUp, RestartPolicy

__all__ = ["RecoverAt", "Recovery"]


@dataclass(frozen=True, slots=True)
class RecoverAt:
    """Start the next attempt at ``at`` (the coordinator's clock)."""

    at: float


class Recovery:
    """When the next attempt starts; see the module docstring."""

    def __init__(self, policy: RestartPolicy) -> None:
        self._policy = policy
        self._at: float | None = None

    @property
    def at(self) -> float | None:
        """When the recovery that is due starts the next attempt (None: none is due)."""
        return self._at

    @property
    def pending(self) -> bool:
        """A recovery is due (now or later): the job has no running attempt to assign."""
        return self._at is not None

    def on_failure(self, now: float) -> RecoverAt | GiveUp | None:
        """A failure of the running attempt; None if a recovery is already due."""
        if self._at is not None:
            return None
        decision = self._policy.on_failure(now)
        if isinstance(decision, GiveUp):
            return decision
        self._at = now + decision.delay_seconds
        return RecoverAt(self._at)

    def rebalance(self, now: float) -> None:
        """Recover at once to place the subtasks again (nothing failed)."""
        self._at = now

    def cancel(self) -> None:
        """A stop: no recovery is due any more."""
        self._at = None

    def due(self, now: float) -> bool:
        """True once when the next attempt starts now."""
        if self._at is None or now < self._at:
            return False
        self._at = None
        return True

    def waiting_for(self, now: float) -> str | None:
        """What the recovery waits for while its restart delay runs (None: it does not)."""
        at = self._at
        if at is None or at <= now:
            return None
        until = datetime.fromtimestamp(time.time() + at - now, UTC).strftime("%H:%M:%S UTC")
        return f"the restart delay: the next attempt starts in {at - now:.1f} s, at {until}"

    def on_running(self, now: float) -> None:
        """The new attempt runs (the policy counts a stable run from now)."""
        self._policy.on_running(now)

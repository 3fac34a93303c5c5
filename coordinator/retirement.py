"""Phase one of a new attempt: every live worker retires its older subtasks before any is
assigned. Sans-IO: fed the live workers' slots, their `Retired` answers and the clock.

Why: a recovery (or a rebalance) may move subtask X from worker A to worker B. A lets the
calls X is running finish before it cancels X (its ``retire_seconds``), so an agent's tool call
in flight is journaled, not cut off. Had B started X meanwhile, X's successor would re-drive
the run, find the call ``issued`` without ``done``, and call it again (or park the run as
``outcome_unknown``). So the coordinator sends `Retire(A)` first and assigns attempt A only
once every live worker answered `Retired(A)`.

`RetireGate.ready` answers, each tick, which workers attempt A may be assigned to:

* every live worker answered: all of them;
* some did not, and ``deadline`` has not passed: none yet (wait);
* the deadline passed: those that answered (a worker still silent is stuck or cut off from
  the control topics; it gets nothing, and its subtasks may still be running: the one case
  where an effect in flight can be repeated, logged by the caller).

A worker that joins while the gate is open answers at once (it runs nothing); `waiting_for`
names the workers to send `Retire` again (the message is idempotent).

``settle_seconds`` (a coordinator's first attempt only): the gate also waits that long after
the first live worker is seen, so workers started together are all heard before the first
placement. Without it, a worker whose first heartbeat came a few milliseconds after another's
with enough slots was left out, and the first completed checkpoint rebalanced: a second
attempt seconds after the start, a restart in the job's counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["RetireGate"]


@dataclass(slots=True)
class RetireGate:
    """Attempt ``attempt``'s phase one, open until ``deadline`` (clock seconds)."""

    attempt: int
    deadline: float
    settle_seconds: float = 0.0
    retired: set[str] = field(default_factory=set)
    first_seen: float | None = None
    """When `ready` first saw a live worker."""

    def on_retired(self, worker: str, attempt: int) -> None:
        """``worker`` answered `Retired(attempt)` (an answer for another attempt is stale)."""
        if attempt == self.attempt:
            self.retired.add(worker)

    def waiting_for(self, alive: Mapping[str, int]) -> list[str]:
        """The live workers that have not answered yet."""
        return sorted(w for w in alive if w not in self.retired)

    def ready(self, alive: Mapping[str, int], now: float) -> dict[str, int] | None:
        """The slots (worker -> slots) attempt ``attempt`` may use now, or None to wait."""
        if alive and self.first_seen is None:
            self.first_seen = now
        if self.first_seen is None or now < self.first_seen + self.settle_seconds:
            return None
        if now < self.deadline and (len(self.retired) < len(alive) or self.waiting_for(alive)):
            return None  # fewer answers than live workers: one of them has not answered
        return {w: slots for w, slots in alive.items() if w in self.retired}

"""How long periodic checkpoints pause after checkpoint storage failed, sans-IO.

A storage failure aborts the checkpoint in flight and the job runs on (its subtasks keep their
state; nothing is recovered). Checkpoints then pause for a delay that doubles with each failure
in a row, from ``initial_seconds`` up to ``max_seconds``, so a storage outage costs aborted
checkpoints and alerts, not a storm of uploads or a global recovery; a completed checkpoint
resets the delay.
"""

from __future__ import annotations

__all__ = ["StorageBackoff"]


class StorageBackoff:
    """Failures in a row and the time until which periodic checkpoints wait."""

    def __init__(self, *, initial_seconds: float = 0.5, max_seconds: float = 30.0) -> None:
        self._initial = initial_seconds
        self._max = max_seconds
        self.failures = 0
        self._until: float | None = None

    def failed(self, now: float) -> float:
        """Storage failed at ``now``: the delay before the next periodic checkpoint."""
        delay: float = min(self._initial * 2.0**self.failures, self._max)
        self.failures += 1
        self._until = now + delay
        return delay

    def succeeded(self) -> None:
        """A checkpoint completed: storage works again."""
        self.failures = 0
        self._until = None

    def waiting(self, now: float) -> bool:
        """Periodic checkpoints wait at ``now``."""
        return self._until is not None and now < self._until

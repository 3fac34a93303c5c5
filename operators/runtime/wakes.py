"""Wake-ups: calls of `Operator.on_wake` an operator asked for, kept in due order.

Not durable on purpose: an operator derives them from its state again in `Operator.open`, so
a restore never runs a wake-up its restored state does not call for.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

__all__ = ["BUSY_POLL_MS", "WakeQueue", "WakeUp", "poll_timeout_ms"]

BUSY_POLL_MS = 2
"""How long a fetch may wait while calls are in flight: each may queue a wake-up as it
returns (an agent's next step), which runs only after the fetch."""


@dataclass(frozen=True, slots=True)
class WakeUp:
    """Call `Operator.on_wake` for ``key`` of ``topic[partition]`` at ``due`` (monotonic)."""

    topic: str
    partition: int
    key: bytes
    due: float


class WakeQueue:
    """Wake-ups by due time; equal times keep their order of arrival."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, WakeUp]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, wake: WakeUp) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (wake.due, self._seq, wake))

    def next_due(self) -> float | None:
        """When the earliest wake-up is due (None: none is queued)."""
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[WakeUp]:
        """Remove and return every wake-up due at ``now``, earliest first."""
        due: list[WakeUp] = []
        while self._heap and self._heap[0][0] <= now:
            due.append(heapq.heappop(self._heap)[2])
        return due


def poll_timeout_ms(fetch_ms: int, *, busy: bool, next_wake: float | None, now: float) -> int:
    """How long a subtask's fetch may wait for records: ``fetch_ms``, at most `BUSY_POLL_MS`
    while calls are in flight (``busy``), and no longer than until ``next_wake`` is due (all
    times monotonic seconds). Due wake-ups run between fetches, so an idle subtask used to
    run an agent's next step up to ``fetch_ms`` late, step after step."""
    wait = min(fetch_ms, BUSY_POLL_MS) if busy else fetch_ms
    if next_wake is not None:
        wait = min(wait, max(0, math.ceil((next_wake - now) * 1000)))
    return wait

"""Wake-ups: calls of `Operator.on_wake` an operator asked for, kept in due order.

Not durable on purpose: an operator derives them from its state again in `Operator.open`, so
a restore never runs a wake-up its restored state does not call for.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

__all__ = ["WakeQueue", "WakeUp"]


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

    def pop_due(self, now: float) -> list[WakeUp]:
        """Remove and return every wake-up due at ``now``, earliest first."""
        due: list[WakeUp] = []
        while self._heap and self._heap[0][0] <= now:
            due.append(heapq.heappop(self._heap)[2])
        return due

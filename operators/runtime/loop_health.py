"""Is a worker's event loop still turning? The answer of its ``/healthz``.

A worker's metrics are served from a thread (`operators.runtime.metrics_server`), which keeps
answering while the asyncio loop that runs the subtasks is stuck (a synchronous process
function that never returns, a deadlock): an answer from that thread alone proves nothing.
`LoopHealth.run` is a task on the worker's loop that marks the time every ``tick_seconds``;
`LoopHealth.report`, called from the serving thread, is healthy while the last mark is younger
than ``stale_after_seconds``. Kubernetes' liveness probe restarts a worker whose loop stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["HealthReport", "LoopHealth"]


@dataclass(frozen=True, slots=True)
class HealthReport:
    """How long ago the loop last turned, and whether that is recent enough."""

    healthy: bool
    loop_age_seconds: float


class LoopHealth:
    """Marks made on the event loop, read from any thread (a float is written atomically)."""

    def __init__(
        self,
        *,
        stale_after_seconds: float = 30.0,
        tick_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stale_after_seconds = stale_after_seconds
        self._tick_seconds = tick_seconds
        self._clock = clock
        self._last = clock()

    def mark(self) -> None:
        """The loop turned now."""
        self._last = self._clock()

    def report(self) -> HealthReport:
        """Healthy while the last mark is younger than ``stale_after_seconds``."""
        age = max(self._clock() - self._last, 0.0)
        return HealthReport(healthy=age < self.stale_after_seconds, loop_age_seconds=age)

    async def run(self) -> None:
        """Mark every ``tick_seconds`` until cancelled (run it on the loop to watch)."""
        while True:
            self.mark()
            await asyncio.sleep(self._tick_seconds)

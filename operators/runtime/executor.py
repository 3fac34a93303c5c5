"""Running async process functions concurrently across keys, in order within a key.

At most ``max_in_flight`` records are in flight; `submit` waits for a free slot, which stops
the subtask from fetching more (the effect of pausing its partitions). `drain` waits for every
record in flight: the synchronous phase of a checkpoint runs only after it, so a snapshot never
holds half of a record's effects. `retire` lets the calls already running finish, within a
bound, and starts no other (the subtask is being replaced: an effect in flight must finish and
be journaled rather than be cut off and repeated by the next attempt).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

__all__ = ["KeyedExecutor"]


class KeyedExecutor:
    """Per-key ordered, bounded concurrent execution of coroutines."""

    def __init__(self, max_in_flight: int) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        self._slots = asyncio.Semaphore(max_in_flight)
        self._tails: dict[bytes | None, asyncio.Task[None]] = {}
        self._failure: BaseException | None = None
        self._started: set[asyncio.Task[None]] = set()
        self._retiring = False

    @property
    def in_flight(self) -> int:
        return len(self._tails)

    async def submit(self, key: bytes | None, work: Callable[[], Awaitable[None]]) -> None:
        """Start ``work`` after the work already submitted for ``key``."""
        self.raise_failure()
        await self._slots.acquire()
        previous = self._tails.get(key)
        task = asyncio.create_task(self._run(key, previous, work))
        self._tails[key] = task

    async def drain(self) -> None:
        """Wait until nothing is in flight; re-raise the first failure."""
        while self._tails:
            await asyncio.gather(*self._tails.values(), return_exceptions=True)
        self.raise_failure()

    def raise_failure(self) -> None:
        """Re-raise the first exception a piece of work raised, if any."""
        if self._failure is not None:
            raise self._failure

    async def retire(self, timeout_s: float) -> int:
        """Start no more work; wait up to ``timeout_s`` for the calls already running (not the
        ones queued behind them) and return how many were still running then."""
        self._retiring = True
        running = [task for task in self._started if not task.done()]
        if running and timeout_s > 0:
            await asyncio.wait(running, timeout=timeout_s)
        return sum(not task.done() for task in running)

    async def cancel(self) -> None:
        """Cancel everything in flight (the subtask is stopping)."""
        tasks = list(self._tails.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tails.clear()

    async def _run(
        self,
        key: bytes | None,
        previous: asyncio.Task[None] | None,
        work: Callable[[], Awaitable[None]],
    ) -> None:
        current = asyncio.current_task()
        try:
            if previous is not None:
                await asyncio.wait({previous})
            if self._retiring:
                return  # being replaced: what has not started never starts
            assert current is not None
            self._started.add(current)
            await work()
        except Exception as exc:  # noqa: BLE001 - kept and re-raised by drain()
            if self._failure is None:
                self._failure = exc
        finally:
            self._started.discard(current)
            self._slots.release()
            if self._tails.get(key) is current:
                del self._tails[key]

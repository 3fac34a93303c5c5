"""Retiring the executor: calls already running finish (within a bound), queued ones never
start: an agent's effect in flight is journaled instead of being cut off by a recovery."""

from __future__ import annotations

import asyncio

from sluicegate.operators.runtime.executor import KeyedExecutor


async def test_running_calls_finish_and_queued_ones_never_start() -> None:
    executor = KeyedExecutor(max_in_flight=8)
    log: list[str] = []
    release = asyncio.Event()

    async def call(name: str) -> None:
        log.append(f"{name} started")
        await release.wait()
        log.append(f"{name} finished")

    await executor.submit(b"k", lambda: call("first"))
    await executor.submit(b"k", lambda: call("queued"))  # behind "first", same key
    await executor.submit(b"j", lambda: call("other key"))
    await asyncio.sleep(0)  # let the two heads start
    asyncio.get_running_loop().call_later(0.05, release.set)
    assert await executor.retire(timeout_s=5) == 0
    await executor.drain()
    assert sorted(log) == ["first finished", "first started", "other key finished",
                           "other key started"]  # fmt: skip


async def test_a_call_running_past_the_bound_is_reported() -> None:
    executor = KeyedExecutor(max_in_flight=2)
    await executor.submit(None, lambda: asyncio.sleep(60))
    await asyncio.sleep(0)
    assert await executor.retire(timeout_s=0.05) == 1
    await executor.cancel()

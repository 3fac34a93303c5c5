"""Clients whose `start()` is cancelled leave no connection open.

aiokafka 0.14 leaked the bootstrap connection of a client whose start was cancelled while it
asked for metadata; the warning surfaced at garbage collection, in whichever test ran then.
`operators.kafka.clients` builds clients that let the bootstrap finish first
(`_bootstrap_closing`). Cancels land at random moments of the start, seeded so a failure
repeats; without that fix about one start in ten left a connection open.
"""

from __future__ import annotations

import asyncio
import gc
import random
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from sluicegate.operators.kafka import clients

pytestmark = pytest.mark.asyncio


async def _start_then_cancel(client: Any, delay: float) -> None:
    async def run() -> None:
        try:
            await client.start()
            await asyncio.sleep(30)
        finally:
            close = getattr(client, "stop", None) or client.close
            await close()

    task = asyncio.create_task(run())
    await asyncio.sleep(delay)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize(
    "build",
    [clients.consumer, clients.producer, clients.admin],
    ids=["consumer", "producer", "admin"],
)
async def test_a_start_cancelled_at_any_moment_leaves_no_connection_open(
    kafka_bootstrap: str, build: Callable[[str], Any]
) -> None:
    rng = random.Random(17)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(60):
            await _start_then_cancel(build(kafka_bootstrap), rng.uniform(0, 0.01))
        gc.collect()
    unclosed = [str(w.message) for w in caught if "Unclosed" in str(w.message)]
    assert unclosed == []

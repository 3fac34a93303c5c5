"""A worker's ``/healthz``: 200 while its event loop turns, 503 while the loop is blocked (the
metrics thread alone still answers), 200 again once it turns; and the age arithmetic."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from prometheus_client import CollectorRegistry

from sluicegate.operators.runtime.loop_health import LoopHealth
from sluicegate.operators.runtime.metrics_server import MetricsServer


def _get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _hold_the_loop(seconds: float) -> None:
    """What a process function that never yields does to the worker's loop."""
    time.sleep(seconds)


def test_stale_after_the_threshold_and_fresh_after_a_mark() -> None:
    now = [100.0]
    health = LoopHealth(stale_after_seconds=30, clock=lambda: now[0])
    assert health.report().healthy
    now[0] = 129.9
    assert health.report().healthy
    now[0] = 130.0
    report = health.report()
    assert not report.healthy
    assert report.loop_age_seconds == 30.0
    health.mark()
    assert health.report().healthy


async def test_healthz_fails_while_the_loop_is_blocked_and_recovers() -> None:
    health = LoopHealth(stale_after_seconds=0.5, tick_seconds=0.05)
    server = MetricsServer.start("127.0.0.1", 0, CollectorRegistry(), health=health)
    url = server.url.replace("/metrics", "/healthz")
    ticks = asyncio.create_task(health.run())
    answers: list[tuple[int, dict[str, Any]]] = []
    try:
        await asyncio.sleep(0.2)
        assert (await asyncio.to_thread(_get, url))[0] == 200

        # A synchronous call holds the loop; the probe asks from another thread meanwhile.
        def probe() -> None:
            time.sleep(1.0)
            answers.append(_get(url))

        prober = threading.Thread(target=probe)
        prober.start()
        _hold_the_loop(1.5)
        prober.join()

        await asyncio.sleep(0.2)  # the loop turns again
        after = await asyncio.to_thread(_get, url)
        metrics = await asyncio.to_thread(urllib.request.urlopen, server.url, timeout=10)
        assert metrics.status == 200  # /metrics is unchanged
        metrics.close()
    finally:
        ticks.cancel()
        server.stop()
    [(status, body)] = answers
    assert status == 503
    assert body["status"] == "stuck"
    assert body["loop_age_seconds"] >= 0.5
    assert after[0] == 200
    assert after[1]["status"] == "ok"

"""faust's page views per minute (a tumbling and a hopping windowed table, relative to the
stream) run by sluicegate on a real broker, crashed and restored after each part of the input:
a read_committed consumer sees, per page and per window, the counts 1..n exactly once, n the
views whose Kafka timestamps fall in that window.

Crashes cancel every task of the job at once (as a SIGKILL would), at a random point of the
checkpoint cycle after each part of the input.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.faust_adapter import pipeline_of
from sluicegate.operators.kafka import clients as kafka_clients
from sluicegate.operators.storage import open_storage
from sluicegate.testing import read_committed
from tests.faust_apps import pageviews

PAGES = [f"page-{i:02d}" for i in range(12)]
B = (int(time.time()) // 60 - 30) * 60
"""A minute's start, in seconds: half an hour ago. Not a fixed date: the broker deletes
records whose timestamps are older than its retention (7 days) at its next check, under
the test's feet."""


async def produce_views(bootstrap: str, topic: str, views: list[tuple[str, int]]) -> None:
    """Each view keyed by its page, with its own Kafka timestamp (milliseconds)."""
    producer = kafka_clients.producer(bootstrap, enable_idempotence=True, linger_ms=5)
    try:
        await producer.start()
        for page, at_ms in views:
            await producer.send(topic, json.dumps(page).encode(), key=page.encode(),
                                timestamp_ms=at_ms)  # fmt: skip
        await producer.flush()
    finally:
        await producer.stop()


async def test_views_per_window_are_exact_across_crashes(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    app = pageviews.make_app(tag, expires=24 * 3600.0)
    graph = pipeline_of(app, modules=[pageviews], parallelism=2).build()
    rng = random.Random(33)
    # 10 minutes of views, in time order per part as a live topic has them
    views = sorted(
        ((rng.choice(PAGES), B * 1000 + rng.randrange(600_000)) for _ in range(3000)),
        key=lambda view: view[1],
    )
    parts = [views[:1000], views[1000:2000], views[2000:]]
    per_minute = Counter((page, at // 60_000 * 60) for page, at in views)
    storage = open_storage(tmp_path / "storage")

    def job() -> LocalJob:
        return LocalJob(
            graph, bootstrap=kafka_bootstrap, storage=storage, work_dir=tmp_path / "work",
            settings=CoordinatorSettings(interval_seconds=0.5),
        )  # fmt: skip

    running = job()
    await running.start()
    restored: list[int] = []
    for part in parts:
        await produce_views(kafka_bootstrap, f"views-{tag}", part)
        await running.wait_for_checkpoints(rng.randint(1, 2), timeout_s=120)
        await asyncio.sleep(rng.uniform(0, 0.6))  # where in the cycle to crash, not a wait
        await running.crash()
        running = job()
        await running.start()
        assert running.restored_from is not None
        restored.append(running.restored_from)
    assert restored == sorted(set(restored))

    topic = f"view-counts-{tag}"
    await read_committed(kafka_bootstrap, topic, len(views), timeout_s=300)
    running.raise_failure()
    await running.wait_for_checkpoints(running.completed + 1, timeout_s=60)
    records = await read_committed(kafka_bootstrap, topic, len(views) + 1, timeout_s=5)
    await running.crash()

    minutes: dict[tuple[str, int], list[int]] = defaultdict(list)
    hops: dict[tuple[str, int], list[int]] = defaultdict(list)
    for r in records:
        count = pageviews.PageCount.loads(r.value)
        minute = int(count.viewed_at // 60 * 60)
        minutes[count.page, minute].append(count.minute)
        hops[count.page, minute].append(count.two_minutes)
    assert len(records) == len(views)
    assert {w: sorted(c) for w, c in minutes.items()} == {
        w: list(range(1, n + 1)) for w, n in per_minute.items()
    }
    # the hopping window [m, m + 2 min) read at a view of minute m holds that minute's views only
    # (the next minute's have not come yet: views are in time order per page's partition)
    assert {w: sorted(c) for w, c in hops.items()} == {
        w: list(range(1, n + 1)) for w, n in per_minute.items()
    }
    assert all(c == sorted(c) for c in minutes.values())  # one partition per page: in order

"""Restore fallbacks on the real broker: the coordinator and its workers in this event loop.

A shared file of the newest checkpoint deleted from storage makes the restore of a fresh worker
(no local copy) fail; the coordinator marks that checkpoint corrupt, falls back to the one
before, and the word count's final counts are still exact (falling back behind the last
published checkpoint republishes what was replayed: the sink holds every count at least once,
and the final count of each word is right)."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter
from pathlib import Path

from prometheus_client import CollectorRegistry

from sluicegate.coordinator.metrics import CoordinatorCollector
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.runtime.worker import Worker
from sluicegate.operators.runtime.worker_settings import WorkerSettings
from sluicegate.operators.storage import Storage, open_storage
from sluicegate.operators.storage.manifest import ManifestStore
from sluicegate.testing import produce_lines, word_count
from tests.helpers import assert_final_counts_at_least_once, sst_new_in_latest, wait_for

WORDS = [f"w{i}" for i in range(12)]


def worker(name: str, tag: str, bootstrap: str, storage: Storage, tmp_path: Path) -> Worker:
    # Its own folder (tmp_path / name): no local copy of another worker's state.
    settings = WorkerSettings(worker_id=name, slots=4, state_dir=tmp_path, heartbeat_seconds=0.3)
    return Worker(word_count(tag), settings, bootstrap=bootstrap, storage=storage)


def alive(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        assert not task.done(), f"{task.get_name()} ended: {task}"


async def test_a_missing_checkpoint_file_falls_back_to_the_previous_checkpoint(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    rng = random.Random(5)
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag)
    await ensure_topics(kafka_bootstrap, graph)
    storage = open_storage(tmp_path / "storage")
    manifests = ManifestStore(storage)
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(1, 3))) for _ in range(3000)]
    expected = Counter(w for line in lines for w in line.split())
    coordinator = Coordinator(
        graph,
        bootstrap=kafka_bootstrap,
        storage=storage,
        settings=CoordinatorSettings(interval_seconds=0.3, heartbeat_timeout_seconds=3),
    )
    registry = CollectorRegistry()
    registry.register(CoordinatorCollector(coordinator))
    first = worker("w1", tag, kafka_bootstrap, storage, tmp_path)
    tasks = [
        asyncio.create_task(coordinator.run(), name="coordinator"),
        asyncio.create_task(first.run(), name="w1"),
    ]
    try:
        # Input keeps arriving, so checkpoints hold new SST files.
        for start in range(0, 1500, 100):
            await produce_lines(kafka_bootstrap, f"lines-{tag}", lines[start : start + 100])
            await asyncio.sleep(0.1)  # pacing the input, not waiting for a condition

        async def three_checkpoints() -> bool:
            alive(tasks)
            return len(await manifests.completed()) >= 3

        await wait_for(three_checkpoints, timeout_s=90, what="three checkpoints")
        w1 = tasks.pop()
        w1.cancel()  # the worker dies: no more checkpoints complete
        await asyncio.gather(w1, return_exceptions=True)

        newest = await manifests.latest()
        assert newest is not None
        victim = await sst_new_in_latest(manifests)
        await storage.delete(victim.path)

        second = worker("w2", tag, kafka_bootstrap, storage, tmp_path)
        tasks.append(asyncio.create_task(second.run(), name="w2"))
        await produce_lines(kafka_bootstrap, f"lines-{tag}", lines[1500:])

        async def marked_corrupt() -> bool:
            alive(tasks)
            return newest.checkpoint_id in await manifests.corrupt()

        await wait_for(marked_corrupt, timeout_s=90, what="the checkpoint marked corrupt")
        fallbacks = registry.get_sample_value(
            "sluicegate_restore_fallbacks_total", {"pipeline": graph.name}
        )
        assert fallbacks == 1

        await assert_final_counts_at_least_once(
            kafka_bootstrap, f"counts-{tag}", expected, deadline=time.monotonic() + 120
        )
        assign = coordinator.facts().assign
        assert assign is not None
        assert assign.restore_from is not None
        assert assign.restore_from < newest.checkpoint_id
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

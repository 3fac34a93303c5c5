"""Regression (issue 12, item 1): a coordinator crash alone restarted the job (a new attempt
cancelled every subtask, cutting off calls in flight). Now a restarted coordinator adopts the
attempt its workers still run: no subtask restarts, checkpoints go on, counts stay exact."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from pathlib import Path

from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.runtime.worker import Worker
from sluicegate.operators.runtime.worker_settings import WorkerSettings
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.manifest import ManifestStore
from sluicegate.testing import produce_lines, read_committed, word_count
from tests.helpers import assert_counted_exactly_once, wait_for


async def test_a_restarted_coordinator_adopts_the_running_attempt(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    rng = random.Random(12)
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag)
    await ensure_topics(kafka_bootstrap, graph)
    storage = open_storage(tmp_path / "storage")
    settings = CoordinatorSettings(interval_seconds=0.3, heartbeat_timeout_seconds=5)
    workers = [
        Worker(
            graph,
            WorkerSettings(worker_id=f"w{i}", slots=2, state_dir=tmp_path, heartbeat_seconds=0.3),
            bootstrap=kafka_bootstrap,
            storage=storage,
        )
        for i in (1, 2)
    ]
    lines = [" ".join(rng.choices(["a", "b", "c", "d"], k=3)) for _ in range(4000)]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    first = Coordinator(graph, bootstrap=kafka_bootstrap, storage=storage, settings=settings)
    first_task = asyncio.create_task(first.run())
    second: asyncio.Task[None] | None = None
    try:
        await produce_lines(kafka_bootstrap, f"lines-{tag}", lines[:2000])
        await wait_for(
            lambda: first.facts().checkpoints.completed >= 2, timeout_s=60, what="2 checkpoints"
        )
        attempt = first.facts().attempt
        first_assign = first.facts().assign
        assert first_assign is not None
        restored_from = first_assign.restore_from
        hosted = {w.worker_id: dict(w.subtasks) for w in workers}
        first_task.cancel()  # the coordinator dies; the workers do not
        await asyncio.gather(first_task, return_exceptions=True)

        await produce_lines(kafka_bootstrap, f"lines-{tag}", lines[2000:])
        restarted = Coordinator(
            graph, bootstrap=kafka_bootstrap, storage=storage, settings=settings
        )
        second = asyncio.create_task(restarted.run())

        def restarted_checkpoints() -> bool:
            assert not second.done(), second  # the restarted coordinator must keep running
            return restarted.facts().checkpoints.completed >= 5

        await wait_for(restarted_checkpoints, timeout_s=60, what="5 checkpoints after the restart")
        facts = restarted.facts()
        assert facts.attempt == attempt, "the restarted coordinator took a new attempt"
        # Issue 28: the adopted attempt restores what the first one restored (its stored plan),
        # not the newest checkpoint at adoption, so retention keeps what it keeps without one.
        assert facts.assign is not None
        assert facts.assign.restore_from == restored_from
        manifests = ManifestStore(storage)

        async def retention_keeps_its_count() -> bool:  # between two completions: exactly keep
            return len(await manifests.retained()) == settings.keep_checkpoints

        await wait_for(retention_keeps_its_count, timeout_s=30, what="3 checkpoints kept")
        assert [w.attempt for w in workers] == [attempt, attempt]
        for w in workers:  # the very same subtask objects: none was restarted
            assert all(w.subtasks[n] is s for n, s in hosted[w.worker_id].items())
        expected = Counter(word for line in lines for word in line.split())
        counts = await read_committed(kafka_bootstrap, f"counts-{tag}", sum(expected.values()), 60)
        assert_counted_exactly_once(counts, expected)
    finally:
        for task in [*tasks, *([second] if second else [])]:
            task.cancel()
        await asyncio.gather(*tasks, *([second] if second else []), return_exceptions=True)

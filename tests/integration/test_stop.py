"""A graceful stop on the real broker: the coordinator, a worker and the HTTP API in this event
loop. `POST /stop` takes a final checkpoint and stops every subtask; the worker idles; a new
coordinator resumes from the final checkpoint and the sink still sees every count once."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from pathlib import Path

from prometheus_client import CollectorRegistry

from sluicegate.coordinator.httpapi.app import create_app
from sluicegate.coordinator.httpapi.client import CoordinatorClient
from sluicegate.coordinator.httpapi.server import serve
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.coordinator.status import CoordinatorStatus
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.runtime.worker import Worker
from sluicegate.operators.runtime.worker_settings import WorkerSettings
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.manifest import ManifestStore
from sluicegate.testing import counts_by_word, produce_lines, read_committed, word_count
from tests.helpers import assert_counted_exactly_once, wait_for

WORDS = [f"w{i}" for i in range(12)]


def lines(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 3))) for _ in range(n)]


async def test_stop_takes_a_final_checkpoint_and_a_new_coordinator_resumes_from_it(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    rng = random.Random(3)
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag)
    await ensure_topics(kafka_bootstrap, graph)
    storage = open_storage(tmp_path / "storage")
    settings = CoordinatorSettings(interval_seconds=0.5, heartbeat_timeout_seconds=5)
    worker = Worker(
        graph,
        WorkerSettings(
            worker_id="w1", slots=4, state_dir=tmp_path / "state", heartbeat_seconds=0.3
        ),
        bootstrap=kafka_bootstrap,
        storage=storage,
    )
    first = Coordinator(graph, bootstrap=kafka_bootstrap, storage=storage, settings=settings)
    api = await serve(create_app(CoordinatorStatus(first), CollectorRegistry()), "127.0.0.1", 0)
    worker_task = asyncio.create_task(worker.run())
    first_task = asyncio.create_task(first.run())
    try:
        before, during = lines(rng, 1500), lines(rng, 1500)
        await produce_lines(kafka_bootstrap, f"lines-{tag}", before)
        words_before = sum(len(line.split()) for line in before)
        assert (
            len(await read_committed(kafka_bootstrap, f"counts-{tag}", words_before, 60))
            == words_before
        )

        # Stop while the second half is still being counted.
        await produce_lines(kafka_bootstrap, f"lines-{tag}", during)
        client = CoordinatorClient(api.url)
        job = await asyncio.to_thread(client.stop, wait_seconds=60)

        assert job.state == "stopped", job
        assert job.stop is not None
        assert job.stop.phase == "done"
        final = job.stop.final_checkpoint
        assert final is not None, job.stop.note
        assert job.last_completed_checkpoint == final
        await asyncio.wait_for(first_task, 10)  # the run ended on its own
        assert not worker_task.done()  # the worker outlives the job, idle
        assert worker.attempt == first.facts().attempt
        tasks = [hosted.task for hosted in worker._hosted.values()]
        assert all(t.done() and t.exception() is None for t in tasks)
        assert await ManifestStore(storage).latest() is not None

        # Everything the final checkpoint covers was published, once: a prefix of each count.
        published = counts_by_word(await read_committed(kafka_bootstrap, f"counts-{tag}", 10**9, 3))
        for word, seen in published.items():
            assert seen == list(range(1, len(seen) + 1)), word

        # A new coordinator resumes from the final checkpoint and finishes the input.
        second = Coordinator(graph, bootstrap=kafka_bootstrap, storage=storage, settings=settings)
        second_task = asyncio.create_task(second.run())
        try:
            assign = await wait_for(
                lambda: second.facts().assign,
                timeout_s=30,  # for the worker's heartbeat and the assignment
                what="the new coordinator's assignment",
            )
            assert assign.restore_from == final
            assert second.facts().attempt == first.facts().attempt + 1
            expected = Counter(w for line in before + during for w in line.split())
            total = sum(expected.values())
            records = await read_committed(kafka_bootstrap, f"counts-{tag}", total, 90)
            assert_counted_exactly_once(records, expected)
        finally:
            # Stopped, not cancelled, and often right after the assignment while subtasks
            # still start: the stop must wait for them (a heartbeat from before the attempt
            # once passed for "stopped"), and cancelling a subtask mid-start can leave
            # aiokafka's bootstrap connection unclosed, which warnings-as-errors reports.
            second.request_stop(final_checkpoint=False)
            try:
                await asyncio.wait_for(second_task, 30)
            finally:
                second_task.cancel()
                await asyncio.gather(second_task, return_exceptions=True)
    finally:
        for task in (first_task, worker_task):
            task.cancel()
        await asyncio.gather(first_task, worker_task, return_exceptions=True)
        await api.stop()

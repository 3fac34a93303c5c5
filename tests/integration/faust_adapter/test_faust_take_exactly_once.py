"""faust's ``stream.take`` (`tests.faust_apps.batches`: sums of up to 10 numbers within 1 s)
run by sluicegate on a real broker, crashed and restored after each part of the input: a
read_committed consumer sees every number in exactly one batch, no batch larger than 10,
each batch of one input partition and in its order; and a buffer checkpointed before its
deadline, then crashed, is yielded once after the restore, at its re-armed deadline; and
buffers saved in a savepoint at parallelism 2 go on filling at parallelism 3.

Crashes cancel every task of the job at once (as a SIGKILL would), at a random point of the
checkpoint cycle after each part of the input.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from pathlib import Path

from sluicegate.coordinator.httpapi.client import CoordinatorClient
from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.faust_adapter import pipeline_of
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.kafka import clients as kafka_clients
from sluicegate.operators.runtime.partitioner import partition_for
from sluicegate.operators.runtime.subtask import Subtask
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.savepoints.store import SavepointStore
from sluicegate.operators.storage import open_storage
from sluicegate.testing import read_committed
from tests.faust_apps import batches
from tests.jobs import running

PARTITIONS = 4  # the app's topic_partitions


def key_of(n: int) -> bytes:
    return f"k{n % 13}".encode()


async def produce_numbers(bootstrap: str, topic: str, numbers: list[int]) -> None:
    producer = kafka_clients.producer(bootstrap, enable_idempotence=True, linger_ms=5)
    try:
        await producer.start()
        for n in numbers:
            await producer.send(topic, json.dumps(n).encode(), key=key_of(n))
        await producer.flush()
    finally:
        await producer.stop()


async def batches_read(
    bootstrap: str, topic: str, numbers: int, timeout_s: float
) -> list[batches.BatchSum]:
    """The committed batches of ``topic`` once they count ``numbers`` numbers (or the time is
    up)."""
    deadline = time.monotonic() + timeout_s
    while True:
        records = await read_committed(bootstrap, topic, 1 << 30, timeout_s=2)
        found = [batches.BatchSum.loads(r.value) for r in records]
        if sum(b.count for b in found) >= numbers or time.monotonic() > deadline:
            return found


def agent_subtask(job: LocalJob) -> Subtask:
    (subtask,) = [s for name, s in job.subtasks.items()
                  if name.startswith("tests.faust_apps.batches.sum_batches#")]  # fmt: skip
    return subtask


def job_of(graph: JobGraph, bootstrap: str, tmp_path: Path) -> LocalJob:
    return LocalJob(
        graph, bootstrap=bootstrap, storage=open_storage(tmp_path / "storage"),
        work_dir=tmp_path / "work", settings=CoordinatorSettings(interval_seconds=0.5),
    )  # fmt: skip


async def test_every_number_is_in_exactly_one_batch_across_crashes(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    graph = pipeline_of(batches.make_app(tag), modules=[batches], parallelism=2).build()
    rng = random.Random(33)
    numbers = list(range(1, 3001))
    parts = [numbers[:1000], numbers[1000:2200], numbers[2200:]]

    running = job_of(graph, kafka_bootstrap, tmp_path)
    await running.start()
    restored: list[int] = []
    for part in parts:
        await produce_numbers(kafka_bootstrap, f"numbers-{tag}", part)
        await running.wait_for_checkpoints(rng.randint(1, 2), timeout_s=120)
        await asyncio.sleep(rng.uniform(0, 0.6))  # where in the cycle to crash, not a wait
        await running.crash()
        running = job_of(graph, kafka_bootstrap, tmp_path)
        await running.start()
        assert running.restored_from is not None
        restored.append(running.restored_from)
    assert restored == sorted(set(restored))

    topic = f"batch-sums-{tag}"
    await batches_read(kafka_bootstrap, topic, len(numbers), timeout_s=300)
    running.raise_failure()
    await running.wait_for_checkpoints(running.completed + 1, timeout_s=60)
    found = await batches_read(kafka_bootstrap, topic, len(numbers) + 1, timeout_s=5)
    await running.crash()

    assert sum(b.count for b in found) == len(numbers)
    assert sum(b.total for b in found) == sum(numbers)
    assert sorted(n for b in found for n in b.numbers) == numbers  # each exactly once
    for b in found:
        assert 1 <= b.count == len(b.numbers) <= batches.MAX_BATCH
        assert b.total == sum(b.numbers)
        # a batch is of one input partition, in its order (the producer's, per partition)
        assert len({partition_for(key_of(n), PARTITIONS, input_partition=0)
                    for n in b.numbers}) == 1  # fmt: skip
        assert b.numbers == sorted(b.numbers)
    partial = [b for b in found if b.count < batches.MAX_BATCH]
    assert partial, "some batches were yielded at their deadline, not full"


async def test_a_checkpointed_buffer_is_yielded_once_at_its_deadline_after_a_crash(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    within = 6.0
    app = batches.make_app(tag, within=within)
    graph = pipeline_of(app, modules=[batches]).build()
    running = job_of(graph, kafka_bootstrap, tmp_path)
    await running.start()
    produced_at = time.monotonic()
    await produce_numbers(kafka_bootstrap, f"numbers-{tag}", [13, 26, 39])  # one key: k0
    deadline = time.monotonic() + 30
    while agent_subtask(running).records_in < 3:
        assert time.monotonic() < deadline, "the numbers were not read"
        await asyncio.sleep(0.05)
    # two checkpoints after the numbers were read, before their deadline: buffered in state
    await running.wait_for_checkpoints(running.completed + 2, timeout_s=60)
    assert time.monotonic() - produced_at < within - 1.0, "the machine is too slow for this"
    await running.crash()
    running = job_of(graph, kafka_bootstrap, tmp_path)
    await running.start()
    assert running.restored_from is not None

    topic = f"batch-sums-{tag}"
    found = await batches_read(kafka_bootstrap, topic, 3, timeout_s=120)
    running.raise_failure()
    assert time.monotonic() - produced_at >= within
    # the restored subtask read nothing again: the batch came from the buffer in its state
    assert agent_subtask(running).records_in == 0
    await running.wait_for_checkpoints(running.completed + 2, timeout_s=60)
    found = await batches_read(kafka_bootstrap, topic, 4, timeout_s=3)
    await running.crash()
    assert [(b.count, b.total, b.numbers) for b in found] == [(3, 78, [13, 26, 39])]


async def test_buffers_in_a_savepoint_go_on_filling_at_another_parallelism(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Numbers at parallelism 2 with a 20 s ``within`` (so the savepoint holds partial
    buffers), stopped with a savepoint, restored at 3, then more numbers: each number in exactly
    one batch, and batches holding numbers of both sides of the savepoint (the buffer's rows
    moved with their partition)."""
    tag = uuid.uuid4().hex[:8]
    app = batches.make_app(tag, within=20.0)
    graph2 = pipeline_of(app, modules=[batches], parallelism=2).build()
    graph3 = pipeline_of(app, modules=[batches], parallelism=3).build()
    await ensure_topics(kafka_bootstrap, graph2)
    storage = open_storage(tmp_path / "storage")
    before, after = list(range(1, 1004)), list(range(1004, 2008))
    topic = f"batch-sums-{tag}"
    body = "tests.faust_apps.batches.sum_batches"

    async with running(graph2, storage, kafka_bootstrap, tmp_path / "w2") as job:
        await produce_numbers(kafka_bootstrap, f"numbers-{tag}", before)
        full = len(before) - sum(len(before_in(p, before)) % 10 for p in range(PARTITIONS))
        await batches_read(kafka_bootstrap, topic, full, timeout_s=120)
        await asyncio.to_thread(CoordinatorClient(job.url).create_savepoint, "b2", stop=True)
        await asyncio.wait_for(job.task, 60)
    saved = await SavepointStore(storage).load("b2")
    assert saved.operators[body].parallelism == 2

    async with running(graph3, storage, kafka_bootstrap, tmp_path / "w3",
                       from_savepoint="b2") as job:  # fmt: skip
        await produce_numbers(kafka_bootstrap, f"numbers-{tag}", after)
        found = await batches_read(kafka_bootstrap, topic, len(before) + len(after), 120)
        assign = job.coordinator.facts().assign
        assert assign is not None
        subtasks = {s for worker in assign.assignment.values() for s in worker}
        assert {f"{body}#{i}" for i in range(3)} <= subtasks

    assert sorted(n for b in found for n in b.numbers) == before + after  # each exactly once
    assert all(1 <= b.count == len(b.numbers) <= batches.MAX_BATCH for b in found)
    across = [b for b in found if min(b.numbers) < 1004 <= max(b.numbers)]
    assert across, "the savepoint held partial buffers"
    assert len(across) == sum(1 for p in range(PARTITIONS) if len(before_in(p, before)) % 10)


def before_in(partition: int, numbers: list[int]) -> list[int]:
    return [n for n in numbers
            if partition_for(key_of(n), PARTITIONS, input_partition=0) == partition]  # fmt: skip

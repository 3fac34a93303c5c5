"""Approvals reach their run whatever partitioner placed the run's task (issue 11, item 6).

A task written by kcat or any librdkafka client lands where CRC32 of its key says; sluicegate
writes the approval where murmur2 says. The two differ for most keys, and the agent subtask
owning the approval's partition did not know the run: the approval was dead-lettered as
"unknown run" and the run waited forever.
"""

from __future__ import annotations

import json
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from fastapi import FastAPI

from sluicegate import AgentTopics, add_agent
from sluicegate.agents.agent import agents_in
from sluicegate.agents.messages import TaskRequest
from sluicegate.agents.routes.approvals import approvals_router
from sluicegate.coordinator.httpapi.auth import Scope, identity
from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.demos.refund_desk.agent import refund_desk, task_goal
from sluicegate.demos.refund_desk.world import WorldServer
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.partitioner import partition_for
from sluicegate.operators.runtime.readers import committed_from_start
from sluicegate.operators.runtime.topics import dead_letter_topic
from sluicegate.operators.storage import open_storage
from tests.helpers import kcat_produce

PARTITIONS = 4


@pytest.fixture
def world() -> Iterator[WorldServer]:
    with WorldServer() as server:
        yield server


def librdkafka_partition(key: bytes, partitions: int) -> int:
    """librdkafka's default partitioner (``consistent_random``) for a keyed record: CRC32."""
    return zlib.crc32(key) % partitions


def run_id_placed_apart(tag: str) -> str:
    """A run id that librdkafka and sluicegate put in different partitions."""
    for i in range(100):
        run_id = f"kcat-{tag}-{i}"
        key = run_id.encode()
        if librdkafka_partition(key, PARTITIONS) != partition_for(key, PARTITIONS,
                                                                  input_partition=0):  # fmt: skip
            return run_id
    raise AssertionError("no run id placed apart among 100")


async def wait_for_record(
    bootstrap: str, topic: str, timeout_s: float, **fields: object
) -> dict[str, object]:
    """The first committed JSON record of ``topic`` with ``fields``; fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    async with committed_from_start(bootstrap, topic, PARTITIONS) as consumer:
        while time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                for record in records:
                    found: dict[str, object] = json.loads(record.value or b"{}")
                    if all(found.get(k) == v for k, v in fields.items()):
                        return found
    raise AssertionError(f"no record {fields} in {topic} within {timeout_s} s")


async def committed_records(
    bootstrap: str, topic: str, partitions: int, *, by_partition: bool = False
) -> Any:
    """Every committed record value of ``topic`` up to its end offsets as of now (a list, or
    partition -> list with ``by_partition``)."""
    values: list[bytes] = []
    placed: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    async with committed_from_start(bootstrap, topic, partitions) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.end_offsets(tps)
        deadline = time.monotonic() + 30
        while any([await consumer.position(tp) < ends[tp] for tp in tps]):
            assert time.monotonic() < deadline, f"{topic} not read to its end within 30 s"
            for records in (await consumer.getmany(timeout_ms=200)).values():
                values.extend(r.value or b"" for r in records)
                for r in records:
                    placed[r.partition].append(r.value or b"")
    return placed if by_partition else values


WriteTask = Callable[[str, str, bytes, bytes], Awaitable[None]]


async def crc32_write(bootstrap: str, topic: str, key: bytes, value: bytes) -> None:
    """The task as a librdkafka client writes it: partition = CRC32(key) mod partitions."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        partition = librdkafka_partition(key, PARTITIONS)
        await producer.send_and_wait(topic, value, key=key, partition=partition)
    finally:
        await producer.stop()


async def kcat_write(bootstrap: str, topic: str, key: bytes, value: bytes) -> None:
    """The task written by the real kcat (librdkafka, its default partitioner)."""
    await kcat_produce(bootstrap, topic, key + b"\t" + value + b"\n", "-K", "\t")


async def test_approvals_reach_runs_whose_tasks_another_partitioner_placed(
    kafka_bootstrap: str, tmp_path: Path, world: WorldServer
) -> None:
    await approval_reaches_the_run(kafka_bootstrap, tmp_path, world, crc32_write)


async def test_approvals_reach_runs_whose_tasks_kcat_wrote(
    kafka_bootstrap: str, tmp_path: Path, world: WorldServer
) -> None:
    await approval_reaches_the_run(kafka_bootstrap, tmp_path, world, kcat_write)


async def approval_reaches_the_run(
    kafka_bootstrap: str, tmp_path: Path, world: WorldServer, write_task: WriteTask
) -> None:
    tag = uuid.uuid4().hex[:8]
    p = Pipeline(f"routing-{tag}")
    topics = AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip
    add_agent(p, refund_desk(world.url), partitions=PARTITIONS, parallelism=2, topics=topics)
    app = FastAPI()
    decider = identity(None, Scope.APPROVE)  # the API without tokens: open, on loopback
    app.include_router(approvals_router(kafka_bootstrap, agents_in(p.build()), decider=decider))
    api = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")
    job = LocalJob(
        p.build(), bootstrap=kafka_bootstrap, storage=open_storage(tmp_path / "storage"),
        work_dir=tmp_path / "work", settings=CoordinatorSettings(interval_seconds=0.3),
    )  # fmt: skip
    run_id = run_id_placed_apart(tag)
    task = TaskRequest(run_id=run_id, goal=task_goal(f"ord-{tag}", research=1))
    await job.start()
    try:
        # 1. The task, written by another client: it lands where CRC32(key) says.
        key = run_id.encode()
        await write_task(kafka_bootstrap, topics.tasks, key, task.model_dump_json().encode())
        placed = await committed_records(
            kafka_bootstrap, topics.tasks, PARTITIONS, by_partition=True
        )
        assert [p for p, values in placed.items() if values] == [
            librdkafka_partition(key, PARTITIONS)
        ]
        requested = await wait_for_record(
            kafka_bootstrap, topics.events, 60, run_id=run_id, type="approval_requested"
        )
        assert requested["status"] == "waiting_approval"

        # 2. The approval, through sluicegate's API (murmur2): it must reach the run.
        approve = f"/agents/refund-desk/runs/{run_id}/approve"
        accepted = await api.post(approve, json={})
        assert accepted.status_code == 202, accepted.text
        result = await wait_for_record(kafka_bootstrap, topics.results, 30, run_id=run_id)
        # 3. Exactly once: two more checkpoints later, still one result and one email.
        await job.wait_for_checkpoints(job.completed + 2, timeout_s=30)
        results = await committed_records(kafka_bootstrap, topics.results, PARTITIONS)
        dead = await committed_records(kafka_bootstrap, dead_letter_topic(p.name), 1)
        # 4. A decision the finished run cannot take is refused, not accepted and lost.
        again = await api.post(approve, json={})
    finally:
        await job.crash()
        await api.aclose()
    assert again.status_code == 409, again.text
    assert "is done, not waiting for approval" in again.json()["message"]
    assert result["status"] == "done"
    assert Counter(json.loads(r)["run_id"] for r in results) == Counter({run_id: 1})
    assert world.state.stats()["effects_by_kind"] == {"refund": 1, "email": 1, "reversal": 0}
    assert dead == []

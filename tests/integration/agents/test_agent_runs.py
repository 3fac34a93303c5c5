"""Agent runs on the real engine: refund-desk runs through a `LocalJob`, crashed mid-run.

Each run looks an order up, refunds it, asks a person before emailing, emails, and answers.
The world service counts every effect by idempotency key: after crashes and restores it must
have seen each refund and each email exactly once, and the read_committed results sink must
hold exactly one result per run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from sluicegate import AgentTopics, add_agent
from sluicegate.agents.client import submit_tasks
from sluicegate.agents.messages import TaskRequest
from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.demos.refund_desk.agent import refund_desk, task_goal
from sluicegate.demos.refund_desk.approver import Approver
from sluicegate.demos.refund_desk.world import WorldServer
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.storage import open_storage
from sluicegate.testing import read_committed

PARTITIONS = 4


@pytest.fixture
def world() -> Iterator[WorldServer]:
    with WorldServer() as server:
        yield server


def desk_graph(world_url: str, tag: str) -> tuple[JobGraph, AgentTopics]:
    p = Pipeline(f"desk-{tag}")
    topics = AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip
    add_agent(p, refund_desk(world_url), partitions=PARTITIONS, parallelism=2, topics=topics)
    return p.build(), topics


@contextlib.asynccontextmanager
async def approving(
    bootstrap: str, topics: AgentTopics, **kwargs: object
) -> AsyncIterator[Approver]:
    approver = Approver(
        bootstrap, events=topics.events, approvals=topics.approvals, partitions=PARTITIONS,
        **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip
    task = asyncio.create_task(approver.run())
    try:
        yield approver
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_runs_survive_crashes_with_each_effect_once(
    kafka_bootstrap: str, tmp_path: Path, world: WorldServer
) -> None:
    tag = uuid.uuid4().hex[:8]
    graph, topics = desk_graph(world.url, tag)
    storage = open_storage(tmp_path / "storage")
    runs = 24

    def job() -> LocalJob:
        return LocalJob(
            graph, bootstrap=kafka_bootstrap, storage=storage, work_dir=tmp_path / "work",
            settings=CoordinatorSettings(interval_seconds=0.3),
        )  # fmt: skip

    tasks = [
        TaskRequest(run_id=f"run-{i:03d}", goal=task_goal(f"ord-{tag}-{i}", research=2))
        for i in range(runs)
    ]
    running = job()
    await running.start()
    async with approving(kafka_bootstrap, topics, delay_s=0.2):
        await submit_tasks(kafka_bootstrap, topics.tasks, tasks[: runs // 2])
        for crash in range(3):
            await running.wait_for_checkpoints(2 + crash, timeout_s=60)
            await running.crash()
            if crash == 1:
                await submit_tasks(kafka_bootstrap, topics.tasks, tasks[runs // 2 :])
            running = job()
            await running.start()
        # A task sent twice starts one run.
        await submit_tasks(kafka_bootstrap, topics.tasks, tasks[:1])
        results = await read_committed(kafka_bootstrap, topics.results, runs, timeout_s=90)
    await running.crash()

    by_run = Counter(json.loads(r.value)["run_id"] for r in results)
    assert by_run == Counter({t.run_id: 1 for t in tasks})
    statuses = Counter(json.loads(r.value)["status"] for r in results)
    assert statuses == Counter({"done": runs})
    stats = world.state.stats()
    assert stats["duplicates"] == 0
    assert stats["effects_by_kind"] == {"refund": runs, "email": runs, "reversal": 0}
    for record in results:
        result = json.loads(record.value)
        assert result["steps"] == 5
        assert "emailed" in result["answer"]


async def test_rejected_email_lets_the_model_finish(
    kafka_bootstrap: str, tmp_path: Path, world: WorldServer
) -> None:
    tag = uuid.uuid4().hex[:8]
    graph, topics = desk_graph(world.url, tag)
    job = LocalJob(
        graph, bootstrap=kafka_bootstrap, storage=open_storage(tmp_path / "s"),
        work_dir=tmp_path / "w", settings=CoordinatorSettings(interval_seconds=0.3),
    )  # fmt: skip
    await job.start()
    try:
        async with approving(kafka_bootstrap, topics, approve=lambda event: False) as approver:
            task = TaskRequest(run_id="r1", goal=task_goal(f"ord-{tag}", research=1))
            await submit_tasks(kafka_bootstrap, topics.tasks, [task])
            (record,) = await read_committed(kafka_bootstrap, topics.results, 1, timeout_s=60)
    finally:
        await job.crash()
    result = json.loads(record.value)
    assert result["status"] == "done"
    assert "not emailed" in result["answer"]
    assert approver.rejected >= 1
    assert world.state.stats()["effects_by_kind"] == {"refund": 1, "email": 0, "reversal": 0}

"""The refund desk with memory on the real broker: each run remembers its refund in its
customer's memory, across a crash, and a later run asked to refund one of those orders again
answers from memory that it was refunded already, refunding nothing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluicegate import AgentTopics, add_agent
from sluicegate.agents.client import submit_tasks
from sluicegate.agents.messages import RunResult
from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.demos.refund_desk.agent import ALREADY_REFUNDED, refund_desk, refund_task
from sluicegate.demos.refund_desk.approver import Approver
from sluicegate.demos.refund_desk.world import WorldServer
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.storage import open_storage
from sluicegate.testing import read_committed

PARTITIONS = 4


@pytest.fixture
def world() -> Iterator[WorldServer]:
    with WorldServer() as server:
        yield server


async def test_a_later_run_refuses_a_second_refund_of_an_order_from_memory(
    kafka_bootstrap: str, tmp_path: Path, world: WorldServer
) -> None:
    tag = uuid.uuid4().hex[:8]
    p = Pipeline(f"desk-{tag}")
    topics = AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip
    add_agent(p, refund_desk(world.url, memory=True), partitions=PARTITIONS, parallelism=2,
              topics=topics)  # fmt: skip
    graph, storage = p.build(), open_storage(tmp_path / "storage")

    def job() -> LocalJob:
        return LocalJob(
            graph, bootstrap=kafka_bootstrap, storage=storage, work_dir=tmp_path / "work",
            settings=CoordinatorSettings(interval_seconds=0.3),
        )  # fmt: skip

    async def all_results(count: int) -> dict[str, RunResult]:
        records = await read_committed(kafka_bootstrap, topics.results, count, timeout_s=120)
        parsed = [RunResult.model_validate_json(r.value) for r in records]
        assert len({r.run_id for r in parsed}) == len(parsed), "a run with two results"
        return {r.run_id: r for r in parsed}

    first = [refund_task(f"run-{i}", f"ord-{tag}-{i}", f"c-{i % 3}") for i in range(9)]
    again = [refund_task(f"again-{i}", f"ord-{tag}-{i}", f"c-{i % 3}") for i in range(0, 9, 2)]
    approver = Approver(kafka_bootstrap, events=topics.events, approvals=topics.approvals,
                        partitions=PARTITIONS, delay_s=0.1)  # fmt: skip
    approving = asyncio.create_task(approver.run())
    running = job()
    await running.start()
    try:
        await submit_tasks(kafka_bootstrap, topics.tasks, first)
        await running.wait_for_checkpoints(2, timeout_s=60)
        await running.crash()  # mid-run: memory and runs restored together
        running = job()
        await running.start()
        done = await all_results(len(first))
        await submit_tasks(kafka_bootstrap, topics.tasks, again)
        done = await all_results(len(first) + len(again))
    finally:
        approving.cancel()
        await asyncio.gather(approving, return_exceptions=True)
        await running.crash()

    for task in first:
        result = done[task.run_id]
        assert result.status == "done"
        assert "; emailed" in (result.answer or "")
        assert [e["tool"] for e in result.effects] == ["issue_refund", "remember", "send_email"]
    for task in again:
        result = done[task.run_id]
        assert (result.status, result.steps, result.effects) == ("done", 1, [])
        order = task.goal.split("order ")[1].split(".")[0]
        assert f"Order {order} {ALREADY_REFUNDED}" in (result.answer or ""), result.answer
    stats = world.state.stats()
    assert stats["duplicates"] == 0
    assert stats["effects_by_kind"] == {"refund": len(first), "email": len(first), "reversal": 0}

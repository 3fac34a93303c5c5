"""Savepoints of agent state written by older builds, restored by this one.

``tests/fixtures/savepoints/<name>/`` holds savepoints that an older build wrote (never state
the current build just wrote): the refund desk at parallelism 2 with six runs waiting for a
person's approval, their ``RunState`` at an older schema version. Restoring one here, at
another parallelism, runs it through the upgrader chain; approving then completes every run
exactly once, each email sent once, no refund repeated.

The fixtures' topic and pipeline names carry the tag ``fixturev1``; a restore swaps in a fresh
tag (the names are data of the manifest, outside the rows files' checksums), so each test gets
topics of its own. ``SLUICEGATE_WRITE_FIXTURE=<name>`` makes
`test_write_a_fixture_with_this_build` write a new one (then commit it, and never change it).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluicegate import AgentTopics, add_agent
from sluicegate.agents.client import send_decision, submit_tasks
from sluicegate.agents.messages import ApprovalDecision, TaskRequest
from sluicegate.agents.runs.versions import CURRENT
from sluicegate.coordinator.status import CoordinatorStatus
from sluicegate.demos.refund_desk.agent import refund_desk, task_goal
from sluicegate.demos.refund_desk.world import WorldServer
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.manifest import ManifestStore
from sluicegate.testing import read_committed
from tests.helpers import wait_for
from tests.jobs import running

FIXTURES = Path(__file__).parents[2] / "fixtures" / "savepoints"
FIXTURE_TAG = "fixturev1"
PARTITIONS = 4
RUNS = 6


@pytest.fixture
def world() -> Iterator[WorldServer]:
    with WorldServer() as server:
        yield server


def desk(world_url: str, tag: str, parallelism: int) -> tuple[JobGraph, AgentTopics]:
    p = Pipeline(f"desk-{tag}")
    topics = AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip
    add_agent(p, refund_desk(world_url), partitions=PARTITIONS, parallelism=parallelism,
              topics=topics)  # fmt: skip
    return p.build(), topics


def waiting(coordinator_status: CoordinatorStatus) -> int:
    counts = coordinator_status.status().counts.get("refund-desk", {}).get("runs", {})
    return counts.get("waiting_approval", 0)


@pytest.mark.skipif(
    not os.environ.get("SLUICEGATE_WRITE_FIXTURE"), reason="writes a fixture only when asked"
)
async def test_write_a_fixture_with_this_build(
    kafka_bootstrap: str, tmp_path: Path, world: WorldServer
) -> None:
    name = os.environ["SLUICEGATE_WRITE_FIXTURE"]
    target = FIXTURES / name
    assert not target.exists(), f"{target} exists: fixtures are never rewritten"
    graph, topics = desk(world.url, FIXTURE_TAG, parallelism=2)
    await ensure_topics(kafka_bootstrap, graph)
    storage = open_storage(tmp_path / "storage")
    async with running(graph, storage, kafka_bootstrap, tmp_path / "w") as job:
        status = CoordinatorStatus(job.coordinator)
        tasks = [
            TaskRequest(run_id=f"run-{i}", goal=task_goal(f"ord-{i}", research=1))
            for i in range(RUNS)
        ]
        await submit_tasks(kafka_bootstrap, topics.tasks, tasks)
        await wait_for(lambda: waiting(status) == RUNS, timeout_s=90, what="runs waiting")
        await job.coordinator.request_savepoint(name, stop=True)
        await asyncio.wait_for(job.task, 60)
    assert world.state.stats()["effects_by_kind"] == {"refund": RUNS, "email": 0, "reversal": 0}
    shutil.copytree(tmp_path / "storage" / "savepoints" / name, target)


def restore_fixture(name: str, storage_dir: Path, tag: str) -> None:
    """Copy fixture ``name`` into file storage at ``storage_dir``, renamed to ``tag``.

    The renamed topics are new, so nothing of them has been read: every position starts at 0.
    Kept, the fixture's positions (2 in the agent's approval partitions, where barrier markers
    were) would point into the new topics, and once markers and approvals filled them that far
    before a subtask's first fetch, the records below would be skipped (an approval lost)."""
    target = storage_dir / "savepoints" / name
    shutil.copytree(FIXTURES / name, target)
    manifest = target / "_savepoint.json"
    saved = json.loads(manifest.read_text().replace(FIXTURE_TAG, tag))
    for operator in saved["operators"].values():
        for position in operator["partitions"]:
            position["offset"] = 0
    manifest.write_text(json.dumps(saved))


@pytest.mark.parametrize("name", ["refund-desk-runstate-v1", "refund-desk-runstate-v2"])
async def test_an_older_runstate_savepoint_restores_at_parallelism_3_and_its_runs_finish_once(
    name: str, kafka_bootstrap: str, tmp_path: Path, world: WorldServer
) -> None:
    tag = uuid.uuid4().hex[:8]
    saved = json.loads((FIXTURES / name / "_savepoint.json").read_text())
    assert saved["operators"]["refund-desk"]["state_schema_version"] < CURRENT
    assert saved["operators"]["refund-desk"]["parallelism"] == 2
    graph, topics = desk(world.url, tag, parallelism=3)
    await ensure_topics(kafka_bootstrap, graph)
    restore_fixture(name, tmp_path / "storage", tag)
    storage = open_storage(tmp_path / "storage")
    async with running(graph, storage, kafka_bootstrap, tmp_path / "w",
                       from_savepoint=name) as job:  # fmt: skip
        assign = await wait_for(
            lambda: job.coordinator.facts().assign, timeout_s=30, what="assignment"
        )
        assert assign.restore_from is not None
        restored = await ManifestStore(storage).load(assign.restore_from)
        current = graph.operators["refund-desk"].state_versions.current
        assert restored.state_version("refund-desk") == current
        status = CoordinatorStatus(job.coordinator)
        await wait_for(lambda: waiting(status) == RUNS, timeout_s=60, what="runs waiting")
        for i in range(RUNS):
            decision = ApprovalDecision(run_id=f"run-{i}", approved=True, by="test")
            await send_decision(kafka_bootstrap, topics.approvals, decision)
        results = await read_committed(kafka_bootstrap, topics.results, RUNS, timeout_s=90)
        await asyncio.sleep(1.5)  # a duplicate would be published within a checkpoint or two
        results = await read_committed(kafka_bootstrap, topics.results, 10**6, timeout_s=2)
    by_run = Counter(json.loads(r.value)["run_id"] for r in results)
    assert by_run == Counter({f"run-{i}": 1 for i in range(RUNS)})
    assert {json.loads(r.value)["status"] for r in results} == {"done"}
    stats = world.state.stats()
    assert stats["duplicates"] == 0
    # the refunds were issued before the savepoint (in the world that wrote it): never again
    assert stats["effects_by_kind"] == {"refund": 0, "email": RUNS, "reversal": 0}

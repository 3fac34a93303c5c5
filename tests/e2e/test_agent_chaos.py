"""Agent runs across real processes killed with SIGKILL: every effect still happens once.

The refund desk runs 10-step runs (7 order lookups, a refund, an approved email, an answer)
on a coordinator and three workers. Workers are SIGKILLed at random moments, and the fault
points ``tool.issue_refund.after_call`` / ``tool.send_email.after_call`` SIGKILL a worker
between a tool's effect and its journal ``done`` write, the moment an effect's outcome is
unknown. The world service, which records every effect by idempotency key, must have seen each
refund and each email exactly once, and the read_committed results sink must hold exactly one
result per run, none over budget.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from sluicegate import AgentTopics
from sluicegate.agents.client import submit_tasks
from sluicegate.agents.messages import TaskRequest
from sluicegate.demos.refund_desk.agent import task_goal
from sluicegate.demos.refund_desk.approver import Approver
from sluicegate.demos.refund_desk.world import WorldServer
from sluicegate.operators.runtime.readers import committed_from_start
from sluicegate.testing import fault_env
from tests.e2e.cluster import Cluster
from tests.helpers import wait_for

PARTITIONS = 4
RUNS = int(os.environ.get("SLUICEGATE_AGENT_CHAOS_RUNS", "200"))
KILLS = int(os.environ.get("SLUICEGATE_AGENT_CHAOS_KILLS", "4"))
MAX_STEPS = 16


def topics_of(tag: str) -> AgentTopics:
    return AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip


def desk_module(tag: str, world_url: str, parallelism: int) -> str:
    """A pipeline module for `Cluster`: the refund desk on topics of its own."""
    topics = topics_of(tag)
    return (
        "from agents.agent import AgentTopics, add_agent\n"
        "from sluicegate.demos.refund_desk.agent import refund_desk\n"
        "from operators.pipeline import Pipeline\n"
        f"p = Pipeline('desk-{tag}')\n"
        f"add_agent(p, refund_desk({world_url!r}), partitions={PARTITIONS}, "
        f"parallelism={parallelism}, topics={topics!r})\n"
        "graph = p.build()\n"
    )


@pytest.fixture
def world() -> Iterator[WorldServer]:
    with WorldServer() as server:
        yield server


async def results_of(
    bootstrap: str, topic: str, expected: int, timeout_s: float, cluster: Cluster | None = None
) -> AsyncIterator[dict[str, object]]:
    """Yield each committed result as it arrives, until ``expected`` or the time is up."""
    async with committed_from_start(bootstrap, topic, PARTITIONS) as consumer:
        seen, deadline = 0, time.monotonic() + timeout_s
        while seen < expected and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                for record in records:
                    seen += 1
                    yield json.loads(record.value or b"{}")
            yield {}  # a tick, so the caller can act between fetches


async def test_sigkilled_workers_never_repeat_an_effect(
    kafka_bootstrap: str, tmp_path: Path, world: WorldServer, cluster_factory: list[Cluster]
) -> None:
    rng = random.Random(20261130)
    tag = uuid.uuid4().hex[:8]
    topics = topics_of(tag)
    faults = {"tool.issue_refund.after_call": "0.02x2", "tool.send_email.after_call": "0.02x2"}
    fault_state = tmp_path / "faults.state"
    cluster = Cluster(
        tmp_path, desk_module(tag, world.url, parallelism=PARTITIONS), kafka_bootstrap,
        env=fault_env(faults, fault_state),
    )  # fmt: skip
    cluster_factory.append(cluster)
    workers = ["worker-1", "worker-2", "worker-3"]
    for name in ["coordinator", *workers]:
        cluster.start(name)
    tasks = [
        TaskRequest(run_id=f"run-{i:04d}", goal=task_goal(f"ord-{tag}-{i}", research=7))
        for i in range(RUNS)
    ]
    approver = Approver(
        kafka_bootstrap, events=topics.events, approvals=topics.approvals, partitions=PARTITIONS
    )
    approving = asyncio.create_task(approver.run())
    results: list[dict[str, object]] = []
    kills, fault_deaths = 0, 0
    # Kills are spread by progress, not by the clock: a fast machine finished every run before
    # the fourth timed kill came.
    kill_after = [
        RUNS * (k + 1) // (KILLS + 1) - rng.randrange(max(1, RUNS // (4 * KILLS + 4)))
        for k in range(KILLS)
    ]
    try:
        await submit_tasks(kafka_bootstrap, topics.tasks, tasks)
        async for result in results_of(kafka_bootstrap, topics.results, RUNS, timeout_s=600):
            if result:
                results.append(result)
            fault_deaths += cluster.revive(workers)
            if kills < KILLS and len(results) >= kill_after[kills]:
                victim = rng.choice(workers)
                if cluster.kill(victim):
                    kills += 1
                else:  # a fault point was quicker
                    fault_deaths += 1
                cluster.start(victim)
    finally:
        approving.cancel()
        await asyncio.gather(approving, return_exceptions=True)

    assert kills == KILLS, f"only {kills} kills before every run finished: make RUNS larger"
    by_run = Counter(str(r["run_id"]) for r in results)
    assert by_run == Counter({t.run_id: 1 for t in tasks}), "a run without or with two results"
    assert Counter(r["status"] for r in results) == Counter({"done": RUNS})
    assert {r["steps"] for r in results} == {10}
    assert all(int(str(r["steps"])) <= MAX_STEPS for r in results)
    fired = fault_state.read_text().splitlines() if fault_state.exists() else []
    # A fault point may fire in the instant between the test's look and its own SIGKILL.
    assert 1 <= fault_deaths <= len(fired) <= fault_deaths + kills, (fired, fault_deaths)
    stats = world.state.stats()
    assert stats["duplicates"] == 0
    assert stats["mismatched_replays"] == 0
    assert stats["effects_by_kind"] == {"refund": RUNS, "email": RUNS, "reversal": 0}


async def test_a_run_waiting_for_approval_survives_a_full_restart(
    kafka_bootstrap: str, tmp_path: Path, world: WorldServer, cluster_factory: list[Cluster]
) -> None:
    tag = uuid.uuid4().hex[:8]
    topics = topics_of(tag)
    # Two agent subtasks and the router on one worker.
    cluster = Cluster(
        tmp_path, desk_module(tag, world.url, parallelism=2), kafka_bootstrap, slots=3
    )
    cluster_factory.append(cluster)
    names = ["coordinator", "worker-1"]
    for name in names:
        cluster.start(name)
    task = TaskRequest(run_id="waits", goal=task_goal(f"ord-{tag}", research=1))
    await submit_tasks(kafka_bootstrap, topics.tasks, [task])
    await wait_for_event(kafka_bootstrap, topics.events, "approval_requested", cluster)

    for name in names:  # every process, at once, without a chance to clean up
        cluster.kill(name)
    for name in names:
        cluster.start(name)
    approve = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sluicegate", "approve", "waits",
        "--topic", topics.approvals, "--events-topic", topics.events, "--by", "ann",
        env=cluster.env, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, stderr = await asyncio.wait_for(approve.communicate(), 60)
    assert approve.returncode == 0, stderr.decode()
    (result,) = [r async for r in results_of(kafka_bootstrap, topics.results, 1, 120) if r]
    assert result["status"] == "done"
    assert "; emailed" in str(result["answer"])
    assert world.state.stats()["effects_by_kind"] == {"refund": 1, "email": 1, "reversal": 0}


async def wait_for_event(bootstrap: str, topic: str, kind: str, cluster: Cluster) -> None:
    async with committed_from_start(bootstrap, topic, PARTITIONS) as consumer:

        async def seen() -> bool:
            cluster.alive()
            batches = (await consumer.getmany(timeout_ms=200)).values()
            return any(
                json.loads(r.value or b"{}").get("type") == kind for rs in batches for r in rs
            )

        # getmany waits up to 200 ms itself; no sleep between polls.
        await wait_for(seen, timeout_s=120, interval_s=0, what=f"a {kind} event")

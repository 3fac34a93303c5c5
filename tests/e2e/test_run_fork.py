"""Forks across real processes: a finished refund-desk run is forked from the CLI before its
refund, with a patched lookup result, and the worker is SIGKILLed while the fork runs, between
the fork's refund and its journal ``done`` write (fault point ``tool.issue_refund.after_call``).

At the world service, which records every effect by idempotency key, the fork's refund must
have happened exactly once under the fork's own key, the parent's effects never again; and a
recorded-only fork of the same run must execute no effect at all.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluicegate.agents.client import submit_tasks
from sluicegate.agents.history.events import RunHistory
from sluicegate.agents.history.replay import replay
from sluicegate.agents.messages import RunResult, TaskRequest
from sluicegate.demos.refund_desk.agent import task_goal
from sluicegate.demos.refund_desk.approver import Approver
from sluicegate.demos.refund_desk.world import WorldServer
from tests.e2e.cluster import Cluster
from tests.e2e.test_agent_chaos import PARTITIONS, desk_module, results_of, topics_of

WORKER = "worker-1"


@pytest.fixture
def world() -> Iterator[WorldServer]:
    with WorldServer() as server:
        yield server


async def fork(cluster: Cluster, tag: str, *args: str) -> str:
    topics = topics_of(tag)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sluicegate", "runs", "fork", *args,
        "--agent", "refund-desk", "--events-topic", topics.events, "--topic", topics.approvals,
        "--by", "ann", env=cluster.env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def results_until(
    bootstrap: str, tag: str, expected: int, cluster: Cluster
) -> tuple[dict[str, RunResult], int]:
    """The committed results once ``expected`` arrived; the worker deaths revived meanwhile."""
    results: dict[str, RunResult] = {}
    deaths = 0
    async for result in results_of(bootstrap, topics_of(tag).results, expected, timeout_s=180):
        deaths += cluster.revive([WORKER])
        if result:
            parsed = RunResult.model_validate(result)
            results[parsed.run_id] = parsed
    assert len(results) == expected, f"only {sorted(results)} finished"
    return results, deaths


def by_run(items: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    return [item for item in items if item.get("run_id") == run_id]


async def test_a_fork_refunds_once_under_its_own_key_across_a_sigkill(
    kafka_bootstrap: str, tmp_path: Path, world: WorldServer, cluster_factory: list[Cluster]
) -> None:
    tag = uuid.uuid4().hex[:8]
    topics = topics_of(tag)
    fault_state = tmp_path / "faults.state"
    cluster = Cluster(
        tmp_path, desk_module(tag, world.url, parallelism=2), kafka_bootstrap, slots=3,
        env={"SLUICEGATE_FAULTS_STATE": str(fault_state)},
    )  # fmt: skip
    cluster_factory.append(cluster)
    for name in ("coordinator", WORKER):
        cluster.start(name)
    approver = Approver(
        kafka_bootstrap, events=topics.events, approvals=topics.approvals, partitions=PARTITIONS
    )
    approving = asyncio.create_task(approver.run())
    try:
        task = TaskRequest(run_id="parent", goal=task_goal(f"ord-{tag}", research=2))
        await submit_tasks(kafka_bootstrap, topics.tasks, [task])
        first, _ = await results_until(kafka_bootstrap, tag, 1, cluster)
        parent = first["parent"]
        assert parent.status == "done"
        assert parent.steps == 5
        before = world.state.snapshot()
        assert len(by_run(before["refunds"], "parent")) == 1

        # From now on the worker SIGKILLs itself once, right after a refund's effect.
        cluster.env["SLUICEGATE_FAULTS"] = "tool.issue_refund.after_call=1x1"
        cluster.kill(WORKER)
        cluster.start(WORKER)
        events = await RunHistory(kafka_bootstrap, "refund-desk", topics.events).events("parent")
        looked_up = next(e for e in events if e["type"] == "tool")["result"]
        patch = tmp_path / "patch.json"
        patch.write_text(json.dumps({"tool_result": {
            "call_id": "call-1-lookup_order", "result": looked_up | {"amount": 2.5},
        }}))  # fmt: skip
        out = await fork(cluster, tag, "parent", "--from-step", "2", "--patch", str(patch),
                         "--run-id", "parent.fork")  # fmt: skip
        assert "as run parent.fork" in out
        results, deaths = await results_until(kafka_bootstrap, tag, 2, cluster)
        assert deaths == 1, "the fault point did not kill the worker during the fork"
        assert fault_state.read_text().splitlines() == ["tool.issue_refund.after_call"]

        after_fork = world.state.snapshot()
        out = await fork(cluster, tag, "parent", "--from-step", "2", "--recorded-only",
                         "--run-id", "parent.dry")  # fmt: skip
        assert "recorded-only" in out
        results, _ = await results_until(kafka_bootstrap, tag, 3, cluster)
    finally:
        approving.cancel()
        await asyncio.gather(approving, return_exceptions=True)

    forked, dry = results["parent.fork"], results["parent.dry"]
    assert forked.status == dry.status == "done"
    assert "2.5 EUR" in str(forked.answer)
    assert "; emailed" in str(forked.answer)
    assert [e["key"] for e in forked.effects] == ["parent.fork/3/0", "parent.fork/4/0"]

    # The fork's refund: once, under its own key; the parent's effects: never again.
    (refund,) = by_run(after_fork["refunds"], "parent.fork")
    assert refund["amount"] == 2.5
    fork_keys = [e["key"] for e in after_fork["effects"] if e["key"].startswith("parent.fork/")]
    assert sorted(fork_keys) == ["parent.fork/3/0", "parent.fork/4/0"]
    assert by_run(after_fork["refunds"], "parent") == by_run(before["refunds"], "parent")
    assert by_run(after_fork["emails"], "parent") == by_run(before["emails"], "parent")
    assert [e for e in after_fork["effects"] if e["key"].startswith("parent/")] == [
        e for e in before["effects"] if e["key"].startswith("parent/")
    ]
    assert after_fork["stats"]["mismatched_replays"] == 0

    # The recorded-only fork answered from the parent's recordings and executed nothing.
    assert dry.effects == []
    assert "; emailed" in str(dry.answer)
    final = world.state.snapshot()
    assert final["effects"] == after_fork["effects"]
    assert final["stats"]["effects"] == after_fork["stats"]["effects"]

    history = RunHistory(kafka_bootstrap, "refund-desk", topics.events)
    for run_id in ("parent", "parent.fork", "parent.dry"):
        replayed = replay(await history.events(run_id))[-1].state
        assert RunResult.of(replayed) == results[run_id], run_id

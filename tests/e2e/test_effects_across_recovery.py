"""Effects across recovery (issue 12): a service that does NOT deduplicate records every call
by idempotency key; agent runs write to it through a tool that fails closed on an unknown
outcome. The coordinator is SIGKILLed again and again while calls are in flight on healthy
workers: every run must finish ``done`` (none ``outcome_unknown``) and no write may execute
twice. Before, each coordinator start was a global recovery that cut off the calls in flight
(left ``issued`` without ``done``): runs failed closed, or a retry executed a write again.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path

from agents.client import submit_tasks
from agents.declaration import AgentTopics
from agents.messages import TaskRequest
from operators.runtime.readers import committed_from_start
from tests.e2e.cluster import Cluster
from tests.e2e.ledger import Ledger
from tests.helpers import wait_for

PARTITIONS = 4
RUNS = 40
WRITES = 3
KILLS = 3


def ledger_module(tag: str, url: str) -> str:
    """A pipeline module for `Cluster`: an agent whose scripted model writes WRITES times."""
    return f'''
import asyncio, json, urllib.request
from agents.agent import add_agent
from agents.declaration import Agent, AgentTopics
from agents.journal import OnUnknown
from agents.models.contract import ChatMessage, ToolCall
from agents.models.scripted import ScriptedModel
from agents.tools import ToolContext, ToolKind, tool
from operators.pipeline import Pipeline

def _post(key, run_id):
    request = urllib.request.Request(
        {url!r}, data=json.dumps({{"key": key, "run_id": run_id}}).encode(), method="POST",
        headers={{"Content-Type": "application/json"}},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())

@tool(kind=ToolKind.IDEMPOTENT_WRITE, on_unknown=OnUnknown.FAIL)
async def write(ctx: ToolContext, n: int) -> dict:
    """Write entry n of the run (fails closed when its outcome is unknown)."""
    return await asyncio.to_thread(_post, ctx.idempotency_key, ctx.run_id)

def policy(messages):
    done = sum(1 for m in messages if m.role == "tool")
    if done < {WRITES}:
        call = ToolCall(id=f"w{{done}}", name="write", arguments=json.dumps({{"n": done}}))
        return ChatMessage(role="assistant", content=None, tool_calls=(call,))
    return ChatMessage(role="assistant", content="written")

p = Pipeline("ledger-{tag}")
agent = Agent("ledger", model=ScriptedModel(policy), tools=[write], instructions="Write.")
add_agent(p, agent, partitions={PARTITIONS}, parallelism=2, topics={topics_of(tag)!r})
graph = p.build()
'''


def topics_of(tag: str) -> AgentTopics:
    return AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip


async def test_coordinator_kills_cut_off_no_effect_and_fail_no_run(
    kafka_bootstrap: str, tmp_path: Path, ledger: Ledger, cluster_factory: list[Cluster]
) -> None:
    tag = uuid.uuid4().hex[:8]
    topics = topics_of(tag)
    cluster = Cluster(tmp_path, ledger_module(tag, ledger.url), kafka_bootstrap, slots=3)
    cluster_factory.append(cluster)
    for name in ("coordinator", "w1", "w2"):
        cluster.start(name)
    tasks = [TaskRequest(run_id=f"run-{i:03d}", goal="write") for i in range(RUNS)]
    await submit_tasks(kafka_bootstrap, topics.tasks, tasks)
    results: dict[str, dict[str, object]] = {}

    async with committed_from_start(kafka_bootstrap, topics.results, PARTITIONS) as consumer:

        async def read_results() -> bool:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                for record in records:
                    result = json.loads(record.value or b"{}")
                    assert str(result["run_id"]) not in results, "a run with two results"
                    results[str(result["run_id"])] = result
            cluster.alive()
            return len(results) >= RUNS

        for k in range(1, KILLS + 1):  # SIGKILL the coordinator while writes are on the wire
            target = k * RUNS // 2
            await wait_for(
                lambda target=target: sum(ledger.calls.values()) >= target,  # type: ignore[misc]
                timeout_s=120,
                what=f"{target} writes before kill {k}",
            )
            cluster.kill("coordinator")
            cluster.start("coordinator")
        await wait_for(read_results, timeout_s=240, what=f"all {RUNS} results")

    statuses = Counter(str(r["status"]) for r in results.values())
    assert statuses == Counter({"done": RUNS}), statuses
    assert len(ledger.calls) == RUNS * WRITES
    assert ledger.repeated() == {}, "writes executed more than once"
    adopted = sum(
        "adopted the running attempt" in log.read_text()
        for log in cluster.logs.glob("coordinator.*.log")
    )
    assert adopted >= 1, "no restarted coordinator adopted the running attempt"

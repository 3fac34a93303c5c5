"""MCP tools across crashes: an agent whose writes go to a real MCP server process
(`tests/mcp_tool_server.py`, streamable HTTP), run by real coordinator and worker processes.

A worker is SIGKILLed mid-run and started again, then the MCP server itself is SIGKILLed and
started again on the same port. Every run must finish ``done``; each write reached the server
under the journal's key of its call (the server deduplicates by the key in ``_meta``, so a
call repeated after a kill is the same key, never a second effect under another key); a
server that is down held the runs back (a retryable error) and crashed nothing.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from sluicegate.agents.client import submit_tasks
from sluicegate.agents.declaration import AgentTopics
from sluicegate.agents.journal import effect_key
from sluicegate.agents.messages import TaskRequest
from sluicegate.operators.runtime.readers import committed_from_start
from tests.e2e.cluster import Cluster
from tests.e2e.test_effects_across_recovery import _adoptable, results_reader
from tests.helpers import wait_for
from tests.mcp_processes import ledger_lines, running_http_server

PARTITIONS = 4
RUNS = 16
WRITES = 3


def topics_of(tag: str) -> AgentTopics:
    return AgentTopics.named(f"mcp-{tag}")


def mcp_module(tag: str, url: str) -> str:
    """A pipeline module for `Cluster`: an agent whose scripted model notes WRITES times
    through the MCP server at ``url``."""
    return f"""
import json
from sluicegate import Agent, AgentTopics, add_agent, mcp_server
from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.agents.models.scripted import ScriptedModel
from sluicegate.agents.tools import ToolKind
from sluicegate.operators.pipeline import Pipeline

def policy(messages):
    done = sum(1 for m in messages if m.role == "tool")
    if done < {WRITES}:
        arguments = json.dumps({{"account": "acc", "note": f"n{{done}}"}})
        call = ToolCall(id=f"w{{done}}", name="record_note", arguments=arguments)
        return ChatMessage(role="assistant", content=None, tool_calls=(call,))
    return ChatMessage(role="assistant", content="noted")

server = mcp_server({url!r}, kinds={{"sync_contacts": ToolKind.IDEMPOTENT_WRITE}}, timeout_s=5)
p = Pipeline("mcp-{tag}")
agent = Agent("notes", model=ScriptedModel(policy), tools=[server], instructions="Note.")
add_agent(p, agent, partitions={PARTITIONS}, parallelism=2, topics={topics_of(tag)!r})
graph = p.build()
"""


async def test_worker_and_server_kills_execute_every_write_once(
    kafka_bootstrap: str, tmp_path: Path, cluster_factory: list[Cluster]
) -> None:
    tag = uuid.uuid4().hex[:8]
    topics = topics_of(tag)
    ledger = tmp_path / "mcp-ledger.jsonl"
    with running_http_server(ledger) as mcp:
        cluster = Cluster(tmp_path, mcp_module(tag, mcp.url), kafka_bootstrap, slots=3)
        cluster_factory.append(cluster)
        for name in ("coordinator", "w1", "w2"):
            cluster.start(name)

        def writes() -> int:
            return len(ledger_lines(ledger))

        async def more_writes(n: int, before: str) -> None:
            target = writes() + n
            await wait_for(lambda: writes() >= target, timeout_s=180, what=f"writes {before}",
                           details=cluster.log_tails)  # fmt: skip

        await wait_for(
            _adoptable(cluster, ("w1", "w2")), timeout_s=120, interval_s=0.2,
            what="the job running on both workers", details=cluster.log_tails,
        )  # fmt: skip
        tasks = [TaskRequest(run_id=f"r{i:03d}", goal="note") for i in range(RUNS)]
        await submit_tasks(kafka_bootstrap, topics.tasks, tasks[: RUNS // 2])
        await more_writes(6, "before killing w1")
        cluster.kill("w1")
        cluster.start("w1")
        await submit_tasks(kafka_bootstrap, topics.tasks, tasks[RUNS // 2 :])
        await more_writes(6, "before killing the MCP server")
        mcp.kill()
        await wait_for(
            lambda: "MCP server" in cluster.log_lines("w1", "retrying")
            + cluster.log_lines("w2", "retrying"),
            timeout_s=90, what="a run retrying while the server is down",
            details=cluster.log_tails,
        )  # fmt: skip
        mcp.start()
        results: dict[str, dict[str, Any]] = {}
        async with committed_from_start(kafka_bootstrap, topics.results, PARTITIONS) as consumer:
            read = results_reader(consumer, cluster, results, RUNS)
            await wait_for(read, timeout_s=300, what=f"all {RUNS} results",
                           details=cluster.log_tails)  # fmt: skip

    assert Counter(r["status"] for r in results.values()) == {"done": RUNS}, results
    keys = Counter(line["key"] for line in ledger_lines(ledger) if line["tool"] == "record_note")
    expected = {effect_key(t.run_id, step, 0) for t in tasks for step in range(1, WRITES + 1)}
    assert set(keys) == expected  # each write under its journal key, and no other
    notes = {(line["key"], json.dumps(line["arguments"], sort_keys=True))
             for line in ledger_lines(ledger)}  # fmt: skip
    assert len(notes) == len(expected)  # a repeated key is the same call, never another

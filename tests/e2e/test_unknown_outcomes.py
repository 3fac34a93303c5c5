"""Outcome-unknown paths on the real broker with real processes (issue 28, item 1).

A run of an agent calls one write tool over HTTP (`HoldingService`); the service holds that
write on the wire until the test releases it. One test per ``on_unknown`` rule:

* **worker killed** while the write is held (SIGKILL by PID, once the service holds the
  request and the journal holds its ``issued``), the write then released and executed, the
  worker started again: ``fail`` fails the run closed with ``outcome_unknown``, the failure
  event names the tool, the call and the key, the worker's outcome-unknown counter (the metric
  of the ``SluicegateEffectOutcomeUnknown`` alert) is 1, and nothing is called again;
  ``retry`` makes exactly one more call with the same key, its result marked
  ``settled_by: retry``; ``lookup`` settles it by the lookup, whose answer is the recorded
  result, and calls nothing again; and when the held write was dropped (it never ran), the
  lookup finds nothing and the call is made once more (``settled_by: call_after_lookup``).
* **the connection reset** after the service executed the write (no kill): the tool lets
  the `ConnectionResetError` escape, as a tool written with urllib does; the driver treats it
  as the unknown outcome it is, and the same rules settle it (before, it was recorded as a
  permanent failure and the run finished without its write: the soak's finding).
* **coordinator killed** while the write is held, then started again, then the write released:
  the worker is not restarted (the same PID throughout), the call finishes and is journaled
  once, and the run completes.

Results, events and journal entries are read from their topics ``read_committed``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sluicegate.agents.client import submit_tasks
from sluicegate.agents.declaration import AgentTopics
from sluicegate.agents.history.events import RunHistory
from sluicegate.agents.journal import JournalEntry
from sluicegate.agents.messages import TaskRequest
from sluicegate.operators.runtime.readers import committed_from_start
from tests.e2e.cluster import Cluster
from tests.e2e.holding_service import HoldingService
from tests.e2e.test_effects_across_recovery import _adoptable
from tests.helpers import wait_for

PARTITIONS = 2
AGENT = "writer"
RUN = "run-held"
RULES = ["fail", "retry", "lookup"]


def pipeline_module(tag: str, url: str, rule: str) -> str:
    """A pipeline module for `Cluster`: an agent whose scripted model calls ``write`` once (a
    write with ``on_unknown=rule``, looked up with ``GET /effects/<key>``), then answers."""
    return f'''
import asyncio, json, urllib.error, urllib.parse, urllib.request
from sluicegate import add_agent
from sluicegate.agents.declaration import Agent, AgentTopics
from sluicegate.agents.journal import LookupFound, LookupNotFound, LookupResult, OnUnknown
from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.agents.models.scripted import ScriptedModel
from sluicegate.agents.tools import ToolContext, ToolKind, tool
from sluicegate.operators.pipeline import Pipeline

def _post(key):
    request = urllib.request.Request(
        {url + "/write"!r}, data=b"{{}}", method="POST",
        headers={{"Content-Type": "application/json", "Idempotency-Key": key}},
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())

def _get(key):
    try:
        with urllib.request.urlopen({url + "/effects/"!r} + urllib.parse.quote(key, safe=""),
                                    timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise

async def find(ctx: ToolContext) -> LookupResult:
    found = await asyncio.to_thread(_get, ctx.idempotency_key)
    return LookupNotFound() if found is None else LookupFound(found)

@tool(kind=ToolKind.IDEMPOTENT_WRITE, on_unknown=OnUnknown({rule!r}),
      lookup=find if {rule!r} == "lookup" else None)
async def write(ctx: ToolContext) -> dict:
    """Write once, under the call's idempotency key."""
    return await asyncio.to_thread(_post, ctx.idempotency_key)

def policy(messages):
    if not any(m.role == "tool" for m in messages):
        call = ToolCall(id="call-write", name="write", arguments="{{}}")
        return ChatMessage(role="assistant", content=None, tool_calls=(call,))
    return ChatMessage(role="assistant", content="written")

p = Pipeline("unknown-{tag}")
agent = Agent({AGENT!r}, model=ScriptedModel(policy), tools=[write], instructions="Write.")
add_agent(p, agent, partitions={PARTITIONS}, parallelism=1, topics={topics_of(tag)!r})
graph = p.build()
'''


def topics_of(tag: str) -> AgentTopics:
    return AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip


class Scene:
    """One agent in a coordinator and worker ``w1`` (serving /metrics on a free port), its
    service holding the first write."""

    def __init__(
        self, bootstrap: str, tmp_path: Path, rule: str, made: list[Cluster], *, reset: bool
    ) -> None:
        self.bootstrap, self.tag = bootstrap, uuid.uuid4().hex[:8]
        self.topics = topics_of(self.tag)
        self.service = HoldingService(hold_first=not reset, reset_first=reset)
        module = pipeline_module(self.tag, self.service.url, rule)
        self.cluster = Cluster(
            tmp_path, module, bootstrap, slots=2, worker_args=["--metrics-port", "0"]
        )
        made.append(self.cluster)
        self.journal_topic = f"sluicegate.unknown-{self.tag}.{AGENT}.journal"

    def close(self) -> None:
        self.service.close()

    def pid(self, name: str) -> int:
        return self.cluster.processes[name].pid

    def sigkill(self, name: str) -> None:
        """SIGKILL ``name`` by its PID (it must be running), and reap it."""
        process = self.cluster.processes.pop(name)
        assert process.poll() is None, f"{name} ended before the kill:\n{self.cluster.log_tails()}"
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL

    async def submit(self) -> None:
        await submit_tasks(self.bootstrap, self.topics.tasks, [TaskRequest(run_id=RUN, goal="w")])

    async def held_and_issued(self) -> str:
        """Wait until the service holds the run's write and the journal holds its ``issued``
        (durable): the moment a kill leaves the write's outcome unknown. Its key."""

        def held() -> str | None:
            self.cluster.alive()
            return self.service.held()

        key = await wait_for(
            held, timeout_s=120, interval_s=0.05, what="the write held by the service",
            details=self.cluster.log_tails,
        )  # fmt: skip

        async def issued() -> bool:
            return any(e.status == "issued" for e in await self.journal(key))

        await wait_for(issued, timeout_s=30, interval_s=0.1, what=f"issued of {key} journaled")
        return key

    async def journal(self, key: str) -> list[JournalEntry]:
        """Every journal record of ``key``, in the order written (compaction aside)."""
        entries: list[JournalEntry] = []
        async with committed_from_start(self.bootstrap, self.journal_topic, PARTITIONS) as c:
            ends = await c.end_offsets(list(c.assignment()))
            left = {tp for tp, end in ends.items() if end > 0}
            while left:
                for records in (await c.getmany(timeout_ms=200)).values():
                    entries += [
                        JournalEntry.decode(r.value)
                        for r in records
                        if r.value is not None and r.key and r.key.startswith(f"{key}|".encode())
                    ]
                left = {tp for tp in left if await c.position(tp) < ends[tp]}
        return entries

    async def result(self) -> dict[str, Any]:
        """The run's one result (two fail the test), read_committed."""
        found: list[dict[str, Any]] = []
        async with committed_from_start(self.bootstrap, self.topics.results, PARTITIONS) as c:

            async def read() -> bool:
                for records in (await c.getmany(timeout_ms=200)).values():
                    found.extend(json.loads(r.value or b"{}") for r in records)
                self.cluster.alive()
                return bool(found)

            await wait_for(
                read, timeout_s=180, what="the run's result", details=self.cluster.log_tails
            )
            for records in (await c.getmany(timeout_ms=1000)).values():
                found.extend(json.loads(r.value or b"{}") for r in records)
        assert len(found) == 1, f"results: {found}"
        return found[0]

    async def events(self) -> list[dict[str, Any]]:
        history = RunHistory(self.bootstrap, AGENT, self.topics.events)
        return await history.events(RUN)

    def history(self) -> str:
        """What ``sluicegate runs history`` prints of the run."""
        shown = subprocess.run(
            [sys.executable, "-m", "sluicegate", "runs", "history", RUN, "--agent", AGENT,
             "--events-topic", self.topics.events, "--bootstrap", self.bootstrap],
            env=self.cluster.env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        return shown.stdout

    async def metric(self, name: str) -> float:
        """The value of ``name`` (summed over its series) on w1's /metrics now."""
        log = self.cluster.logs / f"w1.{self.cluster.starts['w1']}.log"
        url = await wait_for(
            lambda: _metrics_url(log.read_text(errors="replace")),
            timeout_s=30, what="w1 to log its metrics address",
        )  # fmt: skip
        async with httpx.AsyncClient(timeout=10) as http:
            text = (await http.get(url)).text
        values = [
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name + "{") or line.startswith(name + " ")
        ]
        assert values, f"no {name} on {url}"
        return sum(values)


def _metrics_url(log: str) -> str | None:
    found = re.findall(r"metrics at (http://\S+/metrics)", log)
    return found[-1] if found else None


SceneOf = Callable[..., "Scene"]


@pytest.fixture
def scene_of(
    kafka_bootstrap: str, tmp_path: Path, cluster_factory: list[Cluster]
) -> Iterator[SceneOf]:
    """Scenes made with it (one per test: they share ``tmp_path``) close when the test ends."""
    scenes: list[Scene] = []

    def make(rule: str, *, reset: bool = False) -> Scene:
        scene = Scene(kafka_bootstrap, tmp_path, rule, cluster_factory, reset=reset)
        scenes.append(scene)
        return scene

    yield make
    for scene in scenes:
        scene.close()


@pytest.mark.parametrize(
    ("rule", "executed"),
    [("fail", True), ("retry", True), ("lookup", True), ("lookup", False)],
    ids=["fail", "retry", "lookup", "lookup-finds-nothing"],
)
async def test_a_worker_killed_with_a_write_in_flight_settles_it_by_the_rule(
    rule: str, executed: bool, scene_of: SceneOf
) -> None:
    """``executed``: the held write runs once released (its answer goes nowhere), or is dropped
    without running."""
    scene = scene_of(rule)
    cluster, service = scene.cluster, scene.service
    for name in ("coordinator", "w1"):
        cluster.start(name)
    await scene.submit()
    key = await scene.held_and_issued()
    scene.sigkill("w1")
    service.release(execute=executed)  # its answer goes nowhere: the outcome is unknown
    if executed:
        await wait_for(lambda: key in service.executed, timeout_s=10, what=f"{key} executed")
    cluster.start("w1")
    result = await scene.result()
    events = await scene.events()
    tools = [e for e in events if e["type"] == "tool"]
    done = [e for e in await scene.journal(key) if e.status == "done"]

    if rule == "fail":
        assert (result["status"], result["reason"]) == ("failed", "outcome_unknown"), result
        assert result["effects"] == [{"key": key, "tool": "write", "status": "unknown"}]
        failure = events[-1]
        assert failure["type"] == "status", events
        assert failure["unknown_key"] == key
        assert (failure["tool"], failure["call_id"]) == ("write", "call-write")
        assert tools == []
        assert done == []  # nothing settled it
        assert await scene.metric("sluicegate_agent_outcome_unknown_total") == 1
        assert (service.writes, service.lookups) == ({key: 1}, {}), "called again"
        assert f"outcome_unknown (write call call-write key {key}:" in scene.history()
    elif rule == "retry":
        assert result["status"] == "done", result
        assert service.writes == {key: 2}, "not exactly one more call with the same key"
        assert service.lookups == {}
        (tool_event,) = tools
        assert tool_event["result"] == {"key": key, "written": 2}  # the retry's answer
        assert tool_event["settled_by"] == "retry"
        assert [d.settled_by for d in done] == ["retry"]
        assert await scene.metric("sluicegate_agent_outcome_unknown_total") == 0
        mark = "[retried after unknown outcome: the service must deduplicate]"
        assert f"tool: write call-write ({tool_event['duration_ms']:.0f} ms) {mark}" in (
            scene.history()
        )
    elif not executed:
        assert result["status"] == "done", result
        assert service.writes == {key: 2}, "the lookup found nothing: the call runs once more"
        assert service.lookups[key] >= 1
        (tool_event,) = tools
        assert tool_event["result"] == {"key": key, "written": 2}
        assert tool_event["settled_by"] == "call_after_lookup"
        assert [d.settled_by for d in done] == ["call_after_lookup"]
        assert "[called after unknown outcome: the lookup found nothing]" in scene.history()
    else:
        assert result["status"] == "done", result
        assert service.writes == {key: 1}, "the lookup found it, yet it was called again"
        assert service.lookups[key] >= 1
        (tool_event,) = tools
        assert tool_event["result"] == {"key": key, "found": "by lookup", "written": 1}
        assert tool_event["settled_by"] == "lookup"
        assert [(d.result, d.settled_by) for d in done] == [(tool_event["result"], "lookup")]
        assert await scene.metric("sluicegate_agent_outcome_unknown_total") == 0


@pytest.mark.parametrize("rule", RULES)
async def test_a_coordinator_killed_with_a_write_in_flight_leaves_the_call_to_finish_once(
    rule: str, scene_of: SceneOf
) -> None:
    scene = scene_of(rule)
    cluster, service = scene.cluster, scene.service
    for name in ("coordinator", "w1"):
        cluster.start(name)
    await wait_for(
        _adoptable(cluster, ("w1",)), timeout_s=120, interval_s=0.2,
        what="an attempt running on w1", details=cluster.log_tails,
    )  # fmt: skip
    worker = scene.pid("w1")
    await scene.submit()
    key = await scene.held_and_issued()
    scene.sigkill("coordinator")
    cluster.start("coordinator")
    cluster.api_url()  # the new coordinator is up before the write completes
    service.release()
    result = await scene.result()

    assert result["status"] == "done", result
    assert (scene.pid("w1"), cluster.starts["w1"]) == (worker, 1), "the worker was restarted"
    assert cluster.processes["w1"].poll() is None
    assert (service.writes, service.lookups) == ({key: 1}, {})
    entries = await scene.journal(key)
    assert sorted(e.status for e in entries) == ["done", "issued"], entries  # journaled once
    assert [e.settled_by for e in entries if e.status == "done"] == [None]
    (tool_event,) = [e for e in await scene.events() if e["type"] == "tool"]
    assert tool_event["result"] == {"key": key, "written": 1}
    assert "settled_by" not in tool_event
    assert await scene.metric("sluicegate_agent_outcome_unknown_total") == 0


@pytest.mark.parametrize("rule", RULES)
async def test_a_connection_reset_after_the_write_settles_it_by_the_rule(
    rule: str, scene_of: SceneOf
) -> None:
    scene = scene_of(rule, reset=True)
    cluster, service = scene.cluster, scene.service
    for name in ("coordinator", "w1"):
        cluster.start(name)
    await scene.submit()
    result = await scene.result()
    (key,) = service.executed  # the first write ran; its caller saw a reset
    tools = [e for e in await scene.events() if e["type"] == "tool"]
    done = [e for e in await scene.journal(key) if e.status == "done"]
    assert cluster.starts["w1"] == 1, "the worker was restarted"
    match rule:
        case "fail":
            assert (result["status"], result["reason"]) == ("failed", "outcome_unknown"), result
            assert tools == []
            assert done == []
            assert (service.writes, service.lookups) == ({key: 1}, {}), "called again"
            assert await scene.metric("sluicegate_agent_outcome_unknown_total") == 1
        case "retry":
            assert result["status"] == "done", result
            assert service.writes == {key: 2}, "not exactly one more call with the same key"
            (tool_event,) = tools
            assert tool_event["result"] == {"key": key, "written": 2}
            assert [d.settled_by for d in done] == ["retry"]
        case "lookup":
            assert result["status"] == "done", result
            assert service.writes == {key: 1}, "the lookup found it, yet it was called again"
            (tool_event,) = tools
            assert tool_event["result"] == {"key": key, "found": "by lookup", "written": 1}
            assert [(d.result, d.settled_by) for d in done] == [(tool_event["result"], "lookup")]
    assert all(d.error is None for d in done), "a reset recorded as the write's failure"

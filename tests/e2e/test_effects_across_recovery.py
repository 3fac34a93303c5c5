"""Effects across recovery (issue 12): a service that does NOT deduplicate records every call
by idempotency key; agent runs write to it through a tool that fails closed on an unknown
outcome, concurrently on two workers.

* The coordinator is SIGKILLed again and again while calls are in flight on healthy workers:
  every run must finish ``done`` (none ``outcome_unknown``) and no write may execute twice.
  Before, each coordinator start was a global recovery that cut off the calls in flight (left
  ``issued`` without ``done``): runs failed closed, or a retry executed a write again.
  Each kill waits until the coordinator runs an attempt over both workers, so that there is
  one to adopt (a kill while a coordinator starts, or while a new attempt or a rebalance has
  the workers retire their subtasks, leaves nothing running): a restart must adopt it.
* Workers are SIGKILLed (and come back, so subtasks move between live workers): no write
  executes twice, and only runs whose subtask was on the killed worker may fail
  ``outcome_unknown`` (its call in flight died with it; the tool fails closed). Runs on the
  healthy worker finish ``done``: it retires its subtasks before anything is reassigned.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer

from sluicegate.agents.client import submit_tasks
from sluicegate.agents.declaration import AgentTopics
from sluicegate.agents.messages import TaskRequest
from sluicegate.operators.runtime.readers import committed_from_start
from tests.e2e.cluster import Cluster
from tests.e2e.ledger import Ledger
from tests.helpers import wait_for

PARTITIONS = 4
RUNS = 40
WRITES = 3
KILLS = 3
WAVE = 14
"""Runs submitted before each coordinator kill (each with WRITES writes)."""
KILL_AFTER = 5
"""Writes of a wave that execute before the kill (more are then on the wire)."""
CUT_OFF_S = 2.0
"""A call that reached the service this long before a kill may have been cut off by it (the
service answers after 0.3 s)."""


def ledger_module(tag: str, url: str, parallelism: int = 2) -> str:
    """A pipeline module for `Cluster`: an agent whose scripted model writes WRITES times."""
    return f'''
import asyncio, json, urllib.request
from sluicegate import add_agent
from sluicegate.agents.declaration import Agent, AgentTopics
from sluicegate.agents.journal import OnUnknown
from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.agents.models.scripted import ScriptedModel
from sluicegate.agents.tools import ToolContext, ToolKind, tool
from sluicegate.operators.pipeline import Pipeline

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
add_agent(p, agent, partitions={PARTITIONS}, parallelism={parallelism}, topics={topics_of(tag)!r})
graph = p.build()
'''


def results_reader(
    consumer: AIOKafkaConsumer, cluster: Cluster, results: dict[str, dict[str, Any]], runs: int
) -> Callable[[], Awaitable[bool]]:
    """A `wait_for` condition: read results into ``results`` (failing on a run with two) until
    ``runs`` have one; the cluster's processes must stay alive meanwhile."""

    async def read() -> bool:
        for records in (await consumer.getmany(timeout_ms=200)).values():
            for record in records:
                result = json.loads(record.value or b"{}")
                assert str(result["run_id"]) not in results, "a run with two results"
                results[str(result["run_id"])] = result
        cluster.alive()
        return len(results) >= runs

    return read


def decisions(cluster: Cluster) -> str:
    """What each coordinator start decided: adopted, took a new attempt (and why), assigned."""
    return cluster.log_lines("coordinator", "attempt", "rebalancing", "recovering")


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
    results: dict[str, dict[str, Any]] = {}

    async with committed_from_start(kafka_bootstrap, topics.results, PARTITIONS) as consumer:
        read_results = results_reader(consumer, cluster, results, KILLS * WAVE)
        adoptable = _adoptable(cluster, ("w1", "w2"))

        for k in range(1, KILLS + 1):  # SIGKILL the coordinator while writes are on the wire
            await wait_for(
                adoptable, timeout_s=120, interval_s=0.2,
                what=f"an attempt to adopt before wave {k}", details=lambda: decisions(cluster),
            )  # fmt: skip
            target = sum(ledger.calls.values()) + KILL_AFTER
            wave = [TaskRequest(run_id=f"run-{k}-{i:03d}", goal="write") for i in range(WAVE)]
            await submit_tasks(kafka_bootstrap, topics.tasks, wave)
            await wait_for(
                _on_the_wire(ledger, target, adoptable), timeout_s=120, interval_s=0.1,
                what=f"writes on the wire of wave {k}, with an attempt to adopt",
                details=lambda: decisions(cluster),
            )  # fmt: skip
            cluster.kill("coordinator")
            cluster.start("coordinator")
        await wait_for(read_results, timeout_s=240, what=f"all {KILLS * WAVE} results")

    statuses = Counter(str(r["status"]) for r in results.values())
    assert statuses == Counter({"done": KILLS * WAVE}), statuses
    assert len(ledger.calls) == KILLS * WAVE * WRITES
    assert ledger.repeated() == {}, "writes executed more than once"
    adopted = sum(
        "adopted the running attempt" in log.read_text()
        for log in cluster.logs.glob("coordinator.*.log")
    )
    assert adopted >= 1, (
        f"no restarted coordinator adopted the running attempt:\n{decisions(cluster)}"
    )


async def test_worker_kills_fail_only_calls_cut_off_by_the_kill_and_repeat_no_effect(
    kafka_bootstrap: str, tmp_path: Path, ledger: Ledger, cluster_factory: list[Cluster]
) -> None:
    """Kill w1 and let the coordinator move everything to w2; bring w1 back (the rebalance
    moves subtasks away from a w2 that is making calls); kill w2, then w1; a wave of runs is
    submitted before each step, and a last one after the kills. Runs are concurrent, so a kill
    cuts off a call of almost every run its worker hosts: with ``on_unknown=fail`` those runs
    fail closed. No other run may: a run fails ``outcome_unknown`` only for a call that never
    reached the service, or reached it within ``CUT_OFF_S`` before a kill."""
    tag = uuid.uuid4().hex[:8]
    topics = topics_of(tag)
    module = ledger_module(tag, ledger.url, parallelism=PARTITIONS)  # 5 subtasks with the router
    cluster = Cluster(tmp_path, module, kafka_bootstrap, slots=5)
    cluster_factory.append(cluster)
    for name in ("coordinator", "w1", "w2"):
        cluster.start(name)
    kills: list[float] = []
    submitted = 0

    async def submit_wave(wave: str) -> list[str]:
        nonlocal submitted
        tasks = [TaskRequest(run_id=f"{wave}-{i:03d}", goal="write") for i in range(RUNS)]
        await submit_tasks(kafka_bootstrap, topics.tasks, tasks)
        submitted += len(tasks)
        return [t.run_id for t in tasks]

    async def placement() -> dict[str, str] | None:
        """subtask -> worker now (None while the coordinator has not assigned every one)."""
        async with httpx.AsyncClient(base_url=cluster.api_url(), timeout=10) as http:
            subtasks = (await http.get("/subtasks")).json()
        found = {str(s["subtask"]): s["worker_id"] for s in subtasks}
        return None if None in found.values() else found

    async def more_writes(n: int, before: str) -> None:
        target = sum(ledger.calls.values()) + n
        await wait_for(
            lambda: sum(ledger.calls.values()) >= target, timeout_s=180, what=f"writes {before}"
        )

    def kill(victim: str, *, restart: bool) -> None:
        cluster.alive()
        cluster.kill(victim)
        kills.append(time.time())
        if restart:
            cluster.start(victim)

    await submit_wave("a")
    await more_writes(10, "before killing w1")
    kill("w1", restart=False)
    await wait_for(
        _all_on(placement, "w2"), timeout_s=60, interval_s=0.5, what="every subtask on w2"
    )
    await submit_wave("b")
    await more_writes(10, "of wave b on w2")
    cluster.start("w1")  # joins: the rebalance moves agent subtasks away from a busy w2
    await wait_for(
        _agent_on(placement, "w1"), timeout_s=60, interval_s=0.5, what="agent subtasks on w1"
    )
    await submit_wave("c")
    await more_writes(10, "before killing w2")
    kill("w2", restart=True)
    await submit_wave("d")
    await more_writes(10, "before killing w1 again")
    kill("w1", restart=True)
    last = await submit_wave("e")

    results: dict[str, dict[str, Any]] = {}
    async with committed_from_start(kafka_bootstrap, topics.results, PARTITIONS) as consumer:
        read_results = results_reader(consumer, cluster, results, submitted)

        await wait_for(read_results, timeout_s=300, what=f"all {submitted} results")

    assert ledger.repeated() == {}, "writes executed more than once"
    failed = {run: r for run, r in results.items() if r["status"] != "done"}
    assert {r["reason"] for r in failed.values()} <= {"outcome_unknown"}, failed
    for run, result in failed.items():
        (key,) = [e["key"] for e in result["effects"] if e["status"] == "unknown"]
        arrived = ledger.arrived.get(key)
        cut_off = arrived is None or any(0 <= kill - arrived <= CUT_OFF_S for kill in kills)
        assert cut_off, f"{run}: {key} arrived at {arrived}, not cut off by a kill at {kills}"
    assert not failed.keys() & set(last), "a run submitted after the last kill failed"


def _all_on(
    placement: Callable[[], Awaitable[dict[str, str] | None]], worker: str
) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        found = await placement()
        return found is not None and set(found.values()) == {worker}

    return check


def _agent_on(
    placement: Callable[[], Awaitable[dict[str, str] | None]], worker: str
) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        found = await placement()
        return found is not None and any(
            w == worker and s.startswith("ledger#") for s, w in found.items()
        )

    return check


def _adoptable(cluster: Cluster, workers: tuple[str, ...]) -> Callable[[], Awaitable[bool]]:
    """A `wait_for` condition: the coordinator's latest start runs an attempt placed over all of
    ``workers`` (so its plan is stored, and no rebalance is due), and each worker reports
    running its part of it. Only then does a coordinator killed now leave an attempt that a
    restarted one can adopt: killed while it starts, waits to adopt, takes a new attempt (the
    workers retire their subtasks) or rebalances, there is nothing running to adopt."""

    async def check() -> bool:
        cluster.alive()
        url = cluster.api_address()
        if url is None:
            return False
        try:
            async with httpx.AsyncClient(base_url=url, timeout=10) as http:
                status = (await http.get("/status")).json()
                placed = (await http.get("/subtasks")).json()
                reported = (await http.get("/workers")).json()
        except httpx.TransportError:
            return False  # not listening yet, or too busy to answer in time: ask again
        if status["state"] not in ("running", "checkpointing"):
            return False
        placement = {str(s["subtask"]): s["worker_id"] for s in placed}
        if set(placement.values()) != set(workers):
            return False  # a subtask is not placed, or a worker runs nothing: a rebalance is due
        running = {str(w["worker_id"]): set(w["subtasks"]) for w in reported if w["alive"]}
        return all(running.get(w) == {s for s, on in placement.items() if on == w} for w in workers)

    return check


def _on_the_wire(
    ledger: Ledger, target: int, adoptable: Callable[[], Awaitable[bool]]
) -> Callable[[], Awaitable[bool]]:
    """A `wait_for` condition: ``target`` writes executed, more are on the wire, and the
    attempt is ``adoptable``: when to kill the coordinator."""

    async def check() -> bool:
        written = sum(ledger.calls.values()) >= target
        return written and ledger.in_flight() > 0 and await adoptable()

    return check

"""A run rolled back across real processes killed with SIGKILL: each compensation once.

The refund desk's tools over the world service (which records every effect by idempotency key)
with a scripted model that refunds two orders (steps 2 and 3) and then emails the customer
(step 4, approved). Rolled back to step 1, the email comes first: it cannot be undone, so the
run alerts (metric, ``compensation_needed`` event, one POST to a real webhook receiver) and
waits. The worker is SIGKILLed while it waits, a person approves, and the fault point
``tool.reverse_refund.after_call`` SIGKILLs the worker between the first reversal and its
journal ``done``: the compensation is in flight. After the restart the reversal is settled by
lookup, not repeated; the second one runs; the run ends ``rolled_back``. A last SIGKILL after
that changes nothing: at the world service each refund was reversed exactly once.
"""

from __future__ import annotations

import json
import re
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sluicegate import AgentTopics
from sluicegate.agents.client import send_command, send_decision, submit_tasks
from sluicegate.agents.messages import ApprovalDecision, RollbackRun, TaskRequest
from sluicegate.demos.refund_desk.world import WorldServer
from sluicegate.operators.runtime.readers import committed_from_start
from sluicegate.testing import fault_env
from tests.alert_receiver import AlertReceiver
from tests.e2e.cluster import Cluster
from tests.helpers import wait_for

PARTITIONS = 2
RUN = "trip-1"


def topics_of(tag: str) -> AgentTopics:
    return AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip


def desk_module(tag: str, world_url: str, webhook: str) -> str:
    """The refund desk's tools with a model that refunds two orders, then emails."""
    return f"""
import json
from sluicegate import Agent, AgentTopics, add_agent
from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.agents.models.scripted import ScriptedModel
from sluicegate.operators.pipeline import Pipeline
from sluicegate.demos.refund_desk.agent import WorldConnection, refund_desk_tools

ORDERS = ("ord-{tag}-a", "ord-{tag}-b")

def call(step, name, **arguments):
    c = ToolCall(id=f"call-{{step}}", name=name, arguments=json.dumps(arguments))
    return ChatMessage(role="assistant", content=None, tool_calls=(c,))

def policy(messages):
    results = [json.loads(m.content) if m.content and m.content[0] == "{{" else {{}}
               for m in messages if m.role == "tool"]
    step = len(results) + 1
    if step == 1:
        return call(step, "lookup_order", order_id=ORDERS[0])
    if step in (2, 3):
        return call(step, "issue_refund", order_id=ORDERS[step - 2], amount=1.0)
    if step == 4:
        ids = [r.get("refund_id") for r in results[1:3]]
        return call(step, "send_email", to=results[0]["email"], subject="Refunds",
                    body=f"Refunds {{ids}}")
    return ChatMessage(role="assistant", content="refunded twice, emailed")

world = WorldConnection({world_url!r})
agent = Agent("refund-desk", ScriptedModel(policy), refund_desk_tools(world), "Refund.",
              resources=world, alert_webhook={webhook!r})
p = Pipeline("rollback-{tag}")
add_agent(p, agent, partitions={PARTITIONS}, parallelism=1, topics={topics_of(tag)!r})
graph = p.build()
"""


@pytest.fixture
def world() -> Iterator[WorldServer]:
    with WorldServer() as server:
        yield server


@pytest.fixture
def alerts() -> Iterator[AlertReceiver]:
    receiver = AlertReceiver()
    try:
        yield receiver
    finally:
        receiver.close()


class Feed:
    """The committed records of a topic, read on demand."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.seen if e.get("type") == kind]


def metric(cluster: Cluster, name: str, labels: str = "") -> float:
    """``name``'s value summed over its series (those whose labels hold ``labels``) at the
    worker's latest start."""
    log = sorted(cluster.logs.glob("w1.*.log"), key=lambda p: p.stat().st_mtime)[-1]
    found = re.search(r"metrics at (http://\S+)", log.read_text())
    assert found is not None, "the worker logs its metrics address"
    text = httpx.get(found.group(1), timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") and 'operator="refund-desk"' in line and labels in line
    )


async def test_a_rollback_compensates_each_refund_once_across_sigkills_and_alerts_once(
    kafka_bootstrap: str,
    tmp_path: Path,
    world: WorldServer,
    alerts: AlertReceiver,
    cluster_factory: list[Cluster],
) -> None:
    tag = uuid.uuid4().hex[:8]
    topics = topics_of(tag)
    env = fault_env({"tool.reverse_refund.after_call": "1x1"}, tmp_path / "faults")
    module = desk_module(tag, world.url, alerts.url)
    cluster = Cluster(tmp_path, module, kafka_bootstrap, slots=3, env=env)
    cluster_factory.append(cluster)
    cluster.start("coordinator")
    cluster.start("w1", "--metrics-port", "0")
    events, results = Feed(), Feed()

    def checkpointed() -> bool:
        cluster.alive()
        status = httpx.get(cluster.api_url() + "/status", timeout=10).json()
        return status.get("last_completed_checkpoint") is not None

    await wait_for(checkpointed, timeout_s=120, interval_s=0.2, what="a first checkpoint")

    async with (
        committed_from_start(kafka_bootstrap, topics.events, PARTITIONS) as events_in,
        committed_from_start(kafka_bootstrap, topics.results, PARTITIONS) as results_in,
    ):

        async def read(revive: bool = False) -> None:
            for feed, consumer in ((events, events_in), (results, results_in)):
                for records in (await consumer.getmany(timeout_ms=100)).values():
                    feed.seen.extend(json.loads(r.value or b"{}") for r in records)
            worker = cluster.processes["w1"]
            if revive and worker.poll() == -signal.SIGKILL:  # a fault point fired: restart
                cluster.processes.pop("w1")
                cluster.start("w1", "--metrics-port", "0")
            cluster.alive()

        async def until(what: str, check: Any, *, revive: bool = False) -> None:
            async def ready() -> bool:
                await read(revive)
                return bool(check())

            await wait_for(ready, timeout_s=120, interval_s=0.1, what=what)

        await submit_tasks(kafka_bootstrap, topics.tasks, [TaskRequest(run_id=RUN, goal="go")])
        await until("the email's approval request", lambda: events.of("approval_requested"))
        await send_decision(
            kafka_bootstrap, topics.approvals, ApprovalDecision(run_id=RUN, approved=True, by="ann")
        )
        await until("the run's result", lambda: results.seen)
        assert results.seen[0]["status"] == "done"
        assert world.state.stats()["effects_by_kind"] == {"refund": 2, "email": 1, "reversal": 0}

        rollback = RollbackRun(run_id=RUN, to_step=1, by="ann", reason="duplicate refunds")
        await send_command(kafka_bootstrap, topics.approvals, rollback)
        await until("the alert webhook", lambda: events.of("alert_sent"))
        (needed,) = events.of("compensation_needed")
        assert (needed["tool"], needed["key"]) == ("send_email", f"{RUN}/4/0")
        assert needed["arguments"]["subject"] == "Refunds"
        assert metric(cluster, "sluicegate_agent_compensations_waiting") == 1.0
        assert metric(cluster, "sluicegate_agent_compensation_alerts_total") == 1.0

        cluster.kill("w1")  # while it waits for a person: nothing is sent again on restore
        cluster.start("w1", "--metrics-port", "0")
        await wait_for(
            lambda: _metric_or_none(cluster, "sluicegate_agent_compensations_waiting") == 1.0,
            timeout_s=60, interval_s=0.2, what="the restored worker to show the wait",
        )  # fmt: skip

        await send_decision(
            kafka_bootstrap, topics.approvals, ApprovalDecision(run_id=RUN, approved=True, by="bo")
        )
        # The first reversal SIGKILLs the worker after its effect, before its journal done.
        await until("the second result", lambda: len(results.seen) >= 2, revive=True)
        assert (tmp_path / "faults").read_text().splitlines() == [
            "tool.reverse_refund.after_call"
        ], "the fault point did not fire: no compensation was in flight at a kill"
        assert results.seen[1]["status"] == "rolled_back"

        cluster.kill("w1")  # after the rollback: a restore must change nothing
        cluster.start("w1", "--metrics-port", "0")
        await wait_for(
            lambda: _metric_or_none(cluster, "sluicegate_agent_runs", 'status="rolled_back"')
            == 1.0,
            timeout_s=60, interval_s=0.2, what="the restored worker to hold the rolled-back run",
        )  # fmt: skip
        await read()

    stats = world.state.snapshot()
    reversals = [e for e in stats["effects"] if e["kind"] == "reversal"]
    assert sorted(e["key"] for e in reversals) == [
        f"{RUN}/2/0/compensate/1", f"{RUN}/3/0/compensate/1",
    ]  # fmt: skip
    assert world.state.stats()["duplicates"] == 0
    assert world.state.stats()["effects_by_kind"] == {"refund": 2, "email": 1, "reversal": 2}
    assert all(r["status"] == "reversed" for r in stats["refunds"])
    assert alerts.keys == {f"{RUN}/4/0/alert/1": 1}, alerts.keys
    ((_, alert),) = alerts.received()
    assert (alert["tool"], alert["key"], alert["run_id"]) == ("send_email", f"{RUN}/4/0", RUN)
    assert len(events.of("compensation_needed")) == 1
    assert [r["status"] for r in results.seen] == ["done", "rolled_back"]
    compensations = [e for e in events.of("compensation") if "result" in e]
    assert [e["key"] for e in compensations] == [
        f"{RUN}/3/0/compensate/1", f"{RUN}/2/0/compensate/1",
    ]  # fmt: skip
    assert _metric_or_none(cluster, "sluicegate_agent_compensations_waiting") == 0.0


def _metric_or_none(cluster: Cluster, name: str, labels: str = "") -> float | None:
    try:
        return metric(cluster, name, labels)
    except (AssertionError, httpx.HTTPError):
        return None

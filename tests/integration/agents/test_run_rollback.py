"""Rolling refund-desk runs back on the real broker, one through the CLI and one over HTTP.

Each run refunds an order (step 2, reversible) and emails the customer (step 3, irreversible,
approved). Rolled back to step 1, the email comes first: it cannot be undone, so the run
raises an alert (event ``compensation_needed``, a POST to a real webhook receiver) and waits;
a person approves ("handled by hand"); the refund is then reversed by its compensating tool
and the run ends ``rolled_back`` with a second result.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from sluicegate import AgentTopics, add_agent
from sluicegate.agents.agent import agents_in
from sluicegate.agents.client import submit_tasks
from sluicegate.agents.messages import TaskRequest
from sluicegate.agents.routes.approvals import approvals_router
from sluicegate.agents.routes.rollback import rollback_router
from sluicegate.coordinator.httpapi.auth import ApiAuthError, ApiTokens, Principal, Scope, identity
from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.demos.refund_desk.agent import refund_desk, task_goal
from sluicegate.demos.refund_desk.world import WorldServer
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.readers import committed_from_start
from sluicegate.operators.storage import open_storage
from sluicegate.testing import read_committed
from tests.alert_receiver import AlertReceiver
from tests.helpers import wait_for
from tests.integration.agents.test_agent_runs import approving

PARTITIONS = 4
ANN, BOB = "ann-token-0123456789", "bob-token-0123456789"
TOKENS = ApiTokens({
    ANN: Principal.granted("ann", [Scope.APPROVE]),
    BOB: Principal.granted("bob", [Scope.OPERATE]),
})  # fmt: skip


@pytest.fixture
def world() -> Iterator[WorldServer]:
    with WorldServer() as server:
        yield server


@pytest.fixture
def alerts() -> Iterator[AlertReceiver]:
    receiver = AlertReceiver(fail_first=1)  # the first POST is answered 503, then retried
    try:
        yield receiver
    finally:
        receiver.close()


def api_app(bootstrap: str, agents: dict[str, AgentTopics]) -> FastAPI:
    app = FastAPI()

    async def refused(request: object, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiAuthError)
        return JSONResponse(status_code=exc.status, content={"error": exc.error})

    app.add_exception_handler(ApiAuthError, refused)
    app.include_router(approvals_router(bootstrap, agents, decider=identity(TOKENS, Scope.APPROVE)))
    app.include_router(rollback_router(bootstrap, agents, operator=identity(TOKENS, Scope.OPERATE)))
    return app


async def sluicegate(bootstrap: str, *args: str) -> tuple[int, str]:
    """Run the CLI without blocking the event loop the job runs on."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sluicegate", *args,
        env={**os.environ, "SLUICEGATE_KAFKA_BOOTSTRAP": bootstrap},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode()


class Events:
    """The committed events of the agent, read as they come."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def of(self, run_id: str, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.seen if e["run_id"] == run_id and e["type"] == kind]


async def reading(bootstrap: str, topic: str, events: Events) -> None:
    async with committed_from_start(bootstrap, topic, PARTITIONS) as consumer:
        while True:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                events.seen.extend(json.loads(r.value or b"{}") for r in records)


@pytest.fixture
async def events_task() -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks: list[asyncio.Task[None]] = []
    yield tasks
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_refund_desk_runs_rolled_back_through_the_cli_and_over_http(
    kafka_bootstrap: str,
    tmp_path: Path,
    world: WorldServer,
    alerts: AlertReceiver,
    events_task: list[asyncio.Task[None]],
) -> None:
    tag = uuid.uuid4().hex[:8]
    p = Pipeline(f"rollback-{tag}")
    topics = AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip
    desk = refund_desk(world.url, alert_webhook=alerts.url)
    add_agent(p, desk, partitions=PARTITIONS, parallelism=2, topics=topics)
    graph = p.build()
    job = LocalJob(
        graph, bootstrap=kafka_bootstrap, storage=open_storage(tmp_path / "s"),
        work_dir=tmp_path / "w", settings=CoordinatorSettings(interval_seconds=0.3),
    )  # fmt: skip
    events = Events()
    events_task.append(asyncio.create_task(reading(kafka_bootstrap, topics.events, events)))
    topic_flags = ["--topic", topics.approvals, "--events-topic", topics.events]
    await job.start()
    try:
        async with approving(kafka_bootstrap, topics, delay_s=0.1):
            tasks = [
                TaskRequest(run_id=run, goal=task_goal(f"ord-{tag}-{run}", research=1))
                for run in ("r-cli", "r-http")
            ]
            await submit_tasks(kafka_bootstrap, topics.tasks, tasks)
            await wait_for(
                lambda: all(events.of(r, "model")[-1:] and events.of(r, "model")[-1]["status"]
                            == "done" for r in ("r-cli", "r-http")),
                timeout_s=120, what="both runs done",
            )  # fmt: skip
        assert world.state.stats()["effects_by_kind"] == {"refund": 2, "email": 2, "reversal": 0}

        transport = httpx.ASGITransport(app=api_app(kafka_bootstrap, agents_in(graph)))
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
            path = "/agents/refund-desk/runs/{}/rollback"
            body = {"to_step": 1, "reason": "ordered twice"}
            no_scope = await api.post(path.format("r-http"), json=body, headers=auth(ANN))
            assert no_scope.status_code == 403, no_scope.text
            unknown = await api.post(path.format("nope"), json=body, headers=auth(BOB))
            assert (unknown.status_code, unknown.json()["error"]) == (404, "unknown_run")
            bad = await api.post(path.format("r-http"), json={"to_step": -1}, headers=auth(BOB))
            assert bad.status_code == 422
            accepted = await api.post(path.format("r-http"), json=body, headers=auth(BOB))
            assert accepted.status_code == 202, accepted.text
            assert accepted.json()["by"] == "bob"

            code, out = await sluicegate(
                kafka_bootstrap, "runs", "rollback", "r-cli", "--to-step", "1",
                "--agent", "refund-desk", "--by", "carol", *topic_flags,
            )  # fmt: skip
            assert code == 0, out
            code, out = await sluicegate(
                kafka_bootstrap, "runs", "rollback", "r-none", "--to-step", "1", *topic_flags,
            )  # fmt: skip
            assert code == 1
            assert "has no run 'r-none'" in out

            # The email cannot be undone: an alert, and each run waits for a person.
            for run in ("r-cli", "r-http"):
                await wait_for(
                    lambda run=run: events.of(run, "alert_sent"),  # type: ignore[misc, arg-type]
                    timeout_s=120, what=f"the alert of {run}",
                )  # fmt: skip
                (needed,) = events.of(run, "compensation_needed")
                assert (needed["tool"], needed["key"]) == ("send_email", f"{run}/3/0")
                assert needed["arguments"]["to"].endswith("@example.com")
                assert needed["status"] == "waiting_approval"
            assert sorted(alerts.keys) == ["r-cli/3/0/alert/1", "r-http/3/0/alert/1"]
            assert set(alerts.keys.values()) == {1}
            assert alerts.refused == 1
            (started,) = events.of("r-cli", "rollback_started")
            assert (started["by"], started["effects"]) == ("carol", ["r-cli/3/0", "r-cli/2/0"])
            assert world.state.stats()["effects_by_kind"]["reversal"] == 0

            code, out = await sluicegate(kafka_bootstrap, "approve", "r-cli", *topic_flags)
            assert code == 0, out
            ok = await api.post("/agents/refund-desk/runs/r-http/approve", headers=auth(ANN))
            assert ok.status_code == 202, ok.text

        results = await read_committed(kafka_bootstrap, topics.results, 4, timeout_s=120)
    finally:
        await job.crash()
    by_run: dict[str, list[str]] = {}
    for record in results:
        result = json.loads(record.value)
        by_run.setdefault(result["run_id"], []).append(result["status"])
    assert by_run == {"r-cli": ["done", "rolled_back"], "r-http": ["done", "rolled_back"]}
    stats = world.state.stats()
    assert stats["effects_by_kind"] == {"refund": 2, "email": 2, "reversal": 2}
    assert stats["duplicates"] == 0
    for run in ("r-cli", "r-http"):
        (compensation,) = events.of(run, "compensation")
        assert compensation["tool"] == "reverse_refund"
        assert compensation["key"] == f"{run}/2/0/compensate/1"
        assert compensation["result"]["status"] == "reversed"
    await rolled_back_runs_replay(kafka_bootstrap, topics.events)


async def rolled_back_runs_replay(bootstrap: str, events_topic: str) -> None:
    """``runs show`` and ``runs replay`` of the rolled-back runs rebuild them from their
    committed events (rollback, alert, decision, compensation included); a fork after a step
    the rollback undid is refused."""
    flags = ["--agent", "refund-desk", "--events-topic", events_topic]
    for run in ("r-cli", "r-http"):
        code, out = await sluicegate(bootstrap, "runs", "show", run, "--json", *flags)
        assert code == 0, out
        shown = json.loads(out)
        assert (shown["status"], shown["reason"]) == ("rolled_back", "rolled back to step 1")
        assert [(e["tool"], e["undone"]) for e in shown["effects"]] == [
            ("issue_refund", "compensated"), ("send_email", "by_hand"),
        ]  # fmt: skip
        assert (shown["rollback"]["to_step"], shown["rollback"]["notified"]) == (1, True)
        code, out = await sluicegate(bootstrap, "runs", "replay", run, "--json", *flags)
        assert code == 0, out
        replayed = json.loads(out)
        assert replayed[-1]["state"] == shown
        types = [r["event"]["type"] for r in replayed]
        after = types[types.index("rollback_started") :]
        assert after == ["rollback_started", "compensation_needed", "alert_sent", "approval",
                         "compensation", "status"], types  # fmt: skip
    code, out = await sluicegate(bootstrap, "runs", "show", "r-cli", *flags)
    assert code == 0, out
    assert "rolled_back (rolled back to step 1)" in out
    code, out = await sluicegate(bootstrap, "runs", "replay", "r-cli", *flags)
    assert code == 0, out
    assert "compensation_needed -> waiting_approval" in out
    fork = ["runs", "fork", "r-cli", "--topic", "approvals-none", *flags]
    code, out = await sluicegate(bootstrap, *fork, "--from-step", "2")
    assert code == 1
    assert "rolled back to step 1" in out


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}

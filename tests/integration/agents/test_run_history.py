"""Run history, replay and fork on the real broker: refund-desk runs through a `LocalJob`
(crashed once), read back from the events topic, replayed, listed and forked over HTTP and
from the CLI.

The history of every run must replay to the run's final state as its result says it; a fork
over HTTP with a patched tool result refunds once under its own key; a recorded-only fork from
the CLI executes no effect at the world service.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings

from sluicegate import AgentTopics
from sluicegate.agents.client import submit_tasks
from sluicegate.agents.history.events import RunHistory
from sluicegate.agents.history.replay import replay
from sluicegate.agents.messages import RunResult, TaskRequest
from sluicegate.agents.routes.runs import runs_router
from sluicegate.coordinator.httpapi.app import create_app
from sluicegate.coordinator.httpapi.auth import ApiTokens, Principal, Scope, identity, requirement
from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.demos.refund_desk.agent import task_goal
from sluicegate.demos.refund_desk.world import WorldServer
from sluicegate.operators.storage import open_storage
from sluicegate.testing import read_committed
from tests.conftest import TopicFactory
from tests.integration.agents.test_agent_runs import approving, desk_graph
from tests.unit.coordinator.httpapi.test_app import FakeView

PARTITIONS = 4
OPS, READER = "ops-token-0123456789", "reader-token-0123456789"
TOKENS = ApiTokens({
    OPS: Principal.granted("olga", [Scope.OPERATE]),
    READER: Principal.granted("rita", [Scope.READ]),
})  # fmt: skip


def api_app(bootstrap: str, agents: dict[str, AgentTopics], tokens: ApiTokens | None) -> FastAPI:
    """The coordinator's app (its error handlers and auth) with the runs routes mounted."""
    from prometheus_client import CollectorRegistry

    app = create_app(FakeView(), CollectorRegistry(), tokens=tokens)
    app.include_router(
        runs_router(
            bootstrap, agents, reader=requirement(tokens, Scope.READ),
            operator=identity(tokens, Scope.OPERATE),
        )
    )  # fmt: skip
    return app


def results_by_run(records: list[Any]) -> dict[str, RunResult]:
    results = [RunResult.model_validate_json(r.value) for r in records]
    return {r.run_id: r for r in results}


async def cli(env: dict[str, str], *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sluicegate", "runs", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_history_replay_and_forks_of_real_runs(kafka_bootstrap: str, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    with WorldServer() as world:
        graph, topics = desk_graph(world.url, tag)
        storage = open_storage(tmp_path / "storage")

        def job() -> LocalJob:
            return LocalJob(
                graph, bootstrap=kafka_bootstrap, storage=storage, work_dir=tmp_path / "work",
                settings=CoordinatorSettings(interval_seconds=0.3),
            )  # fmt: skip

        tasks = [
            TaskRequest(run_id=f"run-{i}", goal=task_goal(f"ord-{tag}-{i}", research=2),
                        metadata={"tenant": "eu", "i": i})
            for i in range(4)
        ]  # fmt: skip
        running = job()
        await running.start()
        try:
            rejecting = {"approve": lambda event: event["run_id"] != "run-3"}
            async with approving(kafka_bootstrap, topics, delay_s=0.1, **rejecting):
                await submit_tasks(kafka_bootstrap, topics.tasks, tasks)
                await running.wait_for_checkpoints(3, timeout_s=60)
                await running.crash()  # the events of a recovered run still replay
                running = job()
                await running.start()
                records = await read_committed(kafka_bootstrap, topics.results, 4, timeout_s=90)
                results = results_by_run(records)
                assert set(results) == {t.run_id for t in tasks}

                history = RunHistory(kafka_bootstrap, "refund-desk", topics.events)
                await check_replays(history, results)
                parent_events = await history.events("run-0")
                await fork_over_http(kafka_bootstrap, topics, parent_events)
                await fork_from_the_cli(kafka_bootstrap, topics, tmp_path)
                forks = await read_committed(kafka_bootstrap, topics.results, 6, timeout_s=90)
        finally:
            await running.crash()
        check_forks(results_by_run(forks), results, world, parent_events)


async def check_replays(history: RunHistory, results: dict[str, RunResult]) -> None:
    """Each run's events replay to the state its result shows."""
    for run_id, result in results.items():
        events = await history.events(run_id)
        assert [e["seq"] for e in events] == list(range(len(events)))
        final = replay(events)[-1].state
        assert RunResult.of(final) == result, run_id
        assert final.metadata == result.metadata
    assert "not emailed" in str(results["run-3"].answer)
    listed = {r.run_id: r for r in await history.runs()}
    assert {run_id: r.status for run_id, r in listed.items()} == dict.fromkeys(results, "done")
    assert listed["run-0"].step == 5
    assert listed["run-0"].cost_usd == pytest.approx(results["run-0"].cost_usd)


async def fork_over_http(
    bootstrap: str, topics: AgentTopics, parent_events: list[dict[str, Any]]
) -> None:
    """Fork run-0 after its lookups, with a partial amount in place of the looked-up one."""
    app = api_app(bootstrap, {"refund-desk": topics}, TOKENS)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        reader = {"Authorization": f"Bearer {READER}"}
        listed = await api.get("/agents/refund-desk/runs?status=done&limit=2", headers=reader)
        assert listed.status_code == 200, listed.text
        assert len(listed.json()) == 2
        shown = await api.get("/agents/refund-desk/runs/run-0", headers=reader)
        assert shown.json()["status"] == "done"
        assert shown.json()["step"] == 5
        events = await api.get("/agents/refund-desk/runs/run-0/history", headers=reader)
        assert events.json() == parent_events
        unknown = await api.get("/agents/refund-desk/runs/nope/history", headers=reader)
        assert unknown.status_code == 404
        assert unknown.json()["error"] == "unknown_run"

        looked_up = next(e for e in parent_events if e["type"] == "tool")
        assert looked_up["call_id"] == "call-1-lookup_order"
        patch = {"tool_result": {"call_id": "call-1-lookup_order",
                                 "result": looked_up["result"] | {"amount": 1.25}}}  # fmt: skip
        body = {"from_step": 2, "patch": patch, "run_id": "run-0.partial"}
        refused = await api.post("/agents/refund-desk/runs/run-0/fork", json=body, headers=reader)
        assert refused.status_code == 403
        ops = {"Authorization": f"Bearer {OPS}"}
        late = await api.post("/agents/refund-desk/runs/run-0/fork", headers=ops,
                              json={"from_step": 5})  # fmt: skip
        assert late.status_code == 409, late.text
        assert late.json()["error"] == "fork_refused"
        forked = await api.post("/agents/refund-desk/runs/run-0/fork", json=body, headers=ops)
        assert forked.status_code == 202, forked.text
        assert forked.json()["run_id"] == "run-0.partial"


async def fork_from_the_cli(bootstrap: str, topics: AgentTopics, tmp_path: Path) -> None:
    """The CLI lists, shows, replays and forks run-1, recorded-only."""
    env = {**os.environ, "SLUICEGATE_KAFKA_BOOTSTRAP": bootstrap}
    where = ["--agent", "refund-desk", "--events-topic", topics.events]
    listing = json.loads(await cli(env, "list", *where, "--json"))
    assert {"run-0", "run-1", "run-2", "run-3"} <= {r["run_id"] for r in listing}
    history = await cli(env, "history", "run-1", *where)
    assert "lookup_order" in history
    assert "issue_refund" in history
    assert "approved by demo-approver" in history
    replayed = await cli(env, "replay", "run-1", *where)
    assert replayed.splitlines()[-1].startswith(f"#{len(history.splitlines()) - 1} model -> done")
    shown = await cli(env, "show", "run-1", *where)
    assert "done" in shown
    out = await cli(env, "fork", "run-1", "--from-step", "2", "--recorded-only",
                    "--run-id", "run-1.dry", "--topic", topics.approvals, *where)  # fmt: skip
    assert "as run run-1.dry" in out


def check_forks(
    forks: dict[str, RunResult],
    parents: dict[str, RunResult],
    world: WorldServer,
    parent_events: list[dict[str, Any]],
) -> None:
    partial, dry = forks["run-0.partial"], forks["run-1.dry"]
    assert partial.status == dry.status == "done"
    assert partial.steps == dry.steps == 5
    assert "1.25" in str(partial.answer)
    assert partial.metadata == parents["run-0"].metadata
    assert dry.effects == []  # recorded-only: nothing executed
    assert [e["key"] for e in partial.effects] == ["run-0.partial/3/0", "run-0.partial/4/0"]
    snapshot = world.state.snapshot()
    refunds = [r for r in snapshot["refunds"] if r["run_id"] in ("run-0", "run-0.partial")]
    assert sorted((r["run_id"], r["amount"]) for r in refunds)[1] == ("run-0.partial", 1.25)
    assert len(refunds) == 2  # the parent's once, the fork's once
    assert not [e for e in snapshot["emails"] if e["run_id"] == "run-1.dry"]
    keys = {e["key"] for e in snapshot["effects"]}
    assert not any(key.startswith("run-1.dry/") for key in keys)
    stats = world.state.stats()
    assert stats["effects_by_kind"] == {"refund": 5, "email": 4, "reversal": 0}
    assert stats["mismatched_replays"] == 0
    assert parent_events[0]["type"] == "started"


pytestmark = pytest.mark.usefixtures("schemathesis_node_id")


@pytest.fixture
async def runs_api(kafka_bootstrap: str, new_topic: TopicFactory) -> schemathesis.BaseSchema:
    topics = AgentTopics(
        tasks="t", approvals=await new_topic(PARTITIONS, hint="approvals"),
        events=await new_topic(PARTITIONS, hint="events"), results="r",
    )  # fmt: skip
    return schemathesis.openapi.from_asgi(
        "/openapi.json", api_app(kafka_bootstrap, {"refund-desk": topics}, None)
    )


schema = schemathesis.pytest.from_fixture("runs_api").include(path_regex="^/agents/")


@schema.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_runs_routes_conform_to_their_spec(case: schemathesis.Case[Any]) -> None:
    case.call_and_validate()

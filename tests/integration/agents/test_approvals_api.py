"""Approve and reject, over HTTP and from the CLI: a decision is written to the agent's
approvals topic only for a run that its events topic shows waiting for approval; any other is
refused loudly (404 unknown run, 409 not waiting, CLI exit 1) instead of accepted and lost.
Over HTTP, who decides is the bearer token's name, never what the body says."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry

from sluicegate import AgentTopics, add_agent
from sluicegate.agents.agent import agents_in
from sluicegate.agents.routes.approvals import approvals_router
from sluicegate.coordinator.httpapi.app import create_app
from sluicegate.coordinator.httpapi.auth import ApiAuthError, ApiTokens, Principal, Scope, identity
from sluicegate.coordinator.httpapi.server import serve
from sluicegate.demos.refund_desk.agent import refund_desk
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.partitioner import partition_for
from tests.conftest import TopicFactory
from tests.unit.coordinator.httpapi.test_app import FakeView

PARTITIONS = 4
ANN, BOB, READER = "ann-token-0123456789", "bob-token-0123456789", "reader-token-0123456789"
TOKENS = ApiTokens({
    ANN: Principal.granted("ann", [Scope.APPROVE]),
    BOB: Principal.granted("bob", [Scope.APPROVE, Scope.OPERATE]),
    READER: Principal.granted("rita", [Scope.READ]),
})  # fmt: skip


def as_user(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def router_app(bootstrap: str, agents: dict[str, AgentTopics]) -> FastAPI:
    app = FastAPI()

    async def refused(request: object, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiAuthError)
        return JSONResponse(status_code=exc.status, content={"error": exc.error})

    app.add_exception_handler(ApiAuthError, refused)
    app.include_router(approvals_router(bootstrap, agents, decider=identity(TOKENS, Scope.APPROVE)))
    return app


async def write_events(bootstrap: str, topic: str, *events: dict[str, object]) -> None:
    """Events as the agent writes them: keyed by run_id, placed by the engine's partitioner."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for event in events:
            key = str(event["run_id"]).encode()
            partition = partition_for(key, PARTITIONS, input_partition=0)
            value = json.dumps(event).encode()
            await producer.send_and_wait(topic, value, key=key, partition=partition)
    finally:
        await producer.stop()


def requested(run_id: str, seq: int, call_id: str) -> dict[str, object]:
    return {"run_id": run_id, "seq": seq, "step": 1, "type": "approval_requested",
            "status": "waiting_approval", "tool": "send_email", "call_id": call_id}  # fmt: skip


def event(run_id: str, seq: int, status: str) -> dict[str, object]:
    return {"run_id": run_id, "seq": seq, "step": 1, "type": "model", "status": status}


@pytest.fixture
async def topics(kafka_bootstrap: str, new_topic: TopicFactory) -> AgentTopics:
    """An agent's approvals and events topics, with three runs: waiting, running and done."""
    topics = AgentTopics(
        tasks="t", approvals=await new_topic(PARTITIONS, hint="approvals"),
        events=await new_topic(PARTITIONS, hint="events"), results="r",
    )  # fmt: skip
    await write_events(
        kafka_bootstrap, topics.events,
        event("waits", 0, "running"), requested("waits", 1, "call-1"),
        event("busy", 0, "running"),
        event("over", 0, "running"), event("over", 1, "done"),
    )  # fmt: skip
    return topics


@pytest.fixture
async def api(kafka_bootstrap: str, topics: AgentTopics) -> AsyncIterator[httpx.AsyncClient]:
    p = Pipeline("api-test")
    add_agent(p, refund_desk("http://127.0.0.1:1"), partitions=PARTITIONS, topics=topics)
    agents = agents_in(p.build())
    assert agents == {"refund-desk": topics}
    transport = httpx.ASGITransport(app=router_app(kafka_bootstrap, agents))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://api", headers=as_user(ANN)
    ) as client:
        yield client


async def decisions_in(
    bootstrap: str, topic: str, count: int
) -> list[ConsumerRecord[bytes, bytes]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, q) for q in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        records: list[ConsumerRecord[bytes, bytes]] = []
        while len(records) < count:
            for batch in (await consumer.getmany(timeout_ms=1000)).values():
                records.extend(batch)
        return records
    finally:
        await consumer.stop()


async def test_decisions_on_a_waiting_run_are_written(
    kafka_bootstrap: str, topics: AgentTopics, api: httpx.AsyncClient
) -> None:
    ok = await api.post("/agents/refund-desk/runs/waits/approve", json={})
    no = await api.post(
        "/agents/refund-desk/runs/waits/reject",
        json={"reason": "too much", "call_id": "call-1"},
        headers=as_user(BOB),
    )
    assert ok.status_code == no.status_code == 202, (ok.text, no.text)
    assert ok.json() == {"agent": "refund-desk", "run_id": "waits", "approved": True,
                         "topic": topics.approvals}  # fmt: skip
    records = await decisions_in(kafka_bootstrap, topics.approvals, 2)
    decisions = [json.loads(r.value or b"") for r in records]
    assert [(d["approved"], d["by"], d["reason"]) for d in decisions] == [
        (True, "ann", None), (False, "bob", "too much"),
    ]  # fmt: skip
    assert {r.key for r in records} == {b"waits"}


async def test_who_decides_is_the_token_never_the_body(
    kafka_bootstrap: str, topics: AgentTopics, api: httpx.AsyncClient
) -> None:
    path = "/agents/refund-desk/runs/waits/approve"
    forged = await api.post(path, json={"by": "the-ceo"})
    anonymous = await api.post(path, headers={"Authorization": ""})
    unknown = await api.post(path, headers=as_user("not-a-token-0123456789"))
    reader = await api.post(path, headers=as_user(READER))
    assert forged.status_code == 422, forged.text  # `by` is no field of the body
    assert (anonymous.status_code, unknown.status_code) == (401, 401)
    assert reader.status_code == 403
    assert reader.json() == {"error": "insufficient_scope"}
    # Nothing was written by any of them: the one decision in the topic is the next one.
    decided = await api.post(path, json={"force": True})
    assert decided.status_code == 202
    (record,) = await decisions_in(kafka_bootstrap, topics.approvals, 1)
    assert json.loads(record.value or b"")["by"] == "ann"


async def test_approve_of_an_unknown_run_is_refused_with_404(api: httpx.AsyncClient) -> None:
    unknown = await api.post("/agents/refund-desk/runs/nobody/approve")
    assert unknown.status_code == 404
    body = unknown.json()
    assert body["error"] == "unknown_run"
    assert "has no run 'nobody'" in body["message"]
    assert "check the run id" in body["what_to_do"]
    no_agent = await api.post("/agents/nobody/runs/waits/approve")
    assert no_agent.status_code == 404
    assert "refund-desk" in no_agent.json()["what_to_do"]


async def test_decisions_on_runs_not_waiting_are_refused_with_409(
    kafka_bootstrap: str, topics: AgentTopics, api: httpx.AsyncClient
) -> None:
    busy = await api.post("/agents/refund-desk/runs/busy/approve")
    over = await api.post("/agents/refund-desk/runs/over/reject", json={"reason": "late"})
    other = await api.post("/agents/refund-desk/runs/waits/approve", json={"call_id": "call-9"})
    assert busy.status_code == over.status_code == other.status_code == 409
    assert busy.json()["error"] == "not_waiting"
    assert "is running, not waiting for approval" in busy.json()["message"]
    assert "is done, not waiting for approval" in over.json()["message"]
    assert "waits for approval of call 'call-1', not 'call-9'" in other.json()["message"]
    # A later status is read on the next request (the directory reads on from where it was).
    await write_events(kafka_bootstrap, topics.events, event("waits", 2, "running"))
    decided = await api.post("/agents/refund-desk/runs/waits/approve")
    assert decided.status_code == 409
    assert "is running" in decided.json()["message"]


async def test_force_writes_without_the_check(
    kafka_bootstrap: str, topics: AgentTopics, api: httpx.AsyncClient
) -> None:
    forced = await api.post("/agents/refund-desk/runs/expired/approve", json={"force": True})
    assert forced.status_code == 202
    (record,) = await decisions_in(kafka_bootstrap, topics.approvals, 1)
    assert record.key == b"expired"


async def test_an_unreadable_events_topic_answers_503(kafka_bootstrap: str) -> None:
    topics = AgentTopics(tasks="t", approvals="a", events="no-such-events-topic", results="r")
    transport = httpx.ASGITransport(app=router_app(kafka_bootstrap, {"desk": topics}))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://api", headers=as_user(ANN)
    ) as client:
        answer = await client.post("/agents/desk/runs/r/approve")
    assert answer.status_code == 503
    assert answer.json()["error"] == "events_unavailable"


def test_cli_approve_of_an_unknown_run_exits_1_saying_why(
    kafka_bootstrap: str, topics: AgentTopics
) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sluicegate", "approve", *args, "--topic", topics.approvals,
             "--events-topic", topics.events],
            env={**os.environ, "SLUICEGATE_KAFKA_BOOTSTRAP": kafka_bootstrap},
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    unknown = cli("nobody")
    assert unknown.returncode == 1, unknown.stderr
    assert "agent 'refund-desk' has no run 'nobody'" in unknown.stderr
    assert "check the run id" in unknown.stderr
    busy = cli("busy")
    assert busy.returncode == 1
    assert "is running, not waiting for approval" in busy.stderr
    waits = cli("waits")
    assert waits.returncode == 0, waits.stderr
    assert "approved run waits" in waits.stdout


async def test_cli_decides_through_the_api_as_the_token_says(
    kafka_bootstrap: str, topics: AgentTopics
) -> None:
    app = create_app(FakeView(), CollectorRegistry(), tokens=TOKENS)
    app.include_router(
        approvals_router(
            kafka_bootstrap, {"refund-desk": topics}, decider=identity(TOKENS, Scope.APPROVE)
        )
    )
    server = await serve(app, "127.0.0.1", 0)

    async def cli(token: str, *args: str) -> tuple[int, str, str]:
        env = {**os.environ, "SLUICEGATE_API_TOKEN": token}
        env.pop("SLUICEGATE_API_TOKEN_FILE", None)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sluicegate", "approve", "waits", "--url", server.url, *args,
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), 60)
        return process.returncode or 0, out.decode(), err.decode()

    try:
        reader = await cli(READER)
        forged = await cli(ANN, "--by", "the-ceo")
        ann = await cli(ANN)
    finally:
        await server.stop()
    assert reader[0] == 1
    assert "lacks the scope 'approve' (HTTP 403 insufficient_scope)" in reader[2]
    assert forged[0] == 1
    assert "drop --by" in forged[2]
    assert ann[0] == 0, ann[2]
    assert f"approved run waits (written to {topics.approvals} by the coordinator)" in ann[1]
    (record,) = await decisions_in(kafka_bootstrap, topics.approvals, 1)
    assert json.loads(record.value or b"")["by"] == "ann"

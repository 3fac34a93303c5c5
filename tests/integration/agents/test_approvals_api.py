"""The approval routes write a person's decision to the agent's approvals topic."""

from __future__ import annotations

import json

import httpx
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from fastapi import FastAPI

from agents.agent import AgentTopics, add_agent, agents_in
from agents.approval_routes import approvals_router
from operators.pipeline import Pipeline
from sluicegate.demos.refund_desk.agent import refund_desk
from tests.conftest import TopicFactory


async def test_approve_and_reject_land_in_the_run_partition(
    kafka_bootstrap: str, new_topic: TopicFactory
) -> None:
    approvals = await new_topic(4, hint="approvals")
    p = Pipeline("api-test")
    topics = AgentTopics(tasks="t", approvals=approvals, events="e", results="r")
    add_agent(p, refund_desk("http://127.0.0.1:1"), partitions=4, topics=topics)
    agents = agents_in(p.build())
    assert agents == {"refund-desk": topics}

    app = FastAPI()
    app.include_router(approvals_router(kafka_bootstrap, agents))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        ok = await client.post("/agents/refund-desk/runs/r-1/approve", json={"by": "ann"})
        no = await client.post(
            "/agents/refund-desk/runs/r-1/reject", json={"by": "bob", "reason": "too much"}
        )
        missing = await client.post("/agents/nobody/runs/r-1/approve")
    assert ok.status_code == no.status_code == 202
    assert ok.json() == {"agent": "refund-desk", "run_id": "r-1", "approved": True,
                         "topic": approvals}  # fmt: skip
    assert missing.status_code == 404
    assert "refund-desk" in missing.json()["what_to_do"]

    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(approvals, q) for q in range(4)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        records: list[ConsumerRecord[bytes, bytes]] = []
        while len(records) < 2:
            for batch in (await consumer.getmany(timeout_ms=1000)).values():
                records.extend(batch)
    finally:
        await consumer.stop()
    decisions = [json.loads(r.value or b"") for r in records]
    assert [(d["approved"], d["by"], d["reason"]) for d in decisions] == [
        (True, "ann", None), (False, "bob", "too much"),
    ]  # fmt: skip
    assert {r.key for r in records} == {b"r-1"}
    assert len({r.partition for r in records}) == 1  # the run's partition

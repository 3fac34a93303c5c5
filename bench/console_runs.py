"""The console's Runs page at 1,000 and 100,000 runs: how long a filtered page takes, the
first time (the index reads the whole events topic) and after a few new events (it reads only
those).

    uv run python -m bench.console_runs [--runs 1000,100000] [--partitions 4]

For each size: a new events topic on the broker (``$SLUICEGATE_KAFKA_BOOTSTRAP``, else a
development broker started here) holding one ``started`` event per run, written in batches;
then the console's routes (auth off, loopback) over an `AgentDesk` of that topic, asked for
``/console/runs?status=done&meta=tenant=t7`` three times: first, again with nothing new, and
after 10 new runs. Prints a table; asserts nothing (tests/integration/console/
test_runs_at_scale.py checks the rows).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import Iterable
from typing import Any

import httpx
from aiokafka.admin import NewTopic
from fastapi import FastAPI

from bench.processes import kafka_bootstrap
from bench.table import report_table
from sluicegate.agents.declaration import AgentTopics
from sluicegate.agents.history.events import Event
from sluicegate.console import AgentDesk
from sluicegate.console.routes.approvals import approvals_router
from sluicegate.console.routes.requests import ConsoleRequests
from sluicegate.console.routes.runs import runs_router
from sluicegate.coordinator.httpapi.sessions import Sessions
from sluicegate.operators.kafka import KafkaLike, clients as kafka_clients
from sluicegate.operators.runtime.partitioner import partition_for

__all__ = ["T0", "console_app", "create_topic", "run_event", "write_events"]

T0 = 1_700_000_000.0
"""The ``at`` of run 0; run ``i`` is at ``T0 + i`` seconds."""
STATUSES = ("running", "done", "failed")


def run_event(i: int) -> Event:
    """The ``started`` event of run ``i``: status ``STATUSES[i % 3]``, tenant ``t{i % 100}``."""
    return {
        "run_id": f"run-{i:06}",
        "seq": 0,
        "type": "started",
        "status": STATUSES[i % 3],
        "step": 0,
        "at": T0 + i,
        "goal": f"refund order {i}",
        "metadata": {"tenant": f"t{i % 100}"},
    }


async def create_topic(bootstrap: KafkaLike, partitions: int) -> str:
    """A new events topic of ``partitions``."""
    name = f"events-bench-{uuid.uuid4().hex[:10]}"
    admin = kafka_clients.admin(bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()
    return name


async def write_events(
    bootstrap: KafkaLike, topic: str, partitions: int, events: Iterable[Event]
) -> int:
    """Write ``events`` where the agent would (keyed by run id, the engine's partitioner), in
    batches of up to 1 MiB per partition; how many."""
    producer = kafka_clients.producer(bootstrap, max_batch_size=1 << 20, linger_ms=50)
    await producer.start()
    try:
        batches = [producer.create_batch() for _ in range(partitions)]
        sent: list[asyncio.Future[Any]] = []
        count = 0
        for event in events:
            key = event["run_id"].encode()
            partition = partition_for(key, partitions, input_partition=0)
            value = json.dumps(event).encode()
            if batches[partition].append(key=key, value=value, timestamp=None) is None:
                sent.append(
                    await producer.send_batch(batches[partition], topic, partition=partition)
                )
                batches[partition] = producer.create_batch()
                batches[partition].append(key=key, value=value, timestamp=None)
            count += 1
        for partition, batch in enumerate(batches):
            if batch.record_count():
                sent.append(await producer.send_batch(batch, topic, partition=partition))
        await asyncio.gather(*sent)
        return count
    finally:
        await producer.stop()


def console_app(bootstrap: KafkaLike, agent: str, events_topic: str) -> tuple[FastAPI, AgentDesk]:
    """The console's runs and approvals pages over one agent's events topic, auth off (what
    ``console_router`` mounts for them, without a coordinator)."""
    topics = AgentTopics(tasks="unused", approvals="unused", events=events_topic, results="unused")
    desk = AgentDesk(bootstrap, {agent: topics})
    requests = ConsoleRequests(
        prefix="/console/", tokens=None, sessions=Sessions(), pages=[("runs", "Runs")]
    )
    app = FastAPI()
    app.include_router(runs_router(requests, desk, clock=lambda: T0 + 10_000_000))
    app.include_router(approvals_router(requests, desk, clock=time.time))
    return app, desk


async def measure(bootstrap: str, runs: int, partitions: int) -> list[str]:
    topic = await create_topic(bootstrap, partitions)
    started = time.perf_counter()
    await write_events(bootstrap, topic, partitions, (run_event(i) for i in range(runs)))
    written = time.perf_counter() - started
    app, desk = console_app(bootstrap, "desk", topic)
    query = {"agent": "desk", "status": "done", "meta": "tenant=t7"}
    transport = httpx.ASGITransport(app=app)
    timings: list[float] = []
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        for new in (0, 0, 10):
            if new:
                await write_events(
                    bootstrap, topic, partitions, (run_event(runs + i) for i in range(new))
                )
            began = time.perf_counter()
            page = await client.get("/console/runs", params=query)
            timings.append(time.perf_counter() - began)
            if page.status_code != 200:
                raise RuntimeError(f"the runs page answered {page.status_code}: {page.text[:300]}")
    return [
        f"{runs:,}",
        f"{written:.1f}",
        *(f"{t * 1000:.0f}" for t in timings),
        f"{desk.index('desk').records_read:,}",
    ]


async def measure_all(bootstrap: str, sizes: list[int], partitions: int) -> list[list[str]]:
    return [await measure(bootstrap, n, partitions) for n in sizes]


def main_with(sizes: list[int], partitions: int) -> None:
    with kafka_bootstrap() as bootstrap:  # started outside the event loop (it runs its own)
        rows = asyncio.run(measure_all(bootstrap, sizes, partitions))
    report_table(
        "console_runs",
        "Console Runs page, filtered (status and a metadata field), 50 a page",
        ["runs", "write s", "first page ms", "again ms", "after 10 new ms", "events read"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", default="1000,100000")
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    main_with([int(n) for n in args.runs.split(",")], args.partitions)


if __name__ == "__main__":
    main()

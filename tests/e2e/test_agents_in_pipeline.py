"""Agents anywhere in a pipeline (issue 12, item 3), under SIGKILLs.

The support-triage example (`sluicegate.demos.triage`): a plain operator classifies tickets,
the triage agent reads its output and tags each ticket, the refunds agent reads the triage
results and refunds the tickets tagged refund, and a plain operator reads both agents'
results (fan-in) and writes one notice per ticket and stage. One job, one snapshot. Its tools
call a service that executes every call it gets (no deduplication).

Workers and the coordinator are SIGKILLed, and killed workers come back (so the coordinator
also moves subtasks between live workers, which retire theirs first). In the end:

* every tag and every refund executed exactly once at the service;
* every run finished ``done``; ``notices`` (read_committed) holds one notice per ticket and
  stage, none twice;
* the malformed tickets are in the dead-letter topic with their reason, and nothing else is.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from sluicegate.demos.triage import REFUND_WORDS
from sluicegate.devkafka import DevBroker
from sluicegate.operators.runtime.readers import committed_from_start
from sluicegate.operators.runtime.topics import dead_letter_topic
from tests.e2e.cluster import Cluster
from tests.e2e.ledger import Ledger
from tests.helpers import wait_for

PARTITIONS = 4
TICKETS = int(os.environ.get("SLUICEGATE_PIPELINE_CHAOS_TICKETS", "40"))


def tickets() -> list[dict[str, str]]:
    """Every third ticket asks for a refund."""
    made = []
    for i in range(TICKETS):
        text = f"my kettle {i} arrived broken" if i % 3 == 0 else f"how do I descale kettle {i}?"
        made.append({"id": f"t-{i:03d}", "customer": f"c-{i % 7}", "text": text})
    return made


@pytest.fixture(params=[False, True], ids=["rocksdb-files", "state-changelog"])
async def changelog(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[bool, str]]:
    """Whether the workers run with ``--state-changelog``, and the broker: the demo's topic
    names are its own (``tickets``, ``notices``), so each run gets a broker of its own; on a
    shared one (``SLUICEGATE_KAFKA_BOOTSTRAP``) a second run read the first one's notices."""
    broker = DevBroker(port=0, data_dir=tmp_path / "kafka")
    await broker.start_async()
    try:
        yield request.param, broker.bootstrap
    finally:
        broker.stop()


async def test_two_agents_and_two_operators_take_every_effect_once_across_sigkills(
    changelog: tuple[bool, str],
    tmp_path: Path,
    ledger: Ledger,
    cluster_factory: list[Cluster],
) -> None:
    """With and without the state changelog."""
    state_changelog, kafka_bootstrap = changelog
    name = f"support-{uuid.uuid4().hex[:8]}"
    module = (
        "from sluicegate.demos.triage import support_pipeline\n"
        f"graph = support_pipeline({ledger.url!r}, name={name!r}, partitions={PARTITIONS})\n"
    )
    worker_args = ("--state-changelog",) if state_changelog else ()
    cluster = Cluster(tmp_path, module, kafka_bootstrap, slots=8, worker_args=worker_args)
    cluster_factory.append(cluster)
    for process in ("coordinator", "w1", "w2"):
        cluster.start(process)
    sent = tickets()
    refunds = sum(any(w in t["text"] for w in REFUND_WORDS) for t in sent)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
    await producer.start()
    try:  # kcat-style: no key, any partition; and two a classifier must refuse
        for ticket in sent:
            await producer.send_and_wait("tickets", json.dumps(ticket).encode())
        await producer.send_and_wait("tickets", b"{not json")
        await producer.send_and_wait("tickets", b'{"id": "t-x", "text": "no customer"}')
    finally:
        await producer.stop()

    def effects() -> int:
        return sum(ledger.calls.values())

    # Kill while writes are on the wire: a worker, the coordinator, the other worker.
    for k, victim in enumerate(("w1", "coordinator", "w2"), start=1):
        target = k * (TICKETS + refunds) // 5
        await wait_for(
            lambda target=target: effects() >= target,  # type: ignore[misc]
            timeout_s=180,
            what=f"{target} effects before killing {victim}",
        )
        cluster.alive()
        cluster.kill(victim)
        cluster.start(victim)

    notices: Counter[tuple[str, str]] = Counter()
    statuses: Counter[str] = Counter()
    expected = TICKETS + refunds
    async with committed_from_start(kafka_bootstrap, "notices", PARTITIONS) as consumer:

        async def read_notices() -> bool:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                for record in records:
                    notice = json.loads(record.value or b"{}")
                    notices[(notice["ticket"], notice["stage"])] += 1
                    statuses[notice["status"]] += 1
            cluster.alive()
            return sum(notices.values()) >= expected

        await wait_for(read_notices, timeout_s=300, what=f"{expected} notices")
        for records in (await consumer.getmany(timeout_ms=3000)).values():
            for record in records:  # nothing beyond the expected ones arrives late
                notice = json.loads(record.value or b"{}")
                notices[(notice["ticket"], notice["stage"])] += 1

    assert ledger.repeated() == {}, "an effect executed more than once"
    assert ledger.paths == Counter({"/tags": TICKETS, "/refunds": refunds})
    twice = {key: n for key, n in notices.items() if n > 1}
    assert twice == {}, f"notices published twice: {twice}"
    stages = Counter(stage for _, stage in notices)
    assert stages == Counter({"triage": TICKETS, "refund": refunds})
    assert statuses == Counter({"done": expected}), statuses

    # Dead letters are written at least once (a replay after a restore may write one again).
    async with committed_from_start(kafka_bootstrap, dead_letter_topic(name), 1) as consumer:
        dead: dict[bytes, dict[str, bytes]] = {}

        async def read_dead() -> bool:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                dead.update((r.value or b"", dict(r.headers)) for r in records)
            return len(dead) >= 2

        await wait_for(read_dead, timeout_s=60, what="the two malformed tickets dead-lettered")
    assert sorted(dead) == sorted([b"{not json", b'{"id": "t-x", "text": "no customer"}'])
    assert all(headers["sg-dlq-operator"] == b"classify" for headers in dead.values()), dead

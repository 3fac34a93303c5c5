"""Hostile records on the control topics, written with kcat (librdkafka) beside a running job
of real processes: none of them stops the coordinator or a worker or restarts the job, and
the word count stays exactly once. Whoever can write these topics can still send a
well-formed forged message (docs/security.md); this is about malformed ones."""

from __future__ import annotations

from pathlib import Path

import httpx

from sluicegate.operators.protocol.wire import to_coordinator_topic, to_workers_topic
from sluicegate.testing import produce_lines, read_committed
from tests.e2e.cluster import Cluster, start_word_count
from tests.e2e.test_kill_processes import VOCABULARY, wait_for_more_checkpoints
from tests.helpers import assert_counted_exactly_once, kcat_produce
from tests.unit.operators.protocol.test_wire import HOSTILE


async def test_hostile_control_records_stop_nothing_and_restart_nothing(
    kafka_bootstrap: str, tmp_path: Path, cluster_factory: list[Cluster]
) -> None:
    job = await start_word_count(kafka_bootstrap, tmp_path, cluster_factory, VOCABULARY, 5)
    storage = tmp_path / "storage"
    pipeline = f"wordcount-{job.tag}"
    await produce_lines(kafka_bootstrap, f"lines-{job.tag}", job.lines[::2])
    await wait_for_more_checkpoints(job.cluster, storage, 2)

    records = b"\n".join(HOSTILE) + b"\n"
    for topic in (to_coordinator_topic(pipeline), to_workers_topic(pipeline)):
        await kcat_produce(kafka_bootstrap, topic, records)
    await produce_lines(kafka_bootstrap, f"lines-{job.tag}", job.lines[1::2])
    total = sum(job.expected.values())
    counts = await read_committed(kafka_bootstrap, f"counts-{job.tag}", total, timeout_s=120)
    await wait_for_more_checkpoints(job.cluster, storage, 2)
    assert_counted_exactly_once(counts, job.expected)

    job.cluster.alive()  # every process still runs
    async with httpx.AsyncClient(timeout=10) as http:
        status = (await http.get(f"{job.cluster.api_url()}/status")).json()
    assert (status["attempt"], status["restarts"]) == (1, 0), status
    skipped = job.cluster.log_lines("coordinator", "skipped a control record")
    assert len(skipped.splitlines()) == len(HOSTILE), job.cluster.log_tails()
    for worker in ("w1", "w2"):
        assert job.cluster.log_lines(worker, "skipped a control record"), job.cluster.log_tails()

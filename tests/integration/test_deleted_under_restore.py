"""Records deleted from a source's log while the job was down (the topic's retention, or by
hand) are not silently skipped: the restored subtask says which partition, how many records
and from which offset it goes on."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import RecordsToDelete

from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.kafka import clients as kafka_clients
from sluicegate.operators.storage import open_storage
from sluicegate.testing import PARTITIONS, produce_lines, read_committed, word_count


async def test_a_restore_past_deleted_records_warns_and_goes_on(
    kafka_bootstrap: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag)
    storage = open_storage(tmp_path / "storage")

    def job() -> LocalJob:
        return LocalJob(
            graph, bootstrap=kafka_bootstrap, storage=storage, work_dir=tmp_path / "work",
            settings=CoordinatorSettings(interval_seconds=0.5),
        )  # fmt: skip

    running = job()
    await running.start()
    await produce_lines(kafka_bootstrap, f"lines-{tag}", ["a"] * 40)
    await read_committed(kafka_bootstrap, f"counts-{tag}", 40, timeout_s=60)
    await running.wait_for_checkpoints(running.completed + 2, timeout_s=60)
    await running.crash()

    # While the job is down, 20 more lines arrive, and the log loses all it holds.
    await produce_lines(kafka_bootstrap, f"lines-{tag}", ["b"] * 20)
    partitions = [TopicPartition(f"lines-{tag}", p) for p in range(PARTITIONS)]
    admin = kafka_clients.admin(kafka_bootstrap)
    await admin.start()
    try:
        consumer = kafka_clients.consumer(kafka_bootstrap)
        await consumer.start()
        try:
            ends = await consumer.end_offsets(partitions)
        finally:
            await consumer.stop()
        await admin.delete_records({tp: RecordsToDelete(ends[tp]) for tp in partitions})
    finally:
        await admin.close()

    caplog.set_level(logging.WARNING, "sluicegate.operators.runtime.subtask")
    running = job()
    await running.start()
    await produce_lines(kafka_bootstrap, f"lines-{tag}", ["c"])
    records = await read_committed(kafka_bootstrap, f"counts-{tag}", 41, timeout_s=60)
    await running.crash()

    warnings = [r.getMessage() for r in caplog.records if "deleted from the log" in r.getMessage()]
    skipped = sum(int(w.split(": ", 1)[1].split(" ", 1)[0]) for w in warnings)
    assert skipped == 20  # the b's, every one of them named
    for w in warnings:
        assert f"of lines-{tag}[" in w
        assert "it goes on from offset" in w
    assert sorted(r.key for r in records) == [b"a"] * 40 + [b"c"]  # it went on: "c" once

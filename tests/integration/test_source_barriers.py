"""Regressions (issue 11, item 1): the coordinator used to append barrier records to the users'
source topics. Now a source subtask takes barrier n at its read position when the trigger
arrives over the control plane, and never writes to a source topic; ``sg-*`` headers on a
source record are user data.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.contract import Context, Record
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.readers import committed_from_start
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.manifest import ManifestStore
from sluicegate.testing import PARTITIONS, produce_lines, read_committed, word_count
from tests.helpers import assert_counted_exactly_once, kcat_produce

FORGED = [
    [("sg-attempt", b"999"), ("sg-interval", b"1"), ("sg-writer", b"x"), ("sg-kind", b"record")],
    [
        ("sg-attempt", b"1"), ("sg-interval", b"1"), ("sg-writer", b"coordinator"),
        ("sg-kind", b"barrier"), ("sg-checkpoint", b"99999999999"),
    ],
    [("sg-attempt", b"0"), ("sg-interval", b"0"), ("sg-writer", b"x"), ("sg-kind", b"record")],
    [("sg-kind", b"banana")],
]  # fmt: skip


async def create_source(bootstrap: str, name: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    finally:
        await admin.close()


async def count_records(bootstrap: str, topic: str) -> int:
    async with committed_from_start(bootstrap, topic, PARTITIONS) as consumer:
        ends = await consumer.end_offsets(list(consumer.assignment()))
        return sum(ends.values())


async def test_source_topics_are_never_written_and_forged_headers_are_user_data(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Two pipelines read one source topic whose records carry forged ``sg-*`` headers (a
    future attempt, a huge barrier id, a stale attempt, garbage): both complete checkpoints,
    both count every word exactly once, and the source holds only what the user wrote."""
    tag = uuid.uuid4().hex[:8]
    source = f"shared-lines-{tag}"
    await create_source(kafka_bootstrap, source)
    lines = [f"a{i % 7} b{i % 3}" for i in range(400)]
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        for i, line in enumerate(lines):
            await producer.send(source, line.encode(), headers=FORGED[i % len(FORGED)])
        await producer.flush()
    finally:
        await producer.stop()
    expected = Counter(word for line in lines for word in line.split())
    jobs = [
        LocalJob(
            word_count(f"{tag}{side}", source=source),
            bootstrap=kafka_bootstrap,
            storage=open_storage(tmp_path / side / "storage"),
            work_dir=tmp_path / side / "work",
            settings=CoordinatorSettings(interval_seconds=0.2),
        )
        for side in ("x", "y")
    ]
    for job in jobs:
        await job.start()
    try:
        for job in jobs:
            await job.wait_for_checkpoints(3, timeout_s=60)
        for side in ("x", "y"):
            counts = await read_committed(
                kafka_bootstrap, f"counts-{tag}{side}", sum(expected.values()), 60
            )
            assert_counted_exactly_once(counts, expected)
        for job in jobs:
            job.raise_failure()
            assert job.attempt == 1, "a forged header caused a recovery"
    finally:
        for job in jobs:
            await job.crash()
    assert await count_records(kafka_bootstrap, source) == len(lines)


async def test_a_checkpoint_completes_before_a_backlog_is_read(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """With a backlog in the source, the first checkpoint completes at the read position of
    that moment (before, it waited for barriers behind the whole backlog)."""
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag)
    lines = [f"w{i % 50} v{i % 11} u{i % 5}" for i in range(150_000)]
    await create_source(kafka_bootstrap, f"lines-{tag}")
    await produce_lines(kafka_bootstrap, f"lines-{tag}", lines)
    storage = open_storage(tmp_path / "storage")
    job = LocalJob(
        graph,
        bootstrap=kafka_bootstrap,
        storage=storage,
        work_dir=tmp_path / "work",
        settings=CoordinatorSettings(interval_seconds=0.1),
    )
    await job.start()
    try:
        await job.wait_for_checkpoints(1, timeout_s=60)
        first = await ManifestStore(storage).latest()
        assert first is not None
        read = sum(
            offset
            for snapshot in first.subtasks.values()
            for topic, partitions in snapshot.positions.items()
            if topic == f"lines-{tag}"
            for offset in partitions.values()
        )
        assert read < len(lines), "the first checkpoint waited for the whole backlog"
        expected = Counter(word for line in lines for word in line.split())
        counts = await read_committed(kafka_bootstrap, f"counts-{tag}", sum(expected.values()), 120)
        assert_counted_exactly_once(counts, expected)
    finally:
        await job.crash()
    assert await count_records(kafka_bootstrap, f"lines-{tag}") == len(lines)


async def test_two_pipelines_sharing_a_topic_name_never_take_each_others_records(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Markers and records carry their pipeline (``sg-pipeline``): a pipeline that finds the
    other's records in a topic they both name dead-letters them instead of aligning on their
    barriers or being fenced by their attempts."""
    tag = uuid.uuid4().hex[:8]
    shared = f"mid-{tag}"

    def graph(side: str) -> JobGraph:
        def forward(record: Record, ctx: Context) -> None:
            ctx.emit(shared, record.value, key=record.key)

        def echo(record: Record, ctx: Context) -> None:
            ctx.emit(f"out-{tag}{side}", record.value, key=record.key)

        p = Pipeline(f"p-{tag}{side}")
        p.source(f"in-{tag}{side}", partitions=1)
        p.topic(shared, partitions=1)
        p.sink(f"out-{tag}{side}", partitions=1)
        p.operator("a", forward, inputs=f"in-{tag}{side}", outputs=shared)
        p.operator("b", echo, inputs=shared, outputs=f"out-{tag}{side}")
        return p.build()

    jobs = {
        side: LocalJob(
            graph(side),
            bootstrap=kafka_bootstrap,
            storage=open_storage(tmp_path / side / "storage"),
            work_dir=tmp_path / side / "work",
            settings=CoordinatorSettings(interval_seconds=0.2),
        )
        for side in ("x", "y")
    }
    for job in jobs.values():
        await job.start()
    try:
        # A higher attempt on one side: before, the other side's subtask was fenced by it.
        await jobs["y"].crash()
        await jobs["y"].start()
        for side in ("x", "y"):
            await produce_lines(
                kafka_bootstrap, f"in-{tag}{side}", [f"{side}{i}" for i in range(50)]
            )
        for side, job in jobs.items():
            out = await read_committed(kafka_bootstrap, f"out-{tag}{side}", 50, 60)
            assert sorted(r.value for r in out) == sorted(f"{side}{i}".encode() for i in range(50))
            await job.wait_for_checkpoints(job.completed + 2, timeout_s=60)
            job.raise_failure()
        assert (jobs["x"].attempt, jobs["y"].attempt) == (1, 2), "a foreign record cost a recovery"
        for side, job in jobs.items():
            assert job.subtasks["b#0"].dead_letters >= 50, side
    finally:
        for job in jobs.values():
            await job.crash()


async def test_kcat_records_with_sg_headers_are_counted_as_user_data(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The same through a client we did not write: kcat (librdkafka) sets ``sg-*`` headers."""
    tag = uuid.uuid4().hex[:8]
    await create_source(kafka_bootstrap, f"lines-{tag}")
    job = LocalJob(
        word_count(tag),
        bootstrap=kafka_bootstrap,
        storage=open_storage(tmp_path / "storage"),
        work_dir=tmp_path / "work",
        settings=CoordinatorSettings(interval_seconds=0.2),
    )
    await job.start()
    lines = [f"k{i % 5} z{i % 2}" for i in range(300)]
    try:
        forged = ["-H", "sg-attempt=999", "-H", "sg-kind=barrier", "-H", "sg-checkpoint=7"]
        await kcat_produce(
            kafka_bootstrap, f"lines-{tag}", "\n".join(lines).encode() + b"\n", *forged
        )
        expected = Counter(word for line in lines for word in line.split())
        counts = await read_committed(kafka_bootstrap, f"counts-{tag}", sum(expected.values()), 60)
        assert_counted_exactly_once(counts, expected)
        await job.wait_for_checkpoints(job.completed + 2, timeout_s=60)
        job.raise_failure()
        assert job.attempt == 1
    finally:
        await job.crash()
    assert await count_records(kafka_bootstrap, f"lines-{tag}") == len(lines)

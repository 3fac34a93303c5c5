"""What a subtask does with records, on the real broker: dead letters, at-least-once sinks,
and async process functions (concurrent across keys, in order within a key)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer, ConsumerRecord

from sluicegate.coordinator.exceptions import JobFailedError
from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.contract import Context, ProcessFunction, Record
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.readers import committed_from_start
from sluicegate.operators.runtime.sinks.at_least_once import RECORD_ID_HEADER
from sluicegate.operators.runtime.topics import dead_letter_topic
from sluicegate.operators.storage import open_storage
from tests.helpers import wait_for

Records = list[ConsumerRecord[bytes, bytes]]
Item = tuple[bytes, bytes, list[tuple[str, bytes]]]


async def produce(bootstrap: str, topic: str, items: list[Item]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        for key, value, headers in items:
            await producer.send(topic, value, key=key, partition=0, headers=headers)
        await producer.flush()
    finally:
        await producer.stop()


async def consume(
    bootstrap: str, topic: str, partitions: int, expected: int, *, data_only: bool = False
) -> Records:
    """Read ``topic`` from the start until ``expected`` records (data records only, when
    ``data_only``: barrier markers are skipped) have arrived, within 60 s."""
    async with committed_from_start(bootstrap, topic, partitions) as consumer:
        got: Records = []
        deadline = time.monotonic() + 60
        while len(got) < expected and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(
                    r for r in batch if not (data_only and ("sg-kind", b"barrier") in r.headers)
                )
        return got


@asynccontextmanager
async def running(graph: JobGraph, bootstrap: str, tmp_path: Path) -> AsyncIterator[LocalJob]:
    job = LocalJob(
        graph,
        bootstrap=bootstrap,
        storage=open_storage(tmp_path / "storage"),
        work_dir=tmp_path / "work",
        settings=CoordinatorSettings(interval_seconds=0.3),
    )
    await job.start()
    try:
        yield job
    finally:
        job.raise_failure()
        await job.crash()


def one_operator(tag: str, function: ProcessFunction, partitions: int = 1) -> JobGraph:
    p = Pipeline(f"p-{tag}")
    p.source(f"in-{tag}", partitions=partitions)
    p.sink(f"out-{tag}", partitions=1, exactly_once=False)
    p.operator("op", function, inputs=f"in-{tag}", outputs=f"out-{tag}")
    return p.build()


async def test_failing_and_malformed_records_go_to_the_dead_letter_topic(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]

    def shout(record: Record, ctx: Context) -> None:
        if record.value == b"boom":
            ctx.emit(f"out-{tag}", b"half done")  # discarded: the call raises
            raise RuntimeError("cannot shout boom")
        ctx.emit(f"out-{tag}", record.value.upper(), key=record.key)

    graph = one_operator(tag, shout)
    async with running(graph, kafka_bootstrap, tmp_path) as job:
        await produce(
            kafka_bootstrap,
            f"in-{tag}",
            [
                (b"k1", b"a", []),
                (b"k2", b"boom", []),
                # sg-* headers on a source record are user data: processed like any other
                (b"k3", b"b", [("sg-attempt", b"1")]),
                (b"k4", b"c", []),
            ],
        )
        letters = await consume(kafka_bootstrap, dead_letter_topic(graph.name), 1, 1)
        outputs = await consume(kafka_bootstrap, f"out-{tag}", 1, 3)
        assert job.subtasks["op#0"].dead_letters == 1

    # Nothing but the user's records is in the source: offsets 0..3.
    inputs = await consume(kafka_bootstrap, f"in-{tag}", 1, 4)
    offset_of = {r.key: r.offset for r in inputs if r.key is not None}
    assert sorted(offset_of.values()) == [0, 1, 2, 3]
    assert [(r.key, r.value) for r in outputs] == [(b"k1", b"A"), (b"k3", b"B"), (b"k4", b"C")]
    ids = [dict(r.headers)[RECORD_ID_HEADER] for r in outputs]
    assert ids == [f"op/in-{tag}/0/{offset_of[k]}/0".encode() for k in (b"k1", b"k3", b"k4")]

    assert [(r.key, r.value) for r in letters] == [(b"k2", b"boom")]
    (boom,) = (dict(r.headers) for r in letters)
    assert boom["sg-dlq-error"] == b"RuntimeError: cannot shout boom"
    assert boom["sg-dlq-operator"] == b"op"
    assert boom["sg-dlq-subtask"] == b"op#0"
    assert (boom["sg-dlq-topic"], boom["sg-dlq-partition"], boom["sg-dlq-offset"]) == (
        f"in-{tag}".encode(),
        b"0",
        str(offset_of[b"k2"]).encode(),
    )


async def test_one_bad_record_wedges_a_worker_no_more_its_dead_letter_log_line_is_short(
    kafka_bootstrap: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The warning used to log the error's repr: a UnicodeDecodeError's holds the whole value,
    # a 3.6 MB line that killed the `up` supervisor's line reader and then wedged the worker.
    tag = uuid.uuid4().hex[:8]
    huge = b"\xff" * 900_000

    def decode(record: Record, ctx: Context) -> None:
        ctx.emit(f"out-{tag}", record.value.decode().upper().encode(), key=record.key)

    graph = one_operator(tag, decode)
    caplog.set_level(logging.WARNING, logger="sluicegate.operators.runtime.subtask")
    async with running(graph, kafka_bootstrap, tmp_path) as job:
        await produce(kafka_bootstrap, f"in-{tag}", [(b"bad", huge, []), (b"ok", b"fine", [])])
        letters = await consume(kafka_bootstrap, dead_letter_topic(graph.name), 1, 1)
        outputs = await consume(kafka_bootstrap, f"out-{tag}", 1, 1)
        assert job.subtasks["op#0"].dead_letters == 1

    assert [(r.key, r.value) for r in letters] == [(b"bad", huge)]
    assert dict(letters[0].headers)["sg-dlq-error"].startswith(b"UnicodeDecodeError: 'utf-8'")
    assert [(r.key, r.value) for r in outputs] == [(b"ok", b"FINE")]
    warnings = [r.getMessage() for r in caplog.records if "dead-letters" in r.getMessage()]
    assert len(warnings) == 1
    assert "UnicodeDecodeError" in warnings[0]
    assert len(warnings[0]) < 500, warnings[0][:1000]


async def test_async_functions_run_concurrently_across_keys_in_order_within_a_key(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    running_now = 0
    most_at_once = 0

    async def slow_echo(record: Record, ctx: Context) -> None:
        nonlocal running_now, most_at_once
        running_now += 1
        most_at_once = max(most_at_once, running_now)
        # Later records of a key are quicker: only the per-key chain keeps them in order.
        await asyncio.sleep(0.02 * (5 - int(record.value) % 5))
        running_now -= 1
        ctx.emit(f"out-{tag}", record.value, key=record.key)

    items: list[Item] = [(f"k{i % 8}".encode(), str(i // 8).encode(), []) for i in range(80)]
    async with running(one_operator(tag, slow_echo), kafka_bootstrap, tmp_path):
        await produce(kafka_bootstrap, f"in-{tag}", items)
        outputs = await consume(kafka_bootstrap, f"out-{tag}", 1, 80)

    per_key: dict[bytes, list[int]] = defaultdict(list)
    for r in outputs:
        assert r.key is not None
        per_key[r.key].append(int(r.value))
    assert per_key == {f"k{k}".encode(): list(range(10)) for k in range(8)}
    assert most_at_once > 1


async def test_a_job_that_lost_its_checkpoints_is_refused_not_silently_reset(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]

    def echo(record: Record, ctx: Context) -> None:
        ctx.emit(f"out-{tag}", record.value, key=record.key)

    p = Pipeline(f"p-{tag}")
    p.source(f"in-{tag}", partitions=1)
    p.sink(f"out-{tag}", partitions=1)
    p.operator("op", echo, inputs=f"in-{tag}", outputs=f"out-{tag}")
    graph = p.build()
    async with running(graph, kafka_bootstrap, tmp_path / "first") as job:
        await produce(kafka_bootstrap, f"in-{tag}", [(b"k", b"v", [])])
        assert [r.value for r in await consume(kafka_bootstrap, f"out-{tag}", 1, 1)] == [b"v"]
        await job.wait_for_checkpoints(job.completed + 1, timeout_s=30)

    lost = LocalJob(
        graph,
        bootstrap=kafka_bootstrap,
        storage=open_storage(tmp_path / "empty-storage"),
        work_dir=tmp_path / "work2",
    )
    await lost.start()
    try:
        failure = await first_failure(lost, timeout_s=30)
    finally:
        await lost.crash()
    assert failure.subtask == "op#0", failure.reason
    assert "was its checkpoint storage replaced" in failure.reason


async def first_failure(job: LocalJob, timeout_s: float) -> JobFailedError:
    """Wait until a subtask of ``job`` fails and return the failure."""

    def failure() -> JobFailedError | None:
        try:
            job.raise_failure()
        except JobFailedError as failed:
            return failed
        return None

    return await wait_for(failure, timeout_s=timeout_s, what="a subtask to fail")

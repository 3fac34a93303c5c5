"""Testing a pipeline on a real Kafka broker: what sluicegate's own tests use, for yours.

A job in a few lines (``pytest-asyncio``; `DevBroker` runs the official Apache Kafka jars as a
local KRaft node, fetched once into a cache)::

    with DevBroker(port=0) as broker:
        job = LocalJob(word_count("t"), bootstrap=broker.bootstrap,
                       storage=open_storage(tmp / "checkpoints"), work_dir=tmp / "work")
        await job.start()
        await produce_lines(broker.bootstrap, "lines-t", ["a b", "b"])
        await job.wait_for_checkpoints(1, timeout_s=60)
        await job.crash()  # every subtask cancelled at once, as a SIGKILL would
        again = LocalJob(...)  # the same arguments: recovers from the last checkpoint
        await again.start()
        counts = await read_committed(broker.bootstrap, "counts-t", expected=3, timeout_s=60)

* `LocalJob`: every subtask of a pipeline and its coordinator in this process, the same code as
  ``sluicegate coordinator`` and ``worker``; ``crash()`` kills it all, a new one recovers.
* `produce_lines` writes input; `read_committed` reads a sink as a ``read_committed`` consumer
  sees it (what an exactly-once sink has published); `counts_by_word` groups a word count's.
* `word_count`: the reference pipeline (source, tokenizer, keyed counter, sink).
* Fault injection in real processes: `fault_env` is the environment that makes named fault
  points of a worker SIGKILL it (``tool.<name>.after_call``, ``<kind>.before_call``, ...: see
  `sluicegate.agents.faults`), a bounded number of times across its restarts.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

from aiokafka import ConsumerRecord

from sluicegate import Context, JobGraph, Pipeline, Record
from sluicegate.agents.faults import FAULTS_ENV, FAULTS_STATE_ENV, parse_faults
from sluicegate.coordinator.local import LocalJob
from sluicegate.devkafka import DevBroker
from sluicegate.operators.kafka import KafkaLike, clients as kafka_clients
from sluicegate.operators.runtime.readers import committed_from_start

__all__ = [
    "PARTITIONS",
    "DevBroker",
    "LocalJob",
    "counts_by_word",
    "fault_env",
    "produce_lines",
    "read_committed",
    "word_count",
]

PARTITIONS = 4
"""Partitions of every topic of `word_count`, and what `read_committed` reads by default."""


def word_count(
    tag: str,
    *,
    exactly_once: bool = True,
    source: str | None = None,
    tokenizers: int = 2,
    counters: int = 2,
) -> JobGraph:
    """Source ``lines-<tag>`` (or ``source``) → tokenizer x2 → ``words-<tag>`` → counter x2 →
    sink ``counts-<tag>`` (other parallelisms: ``tokenizers``, ``counters``)."""
    lines, words, counts = source or f"lines-{tag}", f"words-{tag}", f"counts-{tag}"

    def tokenize(record: Record, ctx: Context) -> None:
        for word in record.value.decode().split():
            ctx.emit(words, b"1", key=word.encode())

    def count(record: Record, ctx: Context) -> None:
        total = int(ctx.state.get(record.key or b"") or b"0") + int(record.value)
        ctx.state.put(record.key or b"", str(total).encode())
        ctx.emit(counts, str(total).encode(), key=record.key)

    p = Pipeline(f"wordcount-{tag}")
    p.source(lines, partitions=PARTITIONS)
    p.topic(words, partitions=PARTITIONS)
    p.sink(counts, partitions=PARTITIONS, exactly_once=exactly_once)
    p.operator("tokenizer", tokenize, inputs=lines, outputs=words, parallelism=tokenizers)
    p.operator("counter", count, inputs=words, outputs=counts, parallelism=counters)
    return p.build()


async def produce_lines(bootstrap: KafkaLike, topic: str, lines: list[str]) -> None:
    """Write ``lines`` to ``topic`` with an idempotent producer, line ``i`` keyed ``i``."""
    producer = kafka_clients.producer(bootstrap, enable_idempotence=True, linger_ms=5)
    try:
        await producer.start()
        for i, line in enumerate(lines):
            await producer.send(topic, line.encode(), key=str(i).encode())
        await producer.flush()
    finally:
        await producer.stop()


async def read_committed(
    bootstrap: KafkaLike,
    topic: str,
    expected: int,
    timeout_s: float,
    *,
    partitions: int = PARTITIONS,
) -> list[ConsumerRecord[bytes, bytes]]:
    """Every committed record of ``topic`` (of ``partitions``) from the start, once ``expected``
    have arrived or the time is up: what a ``read_committed`` consumer sees."""
    async with committed_from_start(bootstrap, topic, partitions) as consumer:
        records: list[ConsumerRecord[bytes, bytes]] = []
        deadline = time.monotonic() + timeout_s
        while len(records) < expected and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=500, max_records=10_000)).values():
                records.extend(batch)
        return records


def counts_by_word(records: Iterable[ConsumerRecord[bytes, bytes]]) -> dict[str, list[int]]:
    """The counts sink's records as word -> the counts published for it, in order (exactly
    once means ``1..n`` for a word seen ``n`` times)."""
    seen: dict[str, list[int]] = defaultdict(list)
    for r in records:
        seen[(r.key or b"").decode()].append(int(r.value or b"0"))
    return seen


def fault_env(points: Mapping[str, str], state_file: Path) -> dict[str, str]:
    """The environment for a worker process whose fault ``points`` fire: name -> probability or
    ``probabilityxMAX`` (``{"tool.issue_refund.after_call": "1x1"}``: SIGKILL the first time a
    call of ``issue_refund`` has returned, before its result is journaled). ``state_file``
    counts fires across the restarts the kills cause. A malformed point is refused here."""
    spec = ",".join(f"{name}={rate}" for name, rate in points.items())
    parse_faults(spec)
    return {FAULTS_ENV: spec, FAULTS_STATE_ENV: str(state_file)}

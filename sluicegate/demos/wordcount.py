"""The demo pipeline (``make demo``): a checkpointed word count that survives a crash.

It runs the real engine in one process (`LocalJob`): sentences into a source topic, a tokenizer
and a counter at parallelism 2, running counts into an exactly-once sink. Midway the job is
crashed (every task cancelled) and recovered from its last completed checkpoint at a new
attempt; a ``read_committed`` consumer then checks that every word's counts arrived exactly
once: 1, 2, …, N, no gap and no duplicate. Later issues grow this into the agent demo.
"""

from __future__ import annotations

import random
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

from aiokafka import ConsumerRecord

from coordinator.local import LocalJob
from operators.contract import Context, Record
from operators.graph import JobGraph
from operators.kafka import KafkaLike
from operators.kafka import clients as kafka_clients
from operators.pipeline import Pipeline
from operators.runtime.readers import committed_from_start
from operators.storage import open_storage

__all__ = ["demo_graph", "read_sink", "run_demo", "word_count"]

_WORDS = ("kafka", "barrier", "snapshot", "agent", "tool", "model", "offset", "journal")
PARTITIONS = 4


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


def demo_graph() -> JobGraph:
    """The demo word count with fixed topic names (``lines-demo`` ...), for ``--pipeline``."""
    return word_count("demo")


async def produce_lines(bootstrap: KafkaLike, topic: str, lines: list[str]) -> None:
    """Write ``lines`` to ``topic`` with an idempotent producer."""
    producer = kafka_clients.producer(bootstrap, enable_idempotence=True, linger_ms=5)
    try:
        await producer.start()
        for i, line in enumerate(lines):
            await producer.send(topic, line.encode(), key=str(i).encode())
        await producer.flush()
    finally:
        await producer.stop()


async def read_sink(
    bootstrap: KafkaLike, topic: str, expected: int, timeout_s: float
) -> list[ConsumerRecord[bytes, bytes]]:
    """Every committed record of ``topic`` once ``expected`` have arrived (or the time is up)."""
    async with committed_from_start(bootstrap, topic, PARTITIONS) as consumer:
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


async def run_demo(
    bootstrap: KafkaLike, records: int, *, state_dir: Path | None = None, seed: int = 7
) -> int:
    """Run the word count with a crash in the middle; print what happened; 0 when exact."""
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag)
    rng = random.Random(seed)
    lines = [" ".join(rng.choices(_WORDS, k=rng.randint(1, 4))) for _ in range(records)]
    expected = Counter(word for line in lines for word in line.split())
    root = state_dir or Path(tempfile.mkdtemp(prefix="sluicegate-demo-"))
    storage = open_storage(root / "checkpoints")
    print(f"pipeline {graph.name}: lines -> tokenizer x2 -> words -> counter x2 -> counts (sink)")
    print(f"checkpoints in {root / 'checkpoints'}, every 0.5 s")

    def job() -> LocalJob:
        return LocalJob(
            graph,
            bootstrap=bootstrap,
            storage=storage,
            work_dir=root / "work",
            interval_seconds=0.5,
        )

    started = time.monotonic()
    first = job()
    await first.start()
    await produce_lines(bootstrap, f"lines-{tag}", lines[: records // 2])
    print(f"produced {records // 2} lines")
    await first.wait_for_checkpoints(2, timeout_s=120)
    await first.crash()
    print(f"CRASH after checkpoints {first.completed}: every subtask cancelled at once")

    second = job()
    await second.start()
    print(f"recovered at attempt {second.attempt} from checkpoint {second.restored_from}")
    await produce_lines(bootstrap, f"lines-{tag}", lines[records // 2 :])
    print(f"produced {records - records // 2} more lines")

    total = sum(expected.values())
    published = await read_sink(bootstrap, f"counts-{tag}", total, timeout_s=300)
    second.raise_failure()
    await second.crash()
    elapsed = time.monotonic() - started

    seen = counts_by_word(published)
    print(f"{len(published)} counts published exactly-once in {elapsed:.1f}s:")
    exact = len(published) == total
    for word, n in expected.most_common():
        ok = seen[word] == list(range(1, n + 1))
        exact = exact and ok
        print(
            f"  {word:<10} {n:>7}  {'1..N exactly once' if ok else 'WRONG: ' + str(seen[word][:5])}"
        )
    print("OK: every word counted exactly once across the crash" if exact else "MISMATCH")
    return 0 if exact else 1

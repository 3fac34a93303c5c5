"""Word-count throughput on the real broker: checkpointing off vs every second, side by side.

    uv run python -m bench.wordcount_throughput [--lines 50000] [--rounds 2]

Each round runs both configurations one after the other on fresh topics (the order alternates
between rounds, so drift on a noisy machine hits both). The job is started, the lines arrive in
chunks at about 10,000 lines/s (faster than one process counts them, so there is always a
backlog, and barriers land between chunks rather than all behind the backlog), and the run is
timed until the counter has processed every word. With checkpointing the sink is exactly-once
(outputs published per checkpoint in a transaction); without, an exactly-once sink would never
publish, so that configuration publishes at once (at least once): both send every output. Uses
``SLUICEGATE_KAFKA_BOOTSTRAP`` when set, else starts the development broker.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
import uuid
from pathlib import Path

from bench.table import print_table
from coordinator.local import LocalJob
from operators.storage import open_storage
from sluicegate.demos.wordcount import produce_lines, word_count
from sluicegate.devkafka import DevBroker

_WORDS = [f"w{i:03d}" for i in range(200)]


async def run_once(bootstrap: str, lines: list[str], words: int, interval: float | None) -> float:
    """Seconds for the job to count every word of ``lines`` (checkpoints every ``interval``)."""
    tag = uuid.uuid4().hex[:8]
    # Without checkpoints an exactly-once sink never publishes: off publishes at once instead.
    graph = word_count(tag, exactly_once=interval is not None)
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as root:
        job = LocalJob(
            graph,
            bootstrap=bootstrap,
            storage=open_storage(Path(root) / "storage"),
            work_dir=Path(root) / "work",
            interval_seconds=interval or 1.0,
            checkpointing=interval is not None,
        )
        await job.start()  # creates the topics
        started = time.perf_counter()
        feeding = asyncio.create_task(feed(bootstrap, f"lines-{tag}", lines))
        counters = [s for name, s in job.subtasks.items() if name.startswith("counter#")]
        while sum(s.records_out for s in counters) < words:
            job.raise_failure()
            await asyncio.sleep(0.02)
        elapsed = time.perf_counter() - started
        await feeding
        completed = job.completed
        await job.crash()
    print(f"  {'off' if interval is None else f'every {interval}s'}: {elapsed:.2f}s, "
          f"{completed} checkpoints")  # fmt: skip
    return elapsed


async def feed(bootstrap: str, topic: str, lines: list[str], chunk: int = 1000) -> None:
    """Write ``lines`` in chunks, one chunk every 0.1 s."""
    for start in range(0, len(lines), chunk):
        await produce_lines(bootstrap, topic, lines[start : start + chunk])
        await asyncio.sleep(0.1)


async def bench(bootstrap: str, lines_count: int, rounds: int) -> None:
    rng = random.Random(1)
    lines = [" ".join(rng.choices(_WORDS, k=rng.randint(1, 5))) for _ in range(lines_count)]
    words = sum(len(line.split()) for line in lines)
    results: dict[str, list[float]] = {"off": [], "every 1 s": []}
    for r in range(rounds):
        order = [None, 1.0] if r % 2 == 0 else [1.0, None]
        for interval in order:
            seconds = await run_once(bootstrap, lines, words, interval)
            results["off" if interval is None else "every 1 s"].append(seconds)
    base = min(results["off"])
    rows = [
        (name, f"{lines_count:,}", f"{words:,}", f"{min(times):.2f}", f"{words / min(times):,.0f}",
         f"{min(times) / base:.3f}")
        for name, times in results.items()
    ]  # fmt: skip
    print_table(("checkpointing", "lines", "words", "best s", "words/s", "time vs off"), rows)
    print(f"checkpointing cost: {min(results['every 1 s']) / base - 1:+.1%} (target: under 10%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    given = os.environ.get("SLUICEGATE_KAFKA_BOOTSTRAP")
    if given:
        asyncio.run(bench(given, args.lines, args.rounds))
        return
    with DevBroker(port=0) as broker:
        asyncio.run(bench(broker.bootstrap, args.lines, args.rounds))


if __name__ == "__main__":
    main()

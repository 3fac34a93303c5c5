"""Word-count throughput on the real broker: checkpointing off vs every second, side by side.

    uv run python -m bench.wordcount_throughput [--lines 50000] [--rounds 9] [--state-changelog]

Both configurations do the same work with the same sink: an at-least-once sink, which
publishes every count at once whether checkpoints run or not (an exactly-once sink publishes
only when a checkpoint completes, so it would not compare like with like). Each round runs
both on fresh topics, one after the other, in an order that alternates between rounds (drift
on a noisy machine hits both). The whole input is written to the lines topic before the job
starts, so the engine is the bottleneck from the first moment (it once arrived in chunks of
1,000 lines every 0.1 s, slower than the engine, so every configuration finished in the
feed's time and checkpoints looked free). A run is timed from `LocalJob.start` (start-up is
a fixed part of it, shown in its own column) to the last count visible to a
``read_committed`` consumer of the sink: what a user downstream sees. The table shows the
median and the spread (min-max) of each, and the median of the per-round ratios. It also
shows the CPU seconds the process used in the same span (every thread, RocksDB's included),
and its ratio to the wall time (near 1: one core busy, the engine is the bottleneck): on a
shared machine the wall-time ratio swings by tens of percent
between rounds, the CPU ratio much less, so it tells whether a change in the wall-time ratio
is the checkpoints' work or the neighbours'. Uses ``SLUICEGATE_KAFKA_BOOTSTRAP`` when set,
else starts the development broker. ``--state-changelog`` adds a third configuration to every
round: checkpoints every second with the state changelog (architecture.md, "State
changelog").
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import tempfile
import time
import uuid
from pathlib import Path
from statistics import median

from bench.table import report_table
from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.devkafka import DevBroker
from sluicegate.operators.runtime.readers import committed_from_start
from sluicegate.operators.runtime.subtask import SubtaskSettings
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.storage import open_storage
from sluicegate.testing import PARTITIONS, produce_lines, word_count

_WORDS = [f"w{i:03d}" for i in range(200)]


_OFF, _ON, _CHANGELOG = "off", "every 1 s", "every 1 s, changelog"


async def run_once(
    bootstrap: str, lines: list[str], words: int, config: str
) -> tuple[float, float, float]:
    """Seconds from `LocalJob.start` until every count of ``lines`` (written before it) is
    visible in the sink (checkpoints as ``config`` says), the CPU seconds the process used
    meanwhile, and the seconds `LocalJob.start` took (start-up: until subtasks are assigned)."""
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag, exactly_once=False)  # the same sink whether checkpoints run or not
    await ensure_topics(bootstrap, graph)
    await produce_lines(bootstrap, f"lines-{tag}", lines)  # all of it before the job starts
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as root:
        job = LocalJob(
            graph,
            bootstrap=bootstrap,
            storage=open_storage(Path(root) / "storage"),
            work_dir=Path(root) / "work",
            settings=CoordinatorSettings(interval_seconds=1.0, periodic_checkpoints=config != _OFF),
            subtask_settings=SubtaskSettings(state_changelog=config == _CHANGELOG),
        )
        async with committed_from_start(bootstrap, f"counts-{tag}", PARTITIONS) as sink:
            started, cpu_started = time.perf_counter(), time.process_time()
            await job.start()
            start_up = time.perf_counter() - started
            seen = 0
            while seen < words:
                job.raise_failure()
                batches = await sink.getmany(timeout_ms=100, max_records=50_000)
                seen += sum(len(batch) for batch in batches.values())
            elapsed = time.perf_counter() - started
            cpu = time.process_time() - cpu_started
        completed = job.completed
        await job.crash()
    print(
        f"  {config}: {elapsed:.2f}s (start-up {start_up:.2f}s), {cpu:.2f} CPU s, "
        f"{completed} checkpoints"
    )
    return elapsed, cpu, start_up


async def bench(bootstrap: str, lines_count: int, rounds: int, changelog: bool) -> None:
    rng = random.Random(1)
    lines = [" ".join(rng.choices(_WORDS, k=rng.randint(1, 5))) for _ in range(lines_count)]
    words = sum(len(line.split()) for line in lines)
    configs = [_OFF, _ON, _CHANGELOG] if changelog else [_OFF, _ON]
    results: dict[str, list[float]] = {c: [] for c in configs}
    cpu: dict[str, list[float]] = {c: [] for c in configs}
    start_up: dict[str, list[float]] = {c: [] for c in configs}
    for r in range(rounds):
        for config in configs[r % len(configs) :] + configs[: r % len(configs)]:
            seconds, cpu_seconds, start_s = await run_once(bootstrap, lines, words, config)
            results[config].append(seconds)
            cpu[config].append(cpu_seconds)
            start_up[config].append(start_s)
    rows = [
        (name, f"{lines_count:,}", f"{words:,}", f"{median(times):.2f}",
         f"{min(times):.2f}-{max(times):.2f}", f"{median(start_up[name]):.2f}",
         f"{words / median(times):,.0f}", f"{median(cpu[name]):.2f}",
         f"{median(c / t for c, t in zip(cpu[name], times, strict=True)):.2f}")
        for name, times in results.items()
    ]  # fmt: skip
    notes = [
        "The input is written before the job starts; timed from LocalJob.start (start-up s: "
        "until its subtasks are assigned) to the last count visible read_committed. CPU/wall "
        "near 1: the process kept a core busy (the engine, not the feed, is the bottleneck)."
    ]
    for config in configs[1:]:
        ratios = [on / off for on, off in zip(results[config], results[_OFF], strict=True)]
        cpu_ratios = [on / off for on, off in zip(cpu[config], cpu[_OFF], strict=True)]
        notes += [
            f"checkpointing {config} costs {median(ratios) - 1:+.1%} (median of {rounds} paired "
            f"rounds; spread {min(ratios) - 1:+.1%} to {max(ratios) - 1:+.1%}; target: under "
            f"5%); CPU seconds {median(cpu_ratios) - 1:+.1%} (spread "
            f"{min(cpu_ratios) - 1:+.1%} to {max(cpu_ratios) - 1:+.1%})"
        ]
    report_table(
        "wordcount_throughput",
        "Word count, one process: checkpointing off vs every second (same at-least-once sink)",
        ("checkpointing", "lines", "words", "median s", "spread s", "start-up s", "words/s",
         "CPU s", "CPU/wall"),
        rows,
        notes,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--state-changelog", action="store_true")
    args = parser.parse_args()
    # Fresh topics: the first produce can meet a leader not elected yet (and retries).
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    given = os.environ.get("SLUICEGATE_KAFKA_BOOTSTRAP")
    if given:
        asyncio.run(bench(given, args.lines, args.rounds, args.state_changelog))
        return
    with DevBroker(port=0) as broker:
        asyncio.run(bench(broker.bootstrap, args.lines, args.rounds, args.state_changelog))


if __name__ == "__main__":
    main()

"""Word-count throughput on the real broker: checkpointing off vs every second, side by side.

    uv run python -m bench.wordcount_throughput [--lines 50000] [--rounds 9] [--state-changelog]
                                                [--exactly-once]

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
its ratio to the wall time (near 1: one core busy, the engine is the bottleneck), and the
same with the broker's CPU added, also per word (`bench.cpu`; what the broker does for the
topics, the sink and the checkpoints' offsets is part of our durability): on a shared
machine the wall-time ratio swings by tens of percent between rounds, the CPU ratio much
less, so it tells whether a change in the wall-time ratio is the checkpoints' work or the
neighbours'. Uses ``SLUICEGATE_KAFKA_BOOTSTRAP`` when set,
else starts the development broker. ``--state-changelog`` adds a third configuration to every
round: checkpoints every second with the state changelog (architecture.md, "State
changelog"). ``--exactly-once`` adds another: checkpoints every second with the exactly-once
sink (its counts published in a Kafka transaction when the checkpoint covering them completes),
compared with checkpoints every second and the at-least-once sink (target: within 10%). It is
timed the same way, to the last count visible ``read_committed``, so it includes the wait for
the checkpoint that publishes the last counts: up to one interval, which a longer input
amortizes.
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
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from bench.cpu import BrokerCpu
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
_EXACTLY_ONCE = "every 1 s, exactly-once sink"


async def run_once(bootstrap: str, lines: list[str], words: int, config: str) -> Run:
    """A run of ``lines`` (written before the job starts), checkpoints as ``config`` says."""
    tag = uuid.uuid4().hex[:8]
    broker = BrokerCpu(bootstrap)
    # The same sink whether checkpoints run or not; the exactly-once one is its own config.
    graph = word_count(tag, exactly_once=config == _EXACTLY_ONCE)
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
            broker.start()
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
            broker_cpu = broker.seconds()
        completed = job.completed
        await job.crash()
    with_broker = "?" if broker_cpu is None else f"{cpu + broker_cpu:.2f}"
    print(
        f"  {config}: {elapsed:.2f}s (start-up {start_up:.2f}s), {cpu:.2f} CPU s "
        f"({with_broker} with the broker's), {completed} checkpoints"
    )
    return Run(elapsed, cpu, start_up, broker_cpu)


@dataclass(frozen=True, slots=True)
class Run:
    """One run: wall seconds from `LocalJob.start` to the last count visible, the process's
    CPU seconds meanwhile, the seconds `LocalJob.start` took (until subtasks are assigned),
    and the broker's CPU seconds meanwhile (``None``: the broker is not a local process)."""

    seconds: float
    cpu: float
    start_up: float
    broker_cpu: float | None


def _with_broker(run: Run) -> float:
    """The run's CPU seconds with the broker's (only the process's when that is unknown)."""
    return run.cpu + (run.broker_cpu or 0.0)


async def bench(
    bootstrap: str, lines_count: int, rounds: int, changelog: bool, exactly_once: bool
) -> None:
    rng = random.Random(1)
    lines = [" ".join(rng.choices(_WORDS, k=rng.randint(1, 5))) for _ in range(lines_count)]
    words = sum(len(line.split()) for line in lines)
    configs = [_OFF, _ON] + [_CHANGELOG] * changelog + [_EXACTLY_ONCE] * exactly_once
    runs: dict[str, list[Run]] = {c: [] for c in configs}
    for r in range(rounds):
        for config in configs[r % len(configs) :] + configs[: r % len(configs)]:
            runs[config].append(await run_once(bootstrap, lines, words, config))
    results = {c: [run.seconds for run in done] for c, done in runs.items()}
    cpu = {c: [run.cpu for run in done] for c, done in runs.items()}
    rows = []
    for name, times in results.items():
        brokers = [run.broker_cpu for run in runs[name]]
        known = [b for b in brokers if b is not None]
        complete = len(known) == len(brokers)
        total = median(c + b for c, b in zip(cpu[name], known, strict=True)) if complete else None
        rows.append((
            name, f"{lines_count:,}", f"{words:,}", f"{median(times):.2f}",
            f"{min(times):.2f}-{max(times):.2f}", f"{median(r.start_up for r in runs[name]):.2f}",
            f"{words / median(times):,.0f}", f"{median(cpu[name]):.2f}",
            f"{median(c / t for c, t in zip(cpu[name], times, strict=True)):.2f}",
            "-" if total is None else f"{total:.2f}",
            f"{median(cpu[name]) * 1e6 / words:.1f}",
            "-" if total is None else f"{total * 1e6 / words:.1f}",
        ))  # fmt: skip
    notes = [
        "The input is written before the job starts; timed from LocalJob.start (start-up s: "
        "until its subtasks are assigned) to the last count visible read_committed. CPU/wall "
        "near 1: the process kept a core busy (the engine, not the feed, is the bottleneck). "
        "With broker: the broker JVM's CPU over the same span added (bench.cpu; '-' when the "
        "broker is not a local process); the broker does not fsync a write (Kafka's default "
        "flush policy), the sink is at-least-once (but on the exactly-once row)."
    ]
    for config in [c for c in configs[1:] if c != _EXACTLY_ONCE]:
        ratios = [on / off for on, off in zip(results[config], results[_OFF], strict=True)]
        cpu_ratios = [on / off for on, off in zip(cpu[config], cpu[_OFF], strict=True)]
        with_broker = [_with_broker(on) / _with_broker(off)
                       for on, off in zip(runs[config], runs[_OFF], strict=True)]  # fmt: skip
        notes += [
            f"checkpointing {config} costs {median(ratios) - 1:+.1%} (median of {rounds} paired "
            f"rounds; spread {min(ratios) - 1:+.1%} to {max(ratios) - 1:+.1%}; target: under "
            f"5%); CPU seconds {median(cpu_ratios) - 1:+.1%} (spread "
            f"{min(cpu_ratios) - 1:+.1%} to {max(cpu_ratios) - 1:+.1%}); with the broker's "
            f"{median(with_broker) - 1:+.1%} (spread {min(with_broker) - 1:+.1%} to "
            f"{max(with_broker) - 1:+.1%})"
        ]
    if exactly_once:
        notes.append(_versus(runs[_EXACTLY_ONCE], runs[_ON], rounds))
    report_table(
        "wordcount_throughput",
        "Word count, one process: checkpointing off vs every second (same at-least-once sink;"
        " the exactly-once sink on its own row)",
        ("checkpointing", "lines", "words", "median s", "spread s", "start-up s", "words/s",
         "CPU s", "CPU/wall", "with broker CPU s", "CPU µs/word", "with broker µs/word"),
        rows,
        notes,
    )  # fmt: skip


def _versus(exactly_once: list[Run], at_least_once: list[Run], rounds: int) -> str:
    """The exactly-once sink's cost against the at-least-once sink, both checkpointing."""
    pairs = list(zip(exactly_once, at_least_once, strict=True))
    wall = [e.seconds / a.seconds for e, a in pairs]
    cpu = [e.cpu / a.cpu for e, a in pairs]
    with_broker = [_with_broker(e) / _with_broker(a) for e, a in pairs]

    def said(ratios: list[float]) -> str:
        return (
            f"{median(ratios) - 1:+.1%} (spread {min(ratios) - 1:+.1%} to {max(ratios) - 1:+.1%})"
        )

    return (
        f"the exactly-once sink against the at-least-once sink, both checkpointing every 1 s, "
        f"costs {said(wall)} wall (median of {rounds} paired rounds; target: under 10%), "
        f"CPU seconds {said(cpu)}, with the broker's {said(with_broker)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--state-changelog", action="store_true")
    parser.add_argument("--exactly-once", action="store_true")
    args = parser.parse_args()
    # Fresh topics: the first produce can meet a leader not elected yet (and retries).
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    given = os.environ.get("SLUICEGATE_KAFKA_BOOTSTRAP")
    if given:
        asyncio.run(bench(given, args.lines, args.rounds, args.state_changelog, args.exactly_once))
        return
    with DevBroker(port=0) as broker:
        asyncio.run(
            bench(
                broker.bootstrap, args.lines, args.rounds, args.state_changelog, args.exactly_once
            )
        )


if __name__ == "__main__":
    main()

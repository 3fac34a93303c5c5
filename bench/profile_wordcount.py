"""What a word count's CPU a word is, and where it goes: the engine's per-record path alone.

    uv run python -m bench.profile_wordcount [--lines 20000] [--rounds 3]

The lines are produced first (a backlog, as a new user's harness writes its input), then a
`LocalJob` (checkpoints every second, exactly-once sink) counts every word, timed from the
job's start to the moment its counters have emitted every count (no reader of the output in
this process: only the engine's CPU is counted).

1. ``--rounds`` plain runs: the process's CPU µs a word, and with the broker's CPU (`bench.cpu`)
   over the same span, median and spread: the figure of the issue-29 target (12 µs a word).
2. One run under ``cProfile``: Python function calls per record processed (lines through the
   tokenizer plus words through the counter) in all and in sluicegate's own code, and the
   functions of sluicegate's own with the most time. Load changes the calls little: compare
   them before and after a change to the per-record path.

Uses ``SLUICEGATE_KAFKA_BOOTSTRAP`` when set, else starts the development broker.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import random
import tempfile
import time
import uuid
from pathlib import Path

from bench.cpu import BrokerCpu
from bench.stats import median_spread
from bench.table import report_table
from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.devkafka import DevBroker
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.storage import open_storage
from sluicegate.testing import produce_lines, word_count

_WORDS = [f"w{i:03d}" for i in range(200)]
_OURS = ("/operators/", "/agents/", "/coordinator/", "/sluicegate/")


async def count_words(
    bootstrap: str, lines: list[str], profile: cProfile.Profile | None = None
) -> tuple[int, float, float | None]:
    """Count every word of ``lines`` (produced beforehand), under ``profile`` if given: the
    records processed, and the CPU seconds of this process and of the broker meanwhile (the
    broker's None when it is not a local process)."""
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag)
    words = sum(len(line.split()) for line in lines)
    with tempfile.TemporaryDirectory(prefix="sluicegate-profile-") as root:
        job = LocalJob(
            graph,
            bootstrap=bootstrap,
            storage=open_storage(Path(root) / "storage"),
            work_dir=Path(root) / "work",
            settings=CoordinatorSettings(interval_seconds=1.0),
        )
        await ensure_topics(bootstrap, graph)
        await produce_lines(bootstrap, f"lines-{tag}", lines)
        broker = BrokerCpu(bootstrap)
        broker.start()
        cpu_started = time.process_time()
        if profile is not None:
            profile.enable()
        await job.start()  # the subtasks find a backlog
        counters = [s for name, s in job.subtasks.items() if name.startswith("counter#")]
        while sum(s.records_out for s in counters) < words:
            job.raise_failure()
            await asyncio.sleep(0.02)
        if profile is not None:
            profile.disable()
        cpu, broker_cpu = time.process_time() - cpu_started, broker.seconds()
        await job.crash()
    return len(lines) + words, cpu, broker_cpu


def report(profile: cProfile.Profile, records: int) -> None:
    stats = pstats.Stats(profile)
    entries = stats.stats  # type: ignore[attr-defined]
    total = sum(calls for (_, calls, _, _, _) in entries.values())
    ours = {
        func: (calls, own)
        for func, (_, calls, own, _, _) in entries.items()
        if any(part in func[0] for part in _OURS)
    }
    rows = [
        ("all Python calls", f"{total / records:.1f}"),
        ("sluicegate's own", f"{sum(c for c, _ in ours.values()) / records:.1f}"),
    ]
    title = "Word count per-record path: Python calls per record"
    report_table("profile_wordcount", title, ("calls per record", "count"), rows)
    top = sorted(ours.items(), key=lambda item: item[1][1], reverse=True)[:15]
    report_table(
        "profile_wordcount",
        "Word count per-record path: the 15 sluicegate functions with the most own time",
        ("sluicegate function", "calls/record", "own s"),
        [
            (f"{Path(f[0]).parent.name}/{Path(f[0]).name}:{f[2]}", f"{c / records:.2f}", f"{t:.2f}")
            for f, (c, t) in top
        ],
    )


def cpu_table(runs: list[tuple[float, float | None]], words: int, lines_count: int) -> None:
    """The CPU µs a word of the plain runs, median and spread, with the broker's."""
    own = [cpu / words * 1e6 for cpu, _ in runs]
    known = [(cpu + b) / words * 1e6 for cpu, b in runs if b is not None]
    both = "-" if len(known) < len(runs) else median_spread(known)
    report_table(
        "profile_wordcount",
        f"Word count in one process, input written first: {lines_count:,} lines, {words:,} "
        f"words, {len(runs)} runs",
        ("CPU µs a word, median (spread)", "with the broker's"),
        [(median_spread(own), both)],
        ["From LocalJob.start to the last count emitted; exactly-once sink, checkpoints "
         "every second; no reader of the output in the process; target 12 µs a word."],
    )  # fmt: skip


async def bench(bootstrap: str, lines_count: int, rounds: int) -> None:
    rng = random.Random(1)
    lines = [" ".join(rng.choices(_WORDS, k=rng.randint(1, 5))) for _ in range(lines_count)]
    words = sum(len(line.split()) for line in lines)
    runs = []
    for _ in range(rounds):
        _, cpu, broker_cpu = await count_words(bootstrap, lines)
        runs.append((cpu, broker_cpu))
    cpu_table(runs, words, lines_count)
    profile = cProfile.Profile()
    records, _, _ = await count_words(bootstrap, lines, profile)
    report(profile, records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3, help="plain runs for the CPU a word")
    args = parser.parse_args()
    given = os.environ.get("SLUICEGATE_KAFKA_BOOTSTRAP")
    if given:
        asyncio.run(bench(given, args.lines, args.rounds))
        return
    with DevBroker(port=0) as broker:
        asyncio.run(bench(broker.bootstrap, args.lines, args.rounds))


if __name__ == "__main__":
    main()

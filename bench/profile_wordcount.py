"""Where a word count's CPU goes, per record: a deterministic profile of the hot path.

    uv run python -m bench.profile_wordcount [--lines 20000]

The lines are produced first (a backlog), then a `LocalJob` (checkpoints every second,
exactly-once sink) counts every word under ``cProfile``. Wall time on a shared machine is
noise; function calls are not: the table shows Python function calls per record processed
(lines through the tokenizer plus words through the counter) in all and in sluicegate's own
code, and the functions of sluicegate's own with the most time. Compare the calls per record
before and after a change to the per-record path. Uses ``SLUICEGATE_KAFKA_BOOTSTRAP`` when
set, else starts the development broker.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import random
import tempfile
import uuid
from pathlib import Path

from bench.table import report_table
from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.devkafka import DevBroker
from sluicegate.operators.storage import open_storage
from sluicegate.testing import produce_lines, word_count

_WORDS = [f"w{i:03d}" for i in range(200)]
_OURS = ("/operators/", "/agents/", "/coordinator/", "/sluicegate/")


async def count_words(bootstrap: str, lines: list[str], profile: cProfile.Profile) -> int:
    """Count every word of ``lines`` (produced beforehand) under ``profile``; the records
    processed."""
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
        await job.start()  # creates the topics; the subtasks find a backlog
        await produce_lines(bootstrap, f"lines-{tag}", lines)
        counters = [s for name, s in job.subtasks.items() if name.startswith("counter#")]
        profile.enable()
        while sum(s.records_out for s in counters) < words:
            job.raise_failure()
            await asyncio.sleep(0.02)
        profile.disable()
        await job.crash()
    return len(lines) + words


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


async def bench(bootstrap: str, lines_count: int) -> None:
    rng = random.Random(1)
    lines = [" ".join(rng.choices(_WORDS, k=rng.randint(1, 5))) for _ in range(lines_count)]
    profile = cProfile.Profile()
    records = await count_words(bootstrap, lines, profile)
    report(profile, records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20_000)
    args = parser.parse_args()
    given = os.environ.get("SLUICEGATE_KAFKA_BOOTSTRAP")
    if given:
        asyncio.run(bench(given, args.lines))
        return
    with DevBroker(port=0) as broker:
        asyncio.run(bench(broker.bootstrap, args.lines))


if __name__ == "__main__":
    main()

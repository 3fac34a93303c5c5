"""The engine's promise on a real broker: a word count, crashed and restored several times,
counts every word exactly once, and a read_committed consumer of the sink sees each count
exactly once.

Crashes cancel every task of the job at once (real processes and SIGKILL come with the
coordinator); they land wherever the random schedule puts them: mid-alignment, mid-upload, after
completion before publication.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from pathlib import Path

from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.runtime.subtask import SubtaskSettings
from sluicegate.operators.storage import open_storage
from sluicegate.testing import produce_lines, read_committed, word_count
from tests.helpers import assert_counted_exactly_once

VOCABULARY = [f"w{i:02d}" for i in range(40)]
LINES = 100_000


async def test_word_count_survives_repeated_crashes_exactly_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    rng = random.Random(20261130)
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag)
    lines = [" ".join(rng.choices(VOCABULARY, k=rng.randint(1, 3))) for _ in range(LINES)]
    expected = Counter(word for line in lines for word in line.split())
    storage = open_storage(tmp_path / "storage")

    def job() -> LocalJob:
        return LocalJob(
            graph,
            bootstrap=kafka_bootstrap,
            storage=storage,
            work_dir=tmp_path / "work",
            settings=CoordinatorSettings(interval_seconds=0.5),
            subtask_settings=SubtaskSettings(max_buffered=50_000),
        )

    # Feed the input in four parts, crashing the job at a random moment after each part:
    # a random number of completed checkpoints, then a random delay, lands the crash anywhere
    # in the checkpoint cycle (aligning, uploading, publishing, or between checkpoints).
    restored_from: list[int] = []
    running = job()
    await running.start()
    for part in range(4):
        await produce_lines(kafka_bootstrap, f"lines-{tag}", lines[part::4])
        await running.wait_for_checkpoints(rng.randint(1, 3), timeout_s=120)
        await asyncio.sleep(rng.uniform(0, 0.6))  # where in the cycle to crash, not a wait
        await running.crash()
        running = job()
        await running.start()
        assert running.restored_from is not None
        restored_from.append(running.restored_from)

    total = sum(expected.values())
    records = await read_committed(kafka_bootstrap, f"counts-{tag}", total, timeout_s=300)
    running.raise_failure()
    await running.wait_for_checkpoints(running.completed + 1, timeout_s=60)
    # Read again after one more checkpoint: nothing beyond the expected outputs may appear.
    records = await read_committed(kafka_bootstrap, f"counts-{tag}", total + 1, timeout_s=5)
    await running.crash()

    assert restored_from == sorted(set(restored_from))  # each recovery from a newer checkpoint
    assert_counted_exactly_once(records, expected)

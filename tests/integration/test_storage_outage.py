"""Regression (issue 11, item 4): a transient checkpoint-storage write failure ended the
coordinator (and ``up`` with it), and a failing upload failed its subtask, which cost a global
recovery each time. Now the checkpoint is aborted, the job runs on at the same attempt, and
checkpoints complete again once storage is back; the sink still counts every word once.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.storage import Storage, StorageUnavailableError, open_storage
from sluicegate.testing import produce_lines, read_committed, word_count
from tests.helpers import assert_counted_exactly_once, wait_for

_WRITES = {"put", "put_if_absent", "put_file", "put_content_addressed"}


class OutageStorage:
    """Delegates to ``inner``; while ``down``, every write raises `StorageUnavailableError`."""

    def __init__(self, inner: Storage) -> None:
        self.inner = inner
        self.down = False
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if name not in _WRITES:
            return method

        async def write(path: str, *args: Any, **kwargs: Any) -> Any:
            if self.down:
                self.refused += 1
                raise StorageUnavailableError(name, path, "injected outage")
            return await method(path, *args, **kwargs)

        return write


async def test_a_storage_outage_aborts_checkpoints_without_a_recovery(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    rng = random.Random(11)
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag)
    vocabulary = [f"w{i:02d}" for i in range(20)]
    lines = [" ".join(rng.choices(vocabulary, k=3)) for _ in range(6000)]
    storage = OutageStorage(open_storage(tmp_path / "storage"))
    job = LocalJob(
        graph,
        bootstrap=kafka_bootstrap,
        storage=storage,
        work_dir=tmp_path / "work",
        settings=CoordinatorSettings(interval_seconds=0.3),
    )
    await job.start()
    try:
        await produce_lines(kafka_bootstrap, f"lines-{tag}", lines[:3000])
        await job.wait_for_checkpoints(1, timeout_s=60)
        storage.down = True
        before, attempt = job.completed, job.attempt

        def refused_for_a_while() -> bool:  # triggers, uploads and manifests refused
            job.raise_failure()
            return storage.refused >= 5

        await wait_for(refused_for_a_while, timeout_s=30, what="refused checkpoint writes")
        await produce_lines(kafka_bootstrap, f"lines-{tag}", lines[3000:])
        await asyncio.sleep(1.0)  # the outage goes on: nothing may complete, nothing may fail
        job.raise_failure()
        assert job.completed == before
        storage.down = False
        await job.wait_for_checkpoints(before + 2, timeout_s=60)
        assert job.attempt == attempt, "the outage cost a global recovery"
        expected = Counter(word for line in lines for word in line.split())
        assert_counted_exactly_once(
            await read_committed(kafka_bootstrap, f"counts-{tag}", sum(expected.values()), 60),
            expected,
        )
    finally:
        await job.crash()

"""faust's ``app.timer`` and ``app.crontab`` (`tests.faust_apps.ticks`: a timer every second to
a sink, a crontab every second to an agent that counts its ticks in a table) run by sluicegate
on a real broker, crashed and restored three times at random points of the checkpoint cycle:
a read_committed consumer sees no tick twice, every tick on its schedule, and no tick missing
while the job ran (a gap only where a restore coalesced the ticks due while it was down: at
most one a restore); the crontab's agent counts 1..n with no count twice or missing.

Crashes cancel every task of the job at once (as a SIGKILL would).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
import uuid
from pathlib import Path

from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.faust_adapter import pipeline_of
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.storage import open_storage
from sluicegate.testing import read_committed
from tests.faust_apps import ticks

RESTORES = 3


def job_of(graph: JobGraph, bootstrap: str, tmp_path: Path) -> LocalJob:
    return LocalJob(
        graph, bootstrap=bootstrap, storage=open_storage(tmp_path / "storage"),
        work_dir=tmp_path / "work", settings=CoordinatorSettings(interval_seconds=0.5),
    )  # fmt: skip


def gaps(found: list[float], step: float) -> int:
    """How many places in the sorted ``found`` skip one or more ticks of ``step``."""
    return sum(1 for a, b in itertools.pairwise(found) if round((b - a) / step) > 1)


async def test_each_tick_fires_once_across_crashes(kafka_bootstrap: str, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    graph = pipeline_of(ticks.make_app(tag), modules=[ticks]).build()
    rng = random.Random(41)
    started = time.time()
    running = job_of(graph, kafka_bootstrap, tmp_path)
    await running.start()
    for _ in range(RESTORES):
        await running.wait_for_checkpoints(running.completed + rng.randint(2, 5), timeout_s=120)
        await asyncio.sleep(rng.uniform(0, 1.0))  # where in the cycle to crash, not a wait
        await running.crash()
        await asyncio.sleep(rng.uniform(0, 2.5))  # down for a while: due ticks coalesce
        running = job_of(graph, kafka_bootstrap, tmp_path)
        await running.start()
        assert running.restored_from is not None
    await running.wait_for_checkpoints(running.completed + 4, timeout_s=120)
    running.raise_failure()
    await running.crash()
    ended = time.time()

    records = await read_committed(
        kafka_bootstrap, f"ticks-{tag}", 1 << 30, timeout_s=3, partitions=2
    )
    timer = [ticks.Tick.loads(r.value).tick for r in records]
    records = await read_committed(
        kafka_bootstrap, f"cron-counts-{tag}", 1 << 30, timeout_s=3, partitions=2
    )
    counted = [ticks.Counted.loads(r.value) for r in records]

    assert len(timer) >= 5, timer
    assert len(timer) == len(set(timer)), f"a tick published twice: {sorted(timer)}"
    assert all(t == int(t) and started < t < ended for t in timer)
    assert gaps(sorted(timer), ticks.INTERVAL_S) <= RESTORES, sorted(timer)

    cron = [c.tick for c in counted]
    assert len(cron) >= 5, cron
    assert len(cron) == len(set(cron)), f"a crontab tick published twice: {cron}"
    assert gaps(sorted(cron), 1.0) <= RESTORES, sorted(cron)
    # one key, one partition: the agent's counts in order, each exactly once
    assert [c.n for c in counted] == list(range(1, len(counted) + 1))
    assert cron == sorted(cron)

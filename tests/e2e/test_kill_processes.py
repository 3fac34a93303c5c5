"""The word count across real processes: workers and the coordinator are killed with SIGKILL
at random moments and started again; the sink still sees every count exactly once."""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from sluicegate.devkafka import DevBroker
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.manifest import ManifestStore
from sluicegate.testing import produce_lines, read_committed, word_count
from tests.e2e.cluster import Cluster, word_count_module
from tests.helpers import (
    assert_counted_exactly_once,
    assert_final_counts_at_least_once,
    sst_new_in_latest,
    wait_for,
)

VOCABULARY = [f"w{i:02d}" for i in range(30)]
# CI keeps the chaos test to a minute; `make soak` runs 200k lines and 12 kills.
CHAOS_LINES = int(os.environ.get("SLUICEGATE_CHAOS_LINES", "40000"))
CHAOS_KILLS = int(os.environ.get("SLUICEGATE_CHAOS_KILLS", "5"))


async def newest_checkpoint(storage_dir: Path) -> int:
    """The newest completed checkpoint id (retention keeps only a few, so not a count)."""
    return max(await ManifestStore(open_storage(storage_dir)).completed(), default=0)


async def wait_for_more_checkpoints(cluster: Cluster, storage: Path, more: int) -> None:
    start = await newest_checkpoint(storage)

    async def reached() -> bool:
        if await newest_checkpoint(storage) >= start + more:
            return True
        cluster.alive()
        return False

    await wait_for(reached, timeout_s=120, interval_s=0.1, what=f"{more} more checkpoints")


async def wait_for_checkpoint_in_flight(cluster: Cluster, storage_dir: Path) -> None:
    """Wait until a checkpoint was triggered but has not completed (to kill mid-checkpoint)."""

    async def in_flight() -> bool:
        triggered = [int(p.parent.name) for p in (storage_dir / "checkpoints").glob("*/_triggered")]
        if max(triggered, default=0) > await newest_checkpoint(storage_dir):
            return True
        cluster.alive()
        return False

    await wait_for(in_flight, timeout_s=60, interval_s=0.005, what="a checkpoint in flight")


async def assert_every_manifest_whole(storage_dir: Path) -> None:
    """Every visible manifest parses, and every file it names (changelog segments included)
    is stored with its size."""
    manifests = ManifestStore(open_storage(storage_dir))
    for n in await manifests.completed():
        manifest = await manifests.load(n)
        for snapshot in manifest.subtasks.values():
            for f in snapshot.handle.all_files:
                # a file in parts (a MANIFEST sent as its appended bytes) is whole when each
                # part is stored with its size; the parts add up to the file's (validated)
                for path, size in [(p.path, p.size) for p in f.parts] or [(f.path, f.size)]:
                    assert (storage_dir / path).stat().st_size == size, (n, path)


@pytest.mark.parametrize("changelog", [False, True], ids=["rocksdb-files", "state-changelog"])
async def test_sigkill_of_workers_and_coordinator_keeps_exactly_once(
    kafka_bootstrap: str, tmp_path: Path, cluster_factory: list[Cluster], changelog: bool
) -> None:
    """With the state changelog, the workers' checkpoints are segments replayed onto bases
    materialized in the background: the kills land amid both."""
    rng = random.Random(7)
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag)
    await ensure_topics(kafka_bootstrap, graph)
    lines = [" ".join(rng.choices(VOCABULARY, k=rng.randint(1, 3))) for _ in range(CHAOS_LINES)]
    expected = Counter(w for line in lines for w in line.split())
    worker_args = ("--state-changelog",) if changelog else ()
    cluster = Cluster(tmp_path, word_count_module(tag), kafka_bootstrap, worker_args=worker_args)
    cluster_factory.append(cluster)
    storage = tmp_path / "storage"
    for name in ("coordinator", "w1", "w2"):
        cluster.start(name)

    victims = [rng.choice(["w1", "w2", "w1", "w2", "coordinator"]) for _ in range(CHAOS_KILLS)]
    victims[len(victims) // 2] = "coordinator"  # at least once, mid-checkpoint
    for part, victim in enumerate(victims):
        await produce_lines(kafka_bootstrap, f"lines-{tag}", lines[part :: len(victims)])
        await wait_for_more_checkpoints(cluster, storage, rng.randint(1, 2))
        await asyncio.sleep(rng.uniform(0, 0.5))  # where in the cycle the kill lands
        if victim == "coordinator":
            await wait_for_checkpoint_in_flight(cluster, storage)
        cluster.kill(victim)
        cluster.start(victim)

    total = sum(expected.values())
    records = await read_committed(kafka_bootstrap, f"counts-{tag}", total, timeout_s=240)
    cluster.alive()
    await wait_for_more_checkpoints(cluster, storage, 1)
    records = await read_committed(kafka_bootstrap, f"counts-{tag}", total + 1, timeout_s=5)

    assert_counted_exactly_once(records, expected)
    # Retention kept 3 checkpoints (plus, at most, the one the attempt restored from). Read
    # after a graceful stop: retention runs right after each completion, so a listing taken
    # between a completion and its retention would see one more.
    await asyncio.to_thread(cluster.stop_job)
    assert len(await ManifestStore(open_storage(storage)).completed()) <= 4
    await assert_every_manifest_whole(storage)
    # (The kept manifests' chains may be empty by now: the input ran out and a
    # materialization took them up.)
    assert bool(list((tmp_path / "state").rglob("changelog"))) is changelog


async def test_a_corrupt_checkpoint_falls_back_to_the_previous_one(
    kafka_bootstrap: str, tmp_path: Path, cluster_factory: list[Cluster]
) -> None:
    rng = random.Random(11)
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag)
    await ensure_topics(kafka_bootstrap, graph)
    lines = [" ".join(rng.choices(VOCABULARY, k=rng.randint(1, 3))) for _ in range(10_000)]
    expected = Counter(w for line in lines for w in line.split())
    cluster = Cluster(tmp_path, word_count_module(tag), kafka_bootstrap, slots=4)
    cluster_factory.append(cluster)
    storage_dir = tmp_path / "storage"
    cluster.start("coordinator")
    cluster.start("w1")

    async def trickle(part: list[str]) -> None:
        # Input keeps arriving, so every checkpoint holds new state (new SST files).
        for start in range(0, len(part), 100):
            await produce_lines(kafka_bootstrap, f"lines-{tag}", part[start : start + 100])
            await asyncio.sleep(0.05)

    feeding = asyncio.create_task(trickle(lines[:5000]))
    await wait_for_more_checkpoints(cluster, storage_dir, 3)
    cluster.kill("w1")
    await feeding

    # Flip a byte in an SST of the newest checkpoint; a fresh worker (no local copy) must
    # download it, find it corrupt, and the job must fall back to a checkpoint before. An SST
    # an older checkpoint shares breaks it too (incremental checkpoints share files), so pick
    # one that is new since the closest older checkpoint that differs: usually the one just
    # before, but under load a checkpoint interval can pass without input (no new SST).
    manifests = ManifestStore(open_storage(storage_dir))
    newest = await manifests.latest()
    assert newest is not None
    sst = await sst_new_in_latest(manifests)
    stored = storage_dir / sst.path
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 0xFF
    stored.write_bytes(bytes(data))
    cluster.start("w2")

    await produce_lines(kafka_bootstrap, f"lines-{tag}", lines[5000:])
    deadline = time.monotonic() + 240  # for the detection and the final counts together

    async def detected() -> bool:
        if newest.checkpoint_id in await manifests.corrupt():
            return True
        cluster.alive()
        return False

    await wait_for(
        detected, timeout_s=240, interval_s=0.2, what="the corrupt checkpoint to be detected"
    )
    # Falling back behind the last published checkpoint republishes what was replayed, so the
    # sink holds every count at least once, and every word's final count is exact.
    await assert_final_counts_at_least_once(
        kafka_bootstrap, f"counts-{tag}", expected, deadline=deadline
    )
    log = "".join(p.read_text() for p in (tmp_path / "logs").glob("coordinator.*.log"))
    assert f"checkpoint {newest.checkpoint_id} is corrupt" in log


async def test_the_broker_away_for_ten_seconds_stalls_then_recovers(
    tmp_path: Path, cluster_factory: list[Cluster]
) -> None:
    broker = DevBroker(port=0, data_dir=tmp_path / "kafka")
    await broker.start_async()
    try:
        rng = random.Random(3)
        tag = uuid.uuid4().hex[:8]
        graph = word_count(tag)
        await ensure_topics(broker.bootstrap, graph)
        lines = [" ".join(rng.choices(VOCABULARY, k=rng.randint(1, 3))) for _ in range(10_000)]
        expected = Counter(w for line in lines for w in line.split())
        cluster = Cluster(tmp_path, word_count_module(tag), broker.bootstrap)
        cluster_factory.append(cluster)
        storage = tmp_path / "storage"
        for name in ("coordinator", "w1", "w2"):
            cluster.start(name)
        await produce_lines(broker.bootstrap, f"lines-{tag}", lines[:5000])
        await wait_for_more_checkpoints(cluster, storage, 2)

        broker.stop()
        await asyncio.sleep(10)  # the outage itself, not a wait for a condition
        await broker.start_async()

        await produce_lines(broker.bootstrap, f"lines-{tag}", lines[5000:])
        total = sum(expected.values())
        records = await read_committed(broker.bootstrap, f"counts-{tag}", total, timeout_s=240)
        cluster.alive()
        # When the job stalls after the outage (seen once under load, cause not found), the
        # process logs say where.
        assert len(records) == total, f"{len(records)} of {total}\n{cluster.log_tails()}"
        assert_counted_exactly_once(records, expected)
    finally:
        for c in cluster_factory:
            c.stop_all()
        broker.stop()

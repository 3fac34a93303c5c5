"""Savepoint create and restore time and size vs state size, next to a checkpoint of the
same state.

    uv run python -m bench.savepoint_cost [--sizes 10000,100000,1000000] [--partitions 8]

For each state size: one operator at parallelism 2 over ``--partitions`` input partitions,
its rows written into two real RocksDB databases; then, on real local storage (a temporary
folder):

* checkpoint: local checkpoint + upload of every file (a first, full checkpoint), and its
  restore (download + open);
* savepoint: written from that checkpoint (fetch, open, read rows, encode, store), and
  restored at parallelism 3 (rows fetched, verified, decoded, re-split into three new
  databases, uploaded as a checkpoint).

Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import shutil
import tempfile
import time
from pathlib import Path

from bench.table import report_table
from sluicegate.operators.contract import Context, Record
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.state_transfer import SnapshotStore
from sluicegate.operators.savepoints.rebuild import rebuild_checkpoint
from sluicegate.operators.savepoints.sources import CheckpointSource, SavepointSource
from sluicegate.operators.savepoints.store import SavepointStore
from sluicegate.operators.savepoints.writer import write_savepoint
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import Storage, open_storage
from sluicegate.operators.storage.manifest import CheckpointManifest, SubtaskSnapshot


def value(i: int) -> bytes:
    """48 bytes of hex: compresses about as well as JSON of ids and amounts does."""
    return hashlib.sha256(b"%d" % i).hexdigest()[:48].encode()


def noop(record: Record, ctx: Context) -> None:
    """Never called."""


def graph(partitions: int, parallelism: int) -> JobGraph:
    p = Pipeline("bench")
    p.source("in", partitions=partitions)
    p.sink("out", partitions=1)
    p.operator("op", noop, inputs="in", outputs="out", parallelism=parallelism)
    return p.build()


async def checkpoint(
    storage: Storage, g: JobGraph, keys: int, root: Path
) -> tuple[CheckpointManifest, float]:
    subtasks: dict[str, SubtaskSnapshot] = {}
    seconds = 0.0
    partitions = g.topics["in"].partitions
    for s in g.subtasks():
        with RocksDBStateStore.open(root / f"db-{s.index}") as store:
            for tp in g.input_partitions(s):
                state = store.partition(tp.topic, tp.partition)
                for i in range(tp.partition, keys, partitions):
                    state.put(b"key-%010d" % i, value(i))
            started = time.perf_counter()
            local = store.take_local_checkpoint(1, root / f"cp-{s.index}")
            handle = (await SnapshotStore(storage).upload(local)).handle
            seconds += time.perf_counter() - started
        positions = {tp.topic: {tp.partition: 0} for tp in g.input_partitions(s)}
        subtasks[str(s)] = SubtaskSnapshot(
            positions=positions, handle=handle, alignment_seconds=0, sync_seconds=0,
            async_seconds=0,
        )  # fmt: skip
    manifest = CheckpointManifest(
        pipeline="bench", checkpoint_id=1, attempt=1, completed_at=0.0, subtasks=subtasks
    )
    return manifest, seconds


async def restore_checkpoint(storage: Storage, manifest: CheckpointManifest, root: Path) -> float:
    started = time.perf_counter()
    for n, snapshot in enumerate(manifest.subtasks.values()):
        folder = await SnapshotStore(storage).fetch(snapshot.handle, root / f"r{n}")
        RocksDBStateStore.restore(folder, root / f"rdb{n}").close()
    return time.perf_counter() - started


async def measure(keys: int, partitions: int, root: Path) -> list[tuple[str, ...]]:
    storage = open_storage(root / "storage")
    g2 = graph(partitions, 2)
    manifest, cp_seconds = await checkpoint(storage, g2, keys, root / "build")
    cp_restore = await restore_checkpoint(storage, manifest, root / "restore")
    started = time.perf_counter()
    async with await CheckpointSource.open(storage, manifest, root / "read") as source:
        saved = await write_savepoint(
            storage, source, name="sp", pipeline="bench", from_checkpoint=1, attempt=1
        )
    sp_seconds = time.perf_counter() - started
    started = time.perf_counter()
    loaded = await SavepointStore(storage).load("sp")
    await rebuild_checkpoint(
        storage, SavepointSource(storage, loaded), graph(partitions, 3), checkpoint_id=2,
        attempt=2, work_dir=root / "m",
    )  # fmt: skip
    sp_restore = time.perf_counter() - started
    cp_bytes = manifest.full_bytes
    return [
        (f"{keys:,}", "checkpoint (full, p=2)", f"{cp_seconds:.2f}", f"{cp_restore:.2f}",
         f"{cp_bytes / 2**20:.2f}"),
        (f"{keys:,}", "savepoint (p=2 -> 3)", f"{sp_seconds:.2f}", f"{sp_restore:.2f}",
         f"{saved.size_bytes / 2**20:.2f}"),
    ]  # fmt: skip


async def main(sizes: list[int], partitions: int) -> None:
    rows: list[tuple[str, ...]] = []
    for keys in sizes:
        root = Path(tempfile.mkdtemp(prefix="sluicegate-bench-savepoint-"))
        try:
            rows += await measure(keys, partitions, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    header = ["keys", "snapshot", "create s", "restore s", "size MiB"]
    title = "Savepoint vs full checkpoint: create, restore, size"
    report_table("savepoint_cost", title, header, rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()
    asyncio.run(main([int(s) for s in args.sizes.split(",")], args.partitions))

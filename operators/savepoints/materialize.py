"""Restoring state at the pipeline's current shape: a `StateSource` (a savepoint, or a
checkpoint of another shape or an older state version) becomes a new completed checkpoint
that the job then restores from the ordinary way.

`materialize_checkpoint` performs, in order:

1. check the restore (`operators.savepoints.compatibility`): refuses with what to do;
2. for every subtask of the graph, in a new RocksDB database in ``work_dir``: the rows of each
   input partition the subtask owns now (the rows move with their partition: this is the
   rescale), upgraded to the code's state version; the subtask's metadata rows when its
   operator's parallelism is unchanged (a rescale drops them: see docs/savepoints.md);
3. take a local checkpoint of each and upload it content-addressed, like any checkpoint;
4. return the manifest (``R_p`` of every owned partition the source knows): the caller commits
   it under a fresh checkpoint id, after which the new checkpoint is restorable and retained
   like any other.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

from operators.graph import JobGraph
from operators.runtime.manifest import CheckpointManifest, SubtaskSnapshot
from operators.runtime.state_transfer import SnapshotStore
from operators.savepoints.compatibility import check_restore
from operators.savepoints.exceptions import SavepointRefusedError
from operators.savepoints.sources import Rows, StateSource
from operators.state.local_checkpoint import LocalCheckpoint
from operators.state.rocksdb import RocksDBStateStore
from operators.state.store import PartitionId
from operators.state.versions import UpgradeError
from operators.storage import Storage

__all__ = ["materialize_checkpoint"]


async def materialize_checkpoint(
    storage: Storage,
    source: StateSource,
    graph: JobGraph,
    *,
    checkpoint_id: int,
    attempt: int,
    work_dir: Path,
    allow_non_restored: bool = False,
    what: str = "the savepoint",
) -> tuple[CheckpointManifest, list[str]]:
    """Build checkpoint ``checkpoint_id`` of ``graph`` from ``source``; the manifest (not
    committed) and the notes of the compatibility check. Steps in the module docstring."""
    operators = source.operators()
    notes = check_restore(operators, graph, allow_non_restored=allow_non_restored, what=what)
    snapshots = SnapshotStore(storage)
    subtasks: dict[str, SubtaskSnapshot] = {}
    try:
        for number, subtask in enumerate(graph.subtasks()):
            spec = graph.operators[subtask.uid]
            info = operators.get(subtask.uid)
            positions: dict[str, dict[int, int]] = {}
            rows: dict[PartitionId, Rows] = {}
            for tp in graph.input_partitions(subtask):
                pid = PartitionId(tp.topic, tp.partition)
                if info is None or pid not in info.partitions:
                    continue
                offset = info.partitions[pid]
                if offset is not None:
                    positions.setdefault(pid.topic, {})[pid.partition] = offset
                if pid in info.with_rows:
                    found = await source.rows(subtask.uid, pid)
                    try:
                        rows[pid] = spec.state_versions.upgrade(found, info.state_schema_version)
                    except UpgradeError as exc:
                        raise SavepointRefusedError(
                            f"upgrading the state of operator {subtask.uid} failed: {exc}",
                            "Fix the upgrader, or restore with the code that wrote the state",
                        ) from exc
            metadata: Rows = []
            if info is not None and info.parallelism == spec.parallelism:
                metadata = await source.metadata(subtask.uid, subtask.index)
            folder = work_dir / f"subtask-{number}"
            local = await asyncio.to_thread(_build, folder, checkpoint_id, rows, metadata)
            uploaded = await snapshots.upload(local)
            subtasks[str(subtask)] = SubtaskSnapshot(
                positions=positions,
                handle=uploaded.handle,
                alignment_seconds=0.0,
                sync_seconds=0.0,
                async_seconds=uploaded.seconds,
            )
    finally:
        await asyncio.to_thread(shutil.rmtree, work_dir, True)
    now = time.time()
    manifest = CheckpointManifest(
        pipeline=graph.name,
        checkpoint_id=checkpoint_id,
        attempt=attempt,
        completed_at=now,
        subtasks=subtasks,
        triggered_at=now,
        state_versions={uid: s.state_versions.current for uid, s in graph.operators.items()},
    )
    return manifest, notes


def _build(
    folder: Path, checkpoint_id: int, rows: dict[PartitionId, Rows], metadata: Rows
) -> LocalCheckpoint:
    with RocksDBStateStore.open(folder / "db") as store:
        for pid, partition_rows in rows.items():
            handle = store.partition(pid.topic, pid.partition)
            for key, value in partition_rows:
                handle.put(key, value)
        for key, value in metadata:
            store.metadata().put(key, value)
        return store.take_local_checkpoint(checkpoint_id, folder / "checkpoints")

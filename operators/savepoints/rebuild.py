"""Restoring state at the pipeline's current shape: a `StateSource` (a savepoint, or a
checkpoint of another shape or an older state version) becomes a new completed checkpoint
that the job then restores from the ordinary way.

`rebuild_checkpoint` performs, in order:

1. check the restore (`operators.savepoints.compatibility`): refuses with what to do;
2. for every subtask of the graph, in a new RocksDB database in ``work_dir``: the rows of each
   input partition the subtask owns now (the rows move with their partition: this is the
   rescale), chunk by chunk (memory is bounded by a chunk), upgraded to the code's state
   version; the subtask's metadata rows when its
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

from sluicegate.operators.graph import JobGraph, SubtaskId
from sluicegate.operators.runtime.state_transfer import SnapshotStore
from sluicegate.operators.savepoints.compatibility import check_restore
from sluicegate.operators.savepoints.exceptions import SavepointRefusedError
from sluicegate.operators.savepoints.sources import OperatorInfo, Rows, StateSource
from sluicegate.operators.specs import OperatorSpec
from sluicegate.operators.state.rocksdb import RocksDBPartitionState, RocksDBStateStore
from sluicegate.operators.state.store import PartitionId
from sluicegate.operators.state.versions import UpgradeError
from sluicegate.operators.storage import Storage
from sluicegate.operators.storage.manifest import CheckpointManifest, SubtaskSnapshot

__all__ = ["rebuild_checkpoint"]


async def rebuild_checkpoint(
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
            folder = work_dir / f"subtask-{number}"
            store = await asyncio.to_thread(RocksDBStateStore.open, folder / "db")
            try:
                positions = await _fill(store, source, graph, subtask, spec, info)
                if info is not None and info.parallelism == spec.parallelism:
                    metadata = await source.metadata(subtask.uid, subtask.index)
                    await asyncio.to_thread(_put, store.metadata(), metadata)
                local = await asyncio.to_thread(
                    store.take_local_checkpoint, checkpoint_id, folder / "checkpoints"
                )
            finally:
                await asyncio.to_thread(store.close)
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


async def _fill(
    store: RocksDBStateStore,
    source: StateSource,
    graph: JobGraph,
    subtask: SubtaskId,
    spec: OperatorSpec,
    info: OperatorInfo | None,
) -> dict[str, dict[int, int]]:
    """Write the rows of every input partition ``subtask`` owns into ``store``, chunk by chunk,
    upgraded; return their ``R_p``."""
    positions: dict[str, dict[int, int]] = {}
    for tp in graph.input_partitions(subtask):
        pid = PartitionId(tp.topic, tp.partition)
        if info is None or pid not in info.partitions:
            continue
        offset = info.partitions[pid]
        if offset is not None:
            positions.setdefault(pid.topic, {})[pid.partition] = offset
        if pid not in info.with_rows:
            continue
        seen: set[bytes] = set()  # keys written, when an upgrade may move rows between chunks
        upgrading = info.state_schema_version != spec.state_versions.current
        handle = store.partition(pid.topic, pid.partition)
        async for chunk in source.chunks(subtask.uid, pid):
            rows = chunk
            if upgrading:
                try:
                    rows = spec.state_versions.upgrade(chunk, info.state_schema_version)
                except UpgradeError as exc:
                    raise SavepointRefusedError(
                        f"upgrading the state of operator {subtask.uid} failed: {exc}",
                        "Fix the upgrader, or restore with the code that wrote the state",
                    ) from exc
                if clash := next((k for k, _ in rows if k in seen), None):
                    raise SavepointRefusedError(
                        f"upgrading the state of operator {subtask.uid} failed: two rows were "
                        f"upgraded onto key {clash[:80]!r}",
                        "Fix the upgrader, or restore with the code that wrote the state",
                    )
                seen.update(k for k, _ in rows)
            await asyncio.to_thread(_put, handle, rows)
    return positions


def _put(handle: RocksDBPartitionState, rows: Rows) -> None:
    for key, value in rows:
        handle.put(key, value)

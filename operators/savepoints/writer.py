"""Writing a savepoint: the rows of a `StateSource` (a completed checkpoint) in the canonical
format, under the savepoint's own prefix.

`write_savepoint` performs, in order:

1. refuse a name that a savepoint already has; remove the files of an incomplete one (a
   writer that died before its manifest);
2. per operator uid, per input partition with rows: encode the rows in chunks of about
   ``chunk_bytes`` (`operators.savepoints.rows`; memory is bounded by a chunk) and store each
   as ``savepoints/<name>/data/<i>``; then each subtask's metadata rows the same way; report
   progress after every partition;
3. commit ``_savepoint.json`` with create-if-absent: only now is the savepoint restorable.

Nothing is shared with checkpoints: every byte is written anew, so checkpoint retention
never touches a savepoint.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sluicegate.operators.savepoints.exceptions import SavepointRefusedError
from sluicegate.operators.savepoints.manifest import (
    OperatorState,
    PartitionRows,
    RowsFile,
    SavepointManifest,
    SubtaskMetadata,
)
from sluicegate.operators.savepoints.progress import SavepointProgress
from sluicegate.operators.savepoints.rows import encode_rows
from sluicegate.operators.savepoints.sources import CHUNK_BYTES, StateSource
from sluicegate.operators.savepoints.store import SavepointStore
from sluicegate.operators.storage import Storage
from sluicegate.operators.storage.layout import savepoint_prefix

__all__ = ["write_savepoint"]

logger = logging.getLogger(__name__)


async def write_savepoint(
    storage: Storage,
    source: StateSource,
    *,
    name: str,
    pipeline: str,
    from_checkpoint: int,
    attempt: int,
    on_progress: Callable[[SavepointProgress], None] | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> SavepointManifest:
    """Write savepoint ``name`` from ``source``; steps in the module docstring."""
    store = SavepointStore(storage)
    prefix = savepoint_prefix(name)
    if await storage.exists(store.manifest_path(name)):
        raise SavepointRefusedError(
            f"a savepoint named {name!r} exists already",
            "Choose another name, or delete it first (`sluicegate savepoint delete`)",
        )
    for leftover in await storage.list(prefix):
        await storage.delete(leftover)
    operators = source.operators()
    total = sum(len(info.with_rows) for info in operators.values())
    done = rows_written = bytes_written = 0
    number = 0

    async def put(rows: list[tuple[bytes, bytes]]) -> RowsFile:
        nonlocal number, bytes_written
        path = f"data/{number}"
        number += 1
        stored = await storage.put(f"{prefix}/{path}", encode_rows(rows))
        bytes_written += stored.size
        return RowsFile(path=path, size=stored.size, sha256=stored.sha256)

    states: dict[str, OperatorState] = {}
    for uid, info in sorted(operators.items()):
        partitions: list[PartitionRows] = []
        for pid, offset in sorted(info.partitions.items()):
            files: list[RowsFile] = []
            count = 0
            if pid in info.with_rows:
                async for chunk in source.chunks(uid, pid, chunk_bytes):
                    files.append(await put(chunk))
                    count += len(chunk)
            partitions.append(
                PartitionRows(
                    topic=pid.topic, partition=pid.partition, offset=offset,
                    rows=count, files=tuple(files),
                )
            )  # fmt: skip
            if pid in info.with_rows:
                done += 1
                rows_written += count
                if on_progress is not None:
                    on_progress(SavepointProgress(done, total, rows_written, bytes_written))
        metadata: list[SubtaskMetadata] = []
        for index in range(info.parallelism):
            meta = await source.metadata(uid, index)
            if meta:
                metadata.append(SubtaskMetadata(index=index, rows=len(meta), file=await put(meta)))
        states[uid] = OperatorState(
            parallelism=info.parallelism,
            state_schema_version=info.state_schema_version,
            partitions=tuple(partitions),
            metadata=tuple(metadata),
        )
    manifest = SavepointManifest(
        name=name,
        pipeline=pipeline,
        created_at=time.time(),
        from_checkpoint=from_checkpoint,
        attempt=attempt,
        operators=states,
    )
    await storage.put_if_absent(store.manifest_path(name), manifest.to_json())
    logger.info(
        "savepoint %s written from checkpoint %s: %s rows, %s bytes",
        name, from_checkpoint, rows_written, bytes_written,
    )  # fmt: skip
    return manifest

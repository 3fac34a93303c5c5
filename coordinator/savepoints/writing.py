"""Writing a requested savepoint from a completed checkpoint (the IO half of `requests`)."""

from __future__ import annotations

import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from sluicegate.coordinator.savepoints.requests import SavepointRequest
from sluicegate.operators.savepoints.manifest import SavepointManifest
from sluicegate.operators.savepoints.sources import CheckpointSource
from sluicegate.operators.savepoints.writer import write_savepoint
from sluicegate.operators.storage import Storage
from sluicegate.operators.storage.manifest import CheckpointManifest

__all__ = ["default_name", "write_from_checkpoint"]


def default_name(pipeline: str, now: float | None = None) -> str:
    """``<pipeline>-<UTC time>``, e.g. ``refund-desk-20261201T052733Z``."""
    stamp = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    return f"{pipeline}-{stamp:%Y%m%dT%H%M%SZ}"


async def write_from_checkpoint(
    storage: Storage,
    checkpoint: CheckpointManifest,
    request: SavepointRequest,
    *,
    work_root: Path | None = None,
) -> SavepointManifest:
    """1. fetch and open the checkpoint's state in a work folder; 2. write the savepoint,
    reporting progress into ``request``; 3. remove the work folder."""
    work = Path(tempfile.mkdtemp(prefix="sluicegate-savepoint-", dir=work_root))
    async with await CheckpointSource.open(storage, checkpoint, work) as source:
        return await write_savepoint(
            storage,
            source,
            name=request.name,
            pipeline=checkpoint.pipeline,
            from_checkpoint=checkpoint.checkpoint_id,
            attempt=checkpoint.attempt,
            on_progress=request.on_progress,
        )

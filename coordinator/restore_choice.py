"""Which checkpoint a new attempt restores from, or why it cannot start.

1. the newest completed checkpoint whose manifest reads (`ManifestStore.find_latest`); each
   newer one that completed but cannot be read is marked corrupt, with a warning, and counted
   by ``on_fallback`` before it is marked (whoever sees the mark sees the count);
2. none readable although some completed, and no savepoint to start from: refuse (starting
   from scratch would reprocess all input);
3. `prepare_restore`: a savepoint to restore, or a checkpoint of another parallelism or of
   older state, becomes a new checkpoint of the current shape;
4. a checkpoint of another pipeline shape is refused with what to do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from sluicegate.coordinator.savepoints.restoring import prepare_restore
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.savepoints.exceptions import SavepointError
from sluicegate.operators.storage import Storage
from sluicegate.operators.storage.manifest import CheckpointManifest, ManifestStore

__all__ = ["CannotRestore", "RestoreFrom", "choose_restore"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RestoreFrom:
    """Restore from ``manifest`` (None: from the beginning); ``rebuilt``: a checkpoint
    made just now (from a savepoint, or re-split), whose id is used."""

    manifest: CheckpointManifest | None
    rebuilt: bool


@dataclass(frozen=True, slots=True)
class CannotRestore:
    reason: str


async def choose_restore(
    storage: Storage,
    manifests: ManifestStore,
    graph: JobGraph,
    subtasks: list[str],
    *,
    attempt: int,
    settings: CoordinatorSettings,
    on_fallback: Callable[[], None],
) -> RestoreFrom | CannotRestore:
    """The restore point of attempt ``attempt``; steps in the module docstring."""
    found = await manifests.find_latest()
    for lost in found.lost:
        logger.warning(
            "checkpoint %s is corrupt: it completed but %s; falling back to checkpoint %s",
            lost.checkpoint_id,
            lost.reason,
            found.manifest.checkpoint_id if found.manifest else None,
        )
        on_fallback()
        await manifests.mark_corrupt(lost.checkpoint_id, lost.reason)
    latest = found.manifest
    if latest is None and found.any_completed and settings.from_savepoint is None:
        return CannotRestore(
            "every completed checkpoint is corrupt; not starting from scratch (that would "
            "reprocess all input). Restore from a savepoint or clear the checkpoint storage "
            "and the sink-progress topic to start afresh"
        )
    try:
        restored = await prepare_restore(
            storage,
            graph,
            latest,
            attempt=attempt,
            from_savepoint=settings.from_savepoint,
            allow_non_restored=settings.allow_non_restored_state,
        )
    except SavepointError as exc:
        return CannotRestore(f"cannot restore: {exc}")
    if restored is not None and (mismatch := restored.shape_mismatch(subtasks)):
        return CannotRestore(mismatch)
    return RestoreFrom(restored, rebuilt=restored is not latest)

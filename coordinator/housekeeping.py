"""After each completed checkpoint: retention, every ``audit_every`` checkpoints an orphan
audit (`coordinator.retention`), and at most every ``blob_gc_interval_s`` seconds the
collection of expired blobs (`operators.storage.blobs`). A storage failure here only postpones
them to the next completed checkpoint; the job runs on."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from sluicegate.coordinator.known_manifests import KnownManifests
from sluicegate.coordinator.retention import AuditReport, apply_retention, audit, delete_orphans
from sluicegate.operators.storage import Storage, StorageError
from sluicegate.operators.storage.blobs import BlobStore
from sluicegate.operators.storage.manifest import CheckpointManifest

__all__ = ["Housekeeping"]

logger = logging.getLogger(__name__)


class Housekeeping:
    """Retention keeping ``keep`` checkpoints, orphan audits every ``audit_every``, expired
    blobs collected at the first completed checkpoint and then at most every
    ``blob_gc_interval_s`` seconds (None: never)."""

    def __init__(
        self,
        storage: Storage,
        *,
        keep: int,
        audit_every: int,
        blob_gc_interval_s: float | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._storage, self._keep, self._audit_every = storage, keep, audit_every
        self._last_audit: AuditReport | None = None
        self._blob_gc_interval_s = blob_gc_interval_s
        self._clock, self._monotonic = clock, monotonic
        self._last_blob_gc: float | None = None
        self._known = KnownManifests(storage)
        """The retained manifests, decoded: each is read from storage at most once."""

    def committed(self, manifest: CheckpointManifest) -> None:
        """This coordinator committed ``manifest``: retention need not read it back."""
        self._known.remember(manifest)

    async def after_completed(self, completed: int, *, pinned: Sequence[int]) -> None:
        """Checkpoint number ``completed`` (a count) completed; none is in flight until this
        returns, so retention may delete safely. ``pinned`` checkpoints are kept."""
        try:
            await apply_retention(
                self._storage, self._keep, pinned=tuple(pinned), known=self._known
            )
            if completed % self._audit_every == 0:
                await self._collect_orphans()
        except StorageError as exc:
            logger.warning("retention postponed: checkpoint storage failed: %s", exc)
        try:
            await self._collect_expired_blobs()
        except StorageError as exc:
            logger.warning("blob collection postponed: checkpoint storage failed: %s", exc)

    async def _collect_expired_blobs(self) -> None:
        interval, now = self._blob_gc_interval_s, self._monotonic()
        if interval is None or (
            self._last_blob_gc is not None and now - self._last_blob_gc < interval
        ):
            return
        self._last_blob_gc = now
        report = await BlobStore(self._storage).collect_expired(self._clock())
        if report.deleted or report.invalid:
            logger.info(
                "blobs: %d expired deleted (%d bytes) of %d, %d unreadable",
                report.deleted, report.deleted_bytes, report.scanned, report.invalid,
            )  # fmt: skip

    async def _collect_orphans(self) -> None:
        """Delete what two audits with a completed checkpoint between them found orphaned
        (uploads of checkpoints that never completed, leftovers of a crash)."""
        report = await audit(self._storage, previous=self._last_audit, known=self._known)
        deleted = await delete_orphans(self._storage, report.deletable, known=self._known)
        if deleted:
            logger.info("deleted %s orphaned files from checkpoint storage", len(deleted))
        self._last_audit = report

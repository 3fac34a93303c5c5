"""After each completed checkpoint: retention, and every ``audit_every`` checkpoints an orphan
audit (`coordinator.retention`). A storage failure here only postpones them to the next
completed checkpoint; the job runs on."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from coordinator.retention import AuditReport, apply_retention, audit, delete_orphans
from operators.storage import Storage, StorageError

__all__ = ["Housekeeping"]

logger = logging.getLogger(__name__)


class Housekeeping:
    """Retention keeping ``keep`` checkpoints, and orphan audits every ``audit_every``."""

    def __init__(self, storage: Storage, *, keep: int, audit_every: int) -> None:
        self._storage, self._keep, self._audit_every = storage, keep, audit_every
        self._last_audit: AuditReport | None = None

    async def after_completed(self, completed: int, *, pinned: Sequence[int]) -> None:
        """Checkpoint number ``completed`` (a count) completed; none is in flight until this
        returns, so retention may delete safely. ``pinned`` checkpoints are kept."""
        try:
            await apply_retention(self._storage, self._keep, pinned=tuple(pinned))
            if completed % self._audit_every == 0:
                await self._collect_orphans()
        except StorageError as exc:
            logger.warning("retention postponed: checkpoint storage failed: %s", exc)

    async def _collect_orphans(self) -> None:
        """Delete what two audits with a completed checkpoint between them found orphaned
        (uploads of checkpoints that never completed, leftovers of a crash)."""
        report = await audit(self._storage, previous=self._last_audit)
        deleted = await delete_orphans(self._storage, report.deletable)
        if deleted:
            logger.info("deleted %s orphaned files from checkpoint storage", len(deleted))
        self._last_audit = report

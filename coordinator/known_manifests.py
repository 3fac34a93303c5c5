"""The committed checkpoint manifests a coordinator has written or read, kept decoded.

Retention after every completed checkpoint, and every audit, reference-count files over every
committed manifest (`coordinator.retention`). Reading each again from storage made a
checkpoint's housekeeping parse the ``keep`` newest manifests, each with a row per subtask:
most of the coordinator's CPU per checkpoint at thousands of subtasks. A manifest is written
once (create-if-absent) and never changed, and checkpoint ids never repeat, so a copy kept
here is what storage holds for as long as storage holds it: `KnownManifests.load` reads only
the manifests it does not hold, and which manifests exist is still asked of storage (its
listing) every time, so one deleted or committed meanwhile is seen as before.
"""

from __future__ import annotations

from collections.abc import Collection

from sluicegate.operators.storage import Storage
from sluicegate.operators.storage.manifest import CheckpointManifest, ManifestStore

__all__ = ["KnownManifests"]


class KnownManifests:
    """Decoded manifests by checkpoint id; see the module docstring."""

    def __init__(self, storage: Storage) -> None:
        self._store = ManifestStore(storage)
        self._known: dict[int, CheckpointManifest] = {}

    def remember(self, manifest: CheckpointManifest) -> None:
        """``manifest`` was just committed by this coordinator."""
        self._known[manifest.checkpoint_id] = manifest

    async def load(self, checkpoint_id: int) -> CheckpointManifest:
        """The manifest of ``checkpoint_id``: the copy held, else read from storage (and then
        held). Raises as `ManifestStore.load` does (`NotFoundError`, a validation error)."""
        known = self._known.get(checkpoint_id)
        if known is None:
            known = self._known[checkpoint_id] = await self._store.load(checkpoint_id)
        return known

    def keep_only(self, checkpoint_ids: Collection[int]) -> None:
        """Forget the manifests of checkpoints other than ``checkpoint_ids`` (those storage
        listed as committed): what is held never outgrows what is retained."""
        for n in [n for n in self._known if n not in checkpoint_ids]:
            del self._known[n]

    def __len__(self) -> int:
        return len(self._known)

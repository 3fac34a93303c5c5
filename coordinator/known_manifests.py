"""The committed checkpoint manifests a coordinator has written or read, kept decoded.

Retention after every completed checkpoint, and every audit, reference-count files over every
committed manifest (`coordinator.retention`). Reading each again from storage made a
checkpoint's housekeeping parse the ``keep`` newest manifests, each with a row per subtask:
most of the coordinator's CPU per checkpoint at thousands of subtasks. A manifest is written
once (create-if-absent) and never changed, and checkpoint ids never repeat, so a copy kept
here is what storage holds for as long as storage holds it: `KnownManifests.load` reads only
the manifests it does not hold, and which manifests exist is still asked of storage (its
listing) every time, so one deleted or committed meanwhile is seen as before.

What retention asks of each held manifest, the storage paths it names and whether it is a full
checkpoint, is worked out once per manifest too (`KnownManifests.paths`, `is_full`): walking
the ``keep`` retained manifests' rows after every checkpoint cost a Python call per file, and
grew with ``keep`` times the subtasks.
"""

from __future__ import annotations

from collections.abc import Collection

from sluicegate.operators.storage import Storage
from sluicegate.operators.storage.manifest import CheckpointManifest, ManifestStore

__all__ = ["KnownManifests", "manifest_paths"]


def manifest_paths(manifest: CheckpointManifest) -> frozenset[str]:
    """Every storage path ``manifest`` names: each subtask's files and changelog segments, and
    each part of a file stored in parts."""
    return frozenset(
        p for s in manifest.subtasks.values() for f in s.handle.all_files for p in f.paths
    )


class KnownManifests:
    """Decoded manifests by checkpoint id; see the module docstring."""

    def __init__(self, storage: Storage) -> None:
        self._store = ManifestStore(storage)
        self._known: dict[int, CheckpointManifest] = {}
        self._paths: dict[int, frozenset[str]] = {}
        self._full: dict[int, bool] = {}

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
            self._paths.pop(n, None)
            self._full.pop(n, None)

    def paths(self, manifest: CheckpointManifest) -> frozenset[str]:
        """`manifest_paths` of ``manifest``: worked out once while it is held."""
        if not self._holds(manifest):
            return manifest_paths(manifest)
        n = manifest.checkpoint_id
        paths = self._paths.get(n)
        if paths is None:
            paths = self._paths[n] = manifest_paths(manifest)
        return paths

    def is_full(self, manifest: CheckpointManifest) -> bool:
        """`CheckpointManifest.is_full` of ``manifest``: worked out once while it is held (a
        full checkpoint's answer walks every file)."""
        if not self._holds(manifest):
            return manifest.is_full
        n = manifest.checkpoint_id
        full = self._full.get(n)
        if full is None:
            full = self._full[n] = manifest.is_full
        return full

    def _holds(self, manifest: CheckpointManifest) -> bool:
        # The very object held: a manifest of the same id built elsewhere (a test's, a copy
        # with other rows) is answered for itself, not from what was worked out for this one.
        return self._known.get(manifest.checkpoint_id) is manifest

    def __len__(self) -> int:
        return len(self._known)

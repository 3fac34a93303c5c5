"""How many retained checkpoints and savepoints hold each operator's state at each version.

An upgrader (`operators.state.versions`) from version ``k`` may be removed from the code only
when no checkpoint and no savepoint of version ``k`` is left, or restoring one would be
refused. ``sluicegate state versions`` prints this count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sluicegate.operators.savepoints.store import SavepointStore
from sluicegate.operators.storage import Storage
from sluicegate.operators.storage.manifest import ManifestStore

__all__ = ["VersionCensus", "count_state_versions"]


@dataclass(slots=True)
class VersionCensus:
    """(uid, version) -> checkpoint ids and savepoint names holding it; savepoints that could
    not be read (name -> problem) count as unknown."""

    checkpoints: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    savepoints: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)

    def rows(self) -> list[tuple[str, int, int, int]]:
        """(uid, version, checkpoints, savepoints), sorted."""
        keys = sorted(set(self.checkpoints) | set(self.savepoints))
        return [
            (uid, version, len(self.checkpoints.get((uid, version), [])),
             len(self.savepoints.get((uid, version), [])))
            for uid, version in keys
        ]  # fmt: skip


async def count_state_versions(storage: Storage) -> VersionCensus:
    """Count every retained checkpoint manifest and every savepoint in ``storage``."""
    census = VersionCensus()
    for manifest in await ManifestStore(storage).retained():
        for uid in sorted({s.split("#")[0] for s in manifest.subtasks}):
            key = (uid, manifest.state_version(uid))
            census.checkpoints.setdefault(key, []).append(manifest.checkpoint_id)
    for stored in await SavepointStore(storage).list():
        if stored.manifest is None:
            census.unreadable[stored.name] = stored.problem
            continue
        for uid, state in stored.manifest.operators.items():
            key = (uid, state.state_schema_version)
            census.savepoints.setdefault(key, []).append(stored.name)
    return census

"""Savepoints in checkpoint storage: list, load (validated), delete.

Each savepoint lives under ``savepoints/<name>/`` and shares nothing with checkpoints
(`operators.storage.layout`); its manifest is committed last, so a folder without one is an
incomplete savepoint (its writer died), listed as such and removable with `delete`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sluicegate.operators.savepoints.exceptions import (
    CorruptSavepointError,
    SavepointError,
    SavepointNotFoundError,
)
from sluicegate.operators.savepoints.manifest import SavepointManifest
from sluicegate.operators.storage import NotFoundError, Storage
from sluicegate.operators.storage.layout import SAVEPOINTS, savepoint_prefix

__all__ = ["MANIFEST", "SavepointStore", "StoredSavepoint"]

MANIFEST = "_savepoint.json"


@dataclass(frozen=True, slots=True)
class StoredSavepoint:
    """One savepoint folder: its manifest, or None when incomplete or unreadable (``problem``)."""

    name: str
    manifest: SavepointManifest | None
    problem: str = ""


class SavepointStore:
    """Reads and deletes savepoints in `Storage`; `operators.savepoints.writer` writes them."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    @staticmethod
    def manifest_path(name: str) -> str:
        return f"{savepoint_prefix(name)}/{MANIFEST}"

    async def names(self) -> list[str]:
        """Every savepoint folder's name, complete or not, sorted."""
        names = {p.split("/")[1] for p in await self._storage.list(SAVEPOINTS) if p.count("/") >= 2}
        return sorted(names)

    async def load(self, name: str) -> SavepointManifest:
        """The validated manifest of ``name``; `SavepointNotFoundError` if there is none."""
        try:
            data = await self._storage.get(self.manifest_path(name))
        except NotFoundError as exc:
            raise SavepointNotFoundError(name) from exc
        manifest = SavepointManifest.parse(data, what=f"{name}/{MANIFEST}")
        if manifest.name != name:
            raise CorruptSavepointError(
                f"{name}/{MANIFEST}", f"it names itself {manifest.name!r}, not {name!r}"
            )
        return manifest

    async def list(self) -> list[StoredSavepoint]:
        """Every savepoint, oldest first (incomplete or unreadable ones last)."""
        found: list[StoredSavepoint] = []
        for name in await self.names():
            try:
                found.append(StoredSavepoint(name, await self.load(name)))
            except SavepointNotFoundError:
                found.append(StoredSavepoint(name, None, "incomplete (no manifest)"))
            except SavepointError as exc:  # listed, never raised: one bad folder hides no other
                found.append(StoredSavepoint(name, None, str(exc).splitlines()[0][:300]))
        return sorted(
            found,
            key=lambda s: (s.manifest is None, s.manifest.created_at if s.manifest else 0, s.name),
        )

    async def delete(self, name: str) -> int:
        """Delete savepoint ``name``: the manifest first (it is no longer restorable), then
        the rest; the number of files deleted. `SavepointNotFoundError` if nothing is there."""
        paths = await self._storage.list(savepoint_prefix(name))
        if not paths:
            raise SavepointNotFoundError(name)
        manifest = self.manifest_path(name)
        for path in sorted(paths, key=lambda p: p != manifest):
            await self._storage.delete(path)
        return len(paths)

"""The memory an agent's last completed checkpoint holds, read without a running job (for
``sluicegate memory list|show``).

`memory_in_checkpoint` opens the newest restorable checkpoint (`operators.savepoints.sources.
CheckpointSource`: each subtask's files fetched, verified, opened read-only in a work folder),
reads the agent operator's rows under ``memory/`` in every partition, and decodes each entry;
an entry that does not decode is counted in `StoredMemory.unreadable`, never raised. It shows
what a restore would give the runs: writes since that checkpoint, and erasures, are not in it
yet.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sluicegate.agents.memory.entries import MemoryEntry, MemoryEntryError
from sluicegate.agents.memory.rows import ENTRY_PREFIX
from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.savepoints.sources import CheckpointSource
from sluicegate.operators.storage import Storage
from sluicegate.operators.storage.manifest import ManifestStore

__all__ = ["StoredMemory", "memory_in_checkpoint"]


@dataclass(frozen=True, slots=True)
class StoredMemory:
    """The entries of one agent in one checkpoint, by key, oldest first."""

    checkpoint_id: int | None
    """None: no completed checkpoint yet."""
    entries: dict[str, list[MemoryEntry]] = field(default_factory=dict)
    unreadable: int = 0


async def memory_in_checkpoint(
    storage: Storage, agent: str, *, key: str | None = None, work_dir: Path | None = None
) -> StoredMemory:
    """The memory of ``agent`` (its operator uid) in the newest restorable checkpoint; only
    ``key``'s when given. Raises `ConfigError` when the checkpoint has no such operator."""
    manifest = await ManifestStore(storage).latest()
    if manifest is None:
        return StoredMemory(None)
    prefix = ENTRY_PREFIX if key is None else ENTRY_PREFIX + key.encode().hex().encode() + b"/"
    entries: dict[str, list[MemoryEntry]] = {}
    unreadable = 0
    with tempfile.TemporaryDirectory(dir=work_dir) as work:
        async with await CheckpointSource.open(storage, manifest, Path(work)) as source:
            info = source.operators().get(agent)
            if info is None:
                known = ", ".join(sorted(source.operators())) or "none"
                raise ConfigError("--agent", f"checkpoint {manifest.checkpoint_id} has no "
                                  f"operator {agent!r} (it has: {known})")  # fmt: skip
            for partition in sorted(info.with_rows, key=lambda p: (p.topic, p.partition)):
                async for chunk in source.chunks(agent, partition):
                    for row, value in chunk:
                        if not row.startswith(prefix):
                            continue
                        try:
                            entry = MemoryEntry.decode(value)
                        except MemoryEntryError:
                            unreadable += 1
                            continue
                        entries.setdefault(entry.key, []).append(entry)
    for found in entries.values():
        found.sort(key=lambda e: e.seq)
    return StoredMemory(manifest.checkpoint_id, entries, unreadable)

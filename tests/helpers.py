"""Small builders shared by tests."""

from __future__ import annotations

from operators.runtime.snapshots import SnapshotFile, StateHandle


def fake_state_handle(key: str, checkpoint_id: int = 1) -> StateHandle:
    """A state handle naming one (unreal) file at storage path ``key``: for sans-IO tests."""
    file = SnapshotFile(name="state", path=key, size=0, sha256="0" * 64)
    return StateHandle(checkpoint_id=checkpoint_id, files=(file,), full_bytes=0, uploaded_bytes=0)

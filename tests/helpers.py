"""Small builders shared by tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aiokafka import ConsumerRecord

from operators.protocol.messages import SnapshotFile, StateHandle
from sluicegate.demos.wordcount import counts_by_word


def fake_state_handle(key: str, checkpoint_id: int = 1) -> StateHandle:
    """A state handle naming one (unreal) file at storage path ``key``: for sans-IO tests."""
    file = SnapshotFile(name="state", path=key, size=0, sha256="0" * 64)
    return StateHandle(checkpoint_id=checkpoint_id, files=(file,), full_bytes=0, uploaded_bytes=0)


def assert_counted_exactly_once(
    records: Sequence[ConsumerRecord[bytes, bytes]], expected: Mapping[str, int]
) -> None:
    """The word count's sink ``records`` hold ``1..n`` for every word counted ``n`` times,
    each once, and nothing else."""
    total = sum(expected.values())
    assert len(records) == total, f"{len(records)} counts published, {total} expected"
    seen = counts_by_word(records)
    for word, n in expected.items():
        assert seen[word] == list(range(1, n + 1)), f"{word}: {seen[word][:20]}, expected 1..{n}"

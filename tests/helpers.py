"""Small builders shared by tests."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Mapping, Sequence

import pytest
from aiokafka import ConsumerRecord

from operators.protocol.messages import SnapshotFile, StateHandle
from operators.runtime.manifest import ManifestStore
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


async def kcat_produce(bootstrap: str, topic: str, lines: bytes, *args: str) -> None:
    """Produce ``lines`` (one record per line) with the real kcat (librdkafka), passing
    ``args`` (e.g. ``-K``, ``-H``); skips without kcat, unless ``SLUICEGATE_REQUIRE_KCAT`` is
    set (CI installs it), then fails."""
    kcat = shutil.which("kcat")
    if kcat is None:
        if os.environ.get("SLUICEGATE_REQUIRE_KCAT"):
            pytest.fail("kcat is not installed (.ci/run installs it)")
        pytest.skip("kcat is not installed: apt-get install kcat")
    process = await asyncio.create_subprocess_exec(
        kcat, "-P", "-b", bootstrap, "-t", topic, *args,
        stdin=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, stderr = await asyncio.wait_for(process.communicate(lines), 120)
    assert process.returncode == 0, stderr.decode()


async def sst_new_in_latest(manifests: ManifestStore) -> SnapshotFile:
    """An SST of the newest checkpoint that the closest older retained checkpoint that differs
    does not hold: damaging it breaks the newest checkpoint only (incremental checkpoints share
    files; under load an interval can pass without input, and so without a new SST)."""
    newest = await manifests.latest()
    assert newest is not None, "no completed checkpoint"
    for older_id in reversed((await manifests.completed())[:-1]):
        older = await manifests.load(older_id)
        kept = {f.path for s in older.subtasks.values() for f in s.handle.files}
        for snapshot in newest.subtasks.values():
            for f in snapshot.handle.files:
                if f.name.endswith(".sst") and f.path not in kept:
                    return f
    raise AssertionError("the newest checkpoint has no SST that a retained older one lacks")

"""A checkpoint manifest's stored bytes: a manifest written before (``tests/fixtures/
checkpoints/manifest-v3.json``, written by the code of 2026-12-05, before the coordinator's
manifest path was made cheaper) reads as the same manifest, and that manifest is written to
the very same bytes again, by the coordinator's path (`CheckpointManifest.from_acks`, then
`ManifestStore.commit`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sluicegate.operators.protocol.channels import TopicPartition
from sluicegate.operators.protocol.messages import CheckpointAck, SnapshotFile, StateHandle
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.manifest import CheckpointManifest, ManifestStore

FIXTURE = Path(__file__).parents[3] / "fixtures" / "checkpoints" / "manifest-v3.json"

FILE = SnapshotFile(name="000001.sst", path="shared/a-1", size=4096, sha256="a" * 64)
SEGMENT = SnapshotFile(name="changelog-000000000007", path="shared/b-c7", size=9, sha256="c" * 64)
ACKS = (
    CheckpointAck(
        "a#0", 7, 3, {TopicPartition("in", 0): 41, TopicPartition("in", 1): 0},
        StateHandle(checkpoint_id=7, files=(FILE,), full_bytes=4096, uploaded_bytes=0),
        0.25, 0.01, 1.5,
    ),
    CheckpointAck(
        "b#0", 7, 3, {TopicPartition("mid", 0): 5},
        StateHandle(
            checkpoint_id=7, files=(), full_bytes=9, uploaded_bytes=9, changelog=(SEGMENT,)
        ),
        0.0, 0.002, 0.05,
    ),
)  # fmt: skip
"""What the fixture's subtasks acked: one without the changelog, one with."""


def from_acks() -> CheckpointManifest:
    built = CheckpointManifest.from_acks(
        "p", 7, 3, ACKS, triggered_at=1764949999.25, state_versions={"a": 1, "b": 2}
    )
    return built.model_copy(update={"completed_at": 1764950000.5})


def test_a_manifest_written_before_reads_as_the_manifest_of_its_acks() -> None:
    read = CheckpointManifest.model_validate_json(FIXTURE.read_bytes())
    assert read == from_acks()
    assert read.subtasks["a#0"].handle.changelog == ()
    assert read.restore_point("b#0").handle.all_files == (SEGMENT,)


def test_the_coordinator_writes_a_manifest_to_the_bytes_written_before() -> None:
    storage = open_storage("memory://")

    async def written() -> bytes:
        await ManifestStore(storage).commit(from_acks())
        return await storage.get("checkpoints/7/_manifest.json")

    assert asyncio.run(written()) == FIXTURE.read_bytes()

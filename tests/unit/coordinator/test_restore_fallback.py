"""The coordinator's restore fallbacks, without a broker: a deleted manifest of the newest
completed checkpoint is logged, counted in ``sluicegate_restore_fallbacks_total`` and marked
corrupt (so it is counted once); a corrupt checkpoint reported by every subtask counts once
(the first report starts the recovery, which ignores the rest)."""

from __future__ import annotations

import uuid

import pytest
from prometheus_client import CollectorRegistry

from sluicegate.coordinator.job_state import JobState
from sluicegate.coordinator.metrics import CoordinatorCollector
from sluicegate.operators.protocol.messages import SubtaskFailed
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.layout import checkpoint_manifest
from sluicegate.operators.storage.manifest import ManifestStore
from sluicegate.testing import word_count
from tests.unit.coordinator.driving import Driving
from tests.unit.coordinator.test_checkpoint_stats import manifest


async def coordinator_with_checkpoints(*ids: int) -> Driving:
    storage = open_storage("memory://")
    graph = word_count(uuid.uuid4().hex[:8])
    phases = {str(s): (0.0, 0.0, 0.0) for s in graph.subtasks()}  # the pipeline's shape
    for n in ids:
        await ManifestStore(storage).commit(manifest(n, phases=phases))
    d = Driving(graph, storage=storage)  # the worker joins by hand: place at once
    await d.start()
    await d.join("w1")
    return d


def fallbacks(d: Driving) -> float | None:
    registry = CollectorRegistry()
    registry.register(CoordinatorCollector(d.coordinator))
    return registry.get_sample_value(
        "sluicegate_restore_fallbacks_total", {"pipeline": d.graph.name}
    )


async def test_a_deleted_manifest_falls_back_with_a_warning_and_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    d = await coordinator_with_checkpoints(1, 2, 3)
    await d.storage.delete(checkpoint_manifest(3))

    assign = await d.recover()

    assert assign is not None
    assert assign.restore_from == 2
    assert fallbacks(d) == 1
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert any("checkpoint 3 is corrupt" in r.getMessage() for r in warnings), caplog.text
    assert "its manifest is missing" in caplog.text
    assert 3 in await ManifestStore(d.storage).corrupt()

    assign = await d.recover()  # the next recovery falls back from 2 no further, counts nothing
    assert assign is not None
    assert assign.restore_from == 2
    assert fallbacks(d) == 1


async def test_every_manifest_deleted_fails_the_job_rather_than_start_afresh() -> None:
    d = await coordinator_with_checkpoints(1)
    await d.storage.delete(checkpoint_manifest(1))

    assert await d.recover() is None

    assert d.facts().state is JobState.FAILED
    assert fallbacks(d) == 1


async def test_a_corrupt_checkpoint_reported_by_every_subtask_counts_once() -> None:
    d = await coordinator_with_checkpoints(1, 2)
    assert await d.recover() is not None
    failed = [
        SubtaskFailed(subtask, d.facts().attempt, "CorruptCheckpointError(...)", 2)
        for subtask in ("tokenizer#0", "tokenizer#1", "counter#0")
    ]
    await d.step(*failed)
    assert fallbacks(d) == 1
    assert await ManifestStore(d.storage).corrupt() == {2}

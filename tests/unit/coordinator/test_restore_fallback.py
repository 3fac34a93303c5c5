"""The coordinator's restore fallbacks, without a broker: a deleted manifest of the newest
completed checkpoint is logged, counted in ``sluicegate_restore_fallbacks_total`` and marked
corrupt (so it is counted once); a corrupt checkpoint reported by every subtask counts once
(the first report starts the recovery, which ignores the rest)."""

from __future__ import annotations

import time
import uuid

import pytest
from prometheus_client import CollectorRegistry

from sluicegate.coordinator.job_state import JobEvent
from sluicegate.coordinator.metrics import CoordinatorCollector
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.protocol.messages import (
    FromWorker,
    Heartbeat,
    Retired,
    SubtaskFailed,
    ToWorker,
)
from sluicegate.operators.protocol.wire import encode_message
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.layout import checkpoint_manifest
from sluicegate.operators.storage.manifest import ManifestStore
from sluicegate.testing import word_count
from tests.unit.coordinator.test_checkpoint_stats import manifest


class Sent:
    """Stands in for the coordinator's control link: keeps what it sends to the workers (in
    their wire form)."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []

    async def __aenter__(self) -> Sent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def send(self, message: ToWorker) -> None:
        self.messages.append(encode_message(message))

    async def receive(self, timeout_s: float) -> list[FromWorker]:
        return []


async def coordinator_with_checkpoints(*ids: int) -> Coordinator:
    storage = open_storage("memory://")
    graph = word_count(uuid.uuid4().hex[:8])
    phases = {str(s): (0.0, 0.0, 0.0) for s in graph.subtasks()}  # the pipeline's shape
    for n in ids:
        await ManifestStore(storage).commit(manifest(n, phases=phases))
    settings = CoordinatorSettings(settle_seconds=0)  # the worker joins by hand: place at once
    c = Coordinator(graph, bootstrap="127.0.0.1:1", storage=storage, settings=settings)
    c._link = Sent()
    beat = Heartbeat("w1", "i1", slots=4, attempt=0, subtasks=())
    c.liveness.on_heartbeat("w1", time.monotonic(), beat)
    return c


async def recover(c: Coordinator) -> None:
    """A new attempt and its assignment, as `Coordinator.run` and a recovery do."""
    if c.assign is not None:
        c.job.apply(JobEvent.FAILURE_DETECTED)
        c._running = None
    await c._new_attempt()
    await all_retired(c)
    await c._try_assign(time.monotonic())


async def all_retired(c: Coordinator) -> None:
    """Every live worker answers the new attempt's `Retire` (phase one of an attempt)."""
    for worker in c.liveness.alive_infos(time.monotonic()):
        await c._on_message(Retired(worker, c.attempt))


def fallbacks(c: Coordinator) -> float | None:
    registry = CollectorRegistry()
    registry.register(CoordinatorCollector(c))
    return registry.get_sample_value(
        "sluicegate_restore_fallbacks_total", {"pipeline": c.graph.name}
    )


async def test_a_deleted_manifest_falls_back_with_a_warning_and_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = await coordinator_with_checkpoints(1, 2, 3)
    await c.storage.delete(checkpoint_manifest(3))

    await recover(c)

    assert c.assign is not None
    assert c.assign.restore_from == 2
    assert fallbacks(c) == 1
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert any("checkpoint 3 is corrupt" in r.getMessage() for r in warnings), caplog.text
    assert "its manifest is missing" in caplog.text
    assert 3 in await c.manifests.corrupt()

    await recover(c)  # the next recovery falls back from 2 no further, and counts nothing
    assert c.assign is not None
    assert c.assign.restore_from == 2
    assert fallbacks(c) == 1


async def test_every_manifest_deleted_fails_the_job_rather_than_start_afresh() -> None:
    c = await coordinator_with_checkpoints(1)
    await c.storage.delete(checkpoint_manifest(1))

    await recover(c)

    assert c.assign is None
    assert c.job.is_terminal
    assert fallbacks(c) == 1


async def test_a_corrupt_checkpoint_reported_by_every_subtask_counts_once() -> None:
    c = await coordinator_with_checkpoints(1, 2)
    await recover(c)
    assert c.assign is not None
    for subtask in ("tokenizer#0", "tokenizer#1", "counter#0"):
        failed = SubtaskFailed(subtask, c.attempt, "CorruptCheckpointError(...)", 2)
        await c._on_message(failed)
    assert fallbacks(c) == 1
    assert await c.manifests.corrupt() == {2}

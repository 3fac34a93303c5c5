"""``sluicegate checkpoint list`` shows when each checkpoint was triggered and how long it took:
the manifest carries ``triggered_at`` (unix time, from the coordinator's trigger) next to
``completed_at``; a checkpoint in flight shows its trigger time; a version 1 manifest, without
``triggered_at``, still reads and shows "-"."""

from __future__ import annotations

import json
import time

from sluicegate.cli.commands import render_checkpoints
from sluicegate.coordinator.httpapi.view import CheckpointStatus
from sluicegate.coordinator.status import CoordinatorStatus
from sluicegate.operators.storage.manifest import CheckpointManifest
from tests.unit.coordinator.driving import Driving
from tests.unit.coordinator.test_checkpoint_stats import manifest


async def running_coordinator() -> Driving:
    d = Driving()
    await d.start()
    await d.join("w1")
    await d.retire_all()
    return d


async def test_checkpoint_list_shows_trigger_time_and_duration() -> None:
    d = await running_coordinator()
    view = CoordinatorStatus(d.coordinator)
    before = time.time()
    n = await d.coordinator.trigger_checkpoint()
    assert n is not None

    (in_flight,) = await view.checkpoints()
    assert in_flight.status is CheckpointStatus.IN_PROGRESS
    assert in_flight.triggered_at is not None
    assert before <= in_flight.triggered_at <= time.time()

    assert await d.complete_a_checkpoint() == n

    (done,) = await view.checkpoints()
    assert done.status is CheckpointStatus.COMPLETED
    assert done.triggered_at == in_flight.triggered_at
    assert done.completed_at is not None
    assert done.triggered_at <= done.completed_at
    header, row = render_checkpoints([done]).splitlines()[:2]
    assert header.split()[3:5] == ["TRIGGERED", "DURATION"]
    triggered, duration = row.split()[3:5]  # the columns before them hold no spaces
    assert triggered.endswith("Z")
    assert duration.endswith("s")


def test_a_version_1_manifest_reads_without_trigger_time() -> None:
    body = json.loads(manifest(4).model_dump_json())
    body["schema_version"] = 1
    del body["triggered_at"]

    old = CheckpointManifest.model_validate_json(json.dumps(body))

    assert old.triggered_at is None
    assert old.checkpoint_id == 4

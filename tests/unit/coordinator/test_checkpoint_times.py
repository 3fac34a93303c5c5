"""``sluicegate checkpoint list`` shows when each checkpoint was triggered and how long it took:
the manifest carries ``triggered_at`` (unix time, from the coordinator's trigger) next to
``completed_at``; a checkpoint in flight shows its trigger time; a version 1 manifest, without
``triggered_at``, still reads and shows "-"."""

from __future__ import annotations

import json
import time
import uuid

from sluicegate.cli.commands import render_checkpoints
from sluicegate.coordinator.httpapi.view import CheckpointStatus
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.coordinator.status import CoordinatorStatus
from sluicegate.operators.protocol.messages import CheckpointAck, Heartbeat
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.manifest import CheckpointManifest
from sluicegate.testing import word_count
from tests.helpers import fake_state_handle
from tests.unit.coordinator.test_checkpoint_stats import manifest
from tests.unit.coordinator.test_restore_fallback import Sent, all_retired

AT_ONCE = CoordinatorSettings(settle_seconds=0)
"""Placement as soon as the workers have the slots: these tests join workers by hand."""


async def running_coordinator() -> Coordinator:
    c = Coordinator(
        word_count(uuid.uuid4().hex[:8]),
        bootstrap="127.0.0.1:1",
        storage=open_storage("memory://"),
        settings=AT_ONCE,
    )
    c._link = Sent()
    now = time.monotonic()
    c.liveness.on_heartbeat("w1", now, Heartbeat("w1", "i1", slots=4, attempt=0, subtasks=()))
    await c._new_attempt()
    await all_retired(c)
    await c._tick(now)
    return c


async def test_checkpoint_list_shows_trigger_time_and_duration() -> None:
    c = await running_coordinator()
    view = CoordinatorStatus(c)
    before = time.time()
    n = await c.trigger_checkpoint()
    assert n is not None

    (in_flight,) = await view.checkpoints()
    assert in_flight.status is CheckpointStatus.IN_PROGRESS
    assert in_flight.triggered_at is not None
    assert before <= in_flight.triggered_at <= time.time()

    assert c.assign is not None
    for subtask in (s for subs in c.assign.assignment.values() for s in subs):
        handle = fake_state_handle(f"shared/{subtask}", n)
        await c._on_message(CheckpointAck(subtask, n, c.attempt, {}, handle))

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

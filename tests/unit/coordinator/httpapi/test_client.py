"""The API client reads answers of a newer coordinator: fields it does not know are ignored
(an older `sluicegate` CLI against an upgraded coordinator), fields it knows are checked."""

from __future__ import annotations

import json

import pytest

from sluicegate.coordinator.httpapi.client import CoordinatorApiError, CoordinatorClient
from sluicegate.coordinator.httpapi.view import JobStatus, WorkerInfo

STATUS = {
    "pipeline": "orders",
    "state": "running",
    "attempt": 3,
    "last_completed_checkpoint": 41,
    "checkpoint_lag_seconds": 0.4,
    "restarts": 2,
    "stop": {"phase": "final_checkpoint", "final_checkpoint": None, "note": ""},
    "counts": {},
}


def test_fields_a_newer_coordinator_added_are_ignored() -> None:
    newer = {**STATUS, "added_later": {"any": "shape"}}
    newer["stop"] = {**STATUS["stop"], "also_later": 1}  # type: ignore[dict-item]
    status = CoordinatorClient._parse(200, json.dumps(newer).encode(), JobStatus)
    assert status.attempt == 3
    assert status.stop is not None
    assert status.stop.phase == "final_checkpoint"
    workers = CoordinatorClient._parse(
        200,
        b'[{"worker_id": "w1", "slots": 4, "subtasks": [], "seconds_since_heartbeat": 0.5,'
        b' "alive": true, "zone": "eu-1"}]',
        list[WorkerInfo],
    )
    assert [w.worker_id for w in workers] == ["w1"]


@pytest.mark.parametrize(
    "broken",
    [
        {**STATUS, "attempt": "three"},
        {**STATUS, "restarts": -1},
        {k: v for k, v in STATUS.items() if k != "pipeline"},
    ],
)
def test_a_field_the_client_knows_is_still_checked(broken: dict[str, object]) -> None:
    with pytest.raises(CoordinatorApiError, match="unexpected answer"):
        CoordinatorClient._parse(200, json.dumps(broken).encode(), JobStatus)

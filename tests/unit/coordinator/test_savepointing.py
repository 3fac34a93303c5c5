"""`Savepointing`: which savepoints to write when, as `WriteSavepoint` actions."""

from __future__ import annotations

import pytest

from sluicegate.coordinator.savepoints.phase import Savepointing, WriteSavepoint
from sluicegate.coordinator.savepoints.requests import SavepointPhase
from sluicegate.operators.savepoints.exceptions import SavepointRefusedError
from sluicegate.operators.storage.manifest import CheckpointManifest


def manifest(n: int) -> CheckpointManifest:
    return CheckpointManifest.from_acks("p", n, 1, [])


def test_a_request_waits_for_its_checkpoint_and_is_written_once_it_completes() -> None:
    phase = Savepointing()
    request = phase.request("sp", stop=False, at=10.0)
    assert phase.waiting() is request
    phase.triggered(4)
    assert phase.waiting() is None
    assert phase.on_completed(manifest(3)) == []  # another checkpoint
    fourth = manifest(4)
    assert phase.on_completed(fourth) == [WriteSavepoint(request, fourth)]
    assert phase.pinned() == (4,)
    phase.written(request, 123, 12.5)
    assert request.phase is SavepointPhase.COMPLETED
    assert phase.pinned() == ()
    assert phase.last_written == (2.5, 123)
    assert phase.outcomes == {"completed": 1, "failed": 0}


def test_one_request_at_a_time_and_none_while_the_job_cannot_take_one() -> None:
    phase = Savepointing()
    phase.refuse(None)
    phase.request("a", stop=False, at=1.0)
    with pytest.raises(SavepointRefusedError, match="savepoint a is under way"):
        phase.refuse(None)
    fresh = Savepointing()
    with pytest.raises(SavepointRefusedError, match="the job is stopped"):
        fresh.refuse("the job is stopped")


def test_an_aborted_checkpoint_fails_its_request_and_a_recovery_asks_for_another() -> None:
    phase = Savepointing()
    request = phase.request("sp", stop=False, at=1.0)
    phase.triggered(4)
    phase.on_recovery()
    assert phase.waiting() is request  # the abandoned checkpoint: trigger another one
    phase.triggered(5)
    phase.on_aborted(5, "declined", 2.0)
    assert request.phase is SavepointPhase.FAILED
    assert phase.outcomes == {"completed": 0, "failed": 1}


def test_a_stops_request_is_written_from_the_final_checkpoint_after_the_stop() -> None:
    phase = Savepointing()
    request = phase.request("sp", stop=True, at=1.0)
    assert phase.waiting() is None  # a stop's savepoint triggers no checkpoint of its own
    assert phase.stop_requests() == [request]
    final = manifest(7)
    assert phase.on_stopped(request, final, 3.0) == [WriteSavepoint(request, final)]
    other = Savepointing()
    lonely = other.request("sp", stop=True, at=1.0)
    assert other.on_stopped(lonely, None, 3.0) == []
    assert lonely.phase is SavepointPhase.FAILED
    assert other.outcomes == {"completed": 0, "failed": 1}

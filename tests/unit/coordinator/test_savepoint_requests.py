"""The savepoint request machine: which checkpoint a savepoint is written from, and how a
request ends."""

from __future__ import annotations

from sluicegate.coordinator.savepoints.requests import SavepointRequest
from sluicegate.operators.savepoints.progress import SavepointProgress


def phase(request: SavepointRequest) -> str:
    """Read through a call, so the checker does not narrow the phase between steps."""
    return request.phase.value


def pinned(request: SavepointRequest) -> int | None:
    return request.pinned


def test_a_request_is_written_from_the_checkpoint_triggered_for_it() -> None:
    request = SavepointRequest("sp", stop=False, requested_at=0.0)
    assert pinned(request) is None
    assert not request.checkpoint_completed(4)  # not triggered yet: an older checkpoint
    request.triggered(5)
    assert phase(request) == "checkpointing"
    assert not request.checkpoint_completed(4)
    assert request.checkpoint_completed(5)
    assert pinned(request) == 5  # retention keeps it while it is written
    request.on_progress(SavepointProgress(1, 4, 10, 100))
    request.written(1.0)
    assert request.done
    assert pinned(request) is None
    assert request.progress.rows == 10


def test_an_aborted_checkpoint_fails_the_request_and_a_recovery_retriggers() -> None:
    request = SavepointRequest("sp", stop=False, requested_at=0.0)
    request.triggered(5)
    request.checkpoint_abandoned()
    assert phase(request) == "waiting"
    assert request.checkpoint_id is None
    request.triggered(7)
    request.checkpoint_aborted(6, "other", 1.0)
    assert phase(request) == "checkpointing"
    request.checkpoint_aborted(7, "a subtask declined", 1.0)
    assert phase(request) == "failed"
    assert "checkpoint 7 aborted: a subtask declined" in request.error


def test_a_stop_request_waits_for_the_stop_and_needs_a_completed_checkpoint() -> None:
    request = SavepointRequest("sp", stop=True, requested_at=0.0)
    request.triggered(3)  # a stop's savepoint takes no checkpoint of its own
    assert phase(request) == "waiting"
    assert request.stopped(9, 1.0)
    assert request.checkpoint_id == 9
    assert pinned(request) == 9
    none = SavepointRequest("sp2", stop=True, requested_at=0.0)
    assert not none.stopped(None, 1.0)
    assert phase(none) == "failed"
    assert "no completed checkpoint" in none.error


def test_a_plain_request_ignores_the_stop_and_a_done_request_stays_done() -> None:
    plain = SavepointRequest("sp", stop=False, requested_at=0.0)
    assert not plain.stopped(9, 1.0)
    plain.failed("first", 1.0)
    plain.failed("second", 2.0)
    assert plain.error == "first"

"""Periodic checkpoints pause after storage failures, doubling, and resume after a success."""

from __future__ import annotations

from sluicegate.coordinator.checkpoints.backoff import StorageBackoff
from sluicegate.coordinator.checkpoints.tracker import AbortCause, CheckpointTracker


def test_the_pause_doubles_up_to_its_cap_and_a_success_resets_it() -> None:
    backoff = StorageBackoff(initial_seconds=1, max_seconds=5)
    assert not backoff.waiting(0)
    assert [backoff.failed(0) for _ in range(5)] == [1, 2, 4, 5, 5]
    assert backoff.waiting(4.9)
    assert not backoff.waiting(5)
    backoff.succeeded()
    assert not backoff.waiting(0)
    assert backoff.failed(10) == 1


def test_a_trigger_that_storage_refused_aborts_the_checkpoint_in_flight() -> None:
    tracker = CheckpointTracker(
        subtasks=["a#0"], next_checkpoint_id=7, attempt=1, interval_seconds=1,
        min_pause_seconds=0, timeout_seconds=60,
    )  # fmt: skip
    inject = tracker.trigger(0.0, forced=True)
    assert inject is not None
    abort = tracker.on_trigger_failed(7, "storage down", 0.1)
    assert abort is not None
    assert (abort.checkpoint_id, abort.cause) == (7, AbortCause.MANIFEST_FAILED)
    assert tracker.in_flight is None
    assert tracker.on_trigger_failed(7, "again", 0.2) is None  # stale: ignored

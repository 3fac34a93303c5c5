"""CheckpointTracker: trigger policy, completion, aborts, recoveries and id uniqueness."""

from __future__ import annotations

import pytest

from sluicegate.coordinator.checkpoints.tracker import (
    AbortCause,
    AbortCheckpoint,
    BroadcastCompleted,
    CheckpointTracker,
    CommitManifest,
    SendTrigger,
)
from sluicegate.operators.protocol.channels import TopicPartition
from sluicegate.operators.protocol.exceptions import ProtocolViolationError
from sluicegate.operators.protocol.messages import CheckpointAck
from tests.helpers import fake_state_handle

SUBTASKS = ("a#0", "b#0")


def tracker(
    *, next_id: int = 1, attempt: int = 1, interval: float = 10, pause: float = 2
) -> CheckpointTracker:
    return CheckpointTracker(
        subtasks=SUBTASKS,
        next_checkpoint_id=next_id,
        attempt=attempt,
        interval_seconds=interval,
        min_pause_seconds=pause,
        timeout_seconds=60,
    )


def ack(subtask: str, checkpoint_id: int, attempt: int = 1) -> CheckpointAck:
    positions = {TopicPartition("t", 0): 1}
    return CheckpointAck(
        subtask, checkpoint_id, attempt, positions, fake_state_handle(f"h-{subtask}")
    )


def in_flight(t: CheckpointTracker) -> int | None:
    # A call, not the property: mypy would keep an asserted property narrowed for the test.
    return t.in_flight


def complete(t: CheckpointTracker, checkpoint_id: int, now: float) -> BroadcastCompleted | None:
    assert t.on_ack(ack("a#0", checkpoint_id, t.attempt)) is None
    commit = t.on_ack(ack("b#0", checkpoint_id, t.attempt))
    assert isinstance(commit, CommitManifest)
    return t.on_manifest_committed(checkpoint_id, now)


def test_a_checkpoint_goes_trigger_acks_commit_completed() -> None:
    t = tracker()
    assert t.trigger(0.0) == SendTrigger(1, 1)
    assert t.in_flight == 1
    assert t.on_ack(ack("b#0", 1)) is None
    commit = t.on_ack(ack("a#0", 1))
    assert commit == CommitManifest(1, 1, (ack("a#0", 1), ack("b#0", 1)))
    assert in_flight(t) == 1, "in flight until the manifest is committed"
    assert t.trigger(100.0) is None
    assert t.on_manifest_committed(1, 3.0) == BroadcastCompleted(1, 1)
    assert in_flight(t) is None
    assert t.last_completed == 1


def test_at_most_one_checkpoint_in_flight() -> None:
    t = tracker(interval=0, pause=0)
    assert t.trigger(0.0) is not None
    assert t.trigger(1000.0) is None
    assert t.trigger(1000.0, forced=True) is None


def test_the_interval_spaces_triggers_unless_forced() -> None:
    t = tracker(interval=10, pause=0)
    t.trigger(0.0)
    complete(t, 1, 1.0)
    assert t.trigger(9.0) is None
    assert t.trigger(9.0, forced=True) == SendTrigger(2, 1)


def test_the_min_pause_counts_from_the_end_of_the_last_checkpoint_even_when_forced() -> None:
    t = tracker(interval=0, pause=5)
    t.trigger(0.0)
    complete(t, 1, 20.0)
    assert t.trigger(24.0, forced=True) is None
    assert t.trigger(25.0) == SendTrigger(2, 1)


def test_a_timeout_aborts_and_the_pause_follows() -> None:
    t = tracker(interval=0, pause=5)
    t.trigger(0.0)
    t.on_ack(ack("a#0", 1))
    assert t.on_tick(59.0) is None
    abort = t.on_tick(60.0)
    assert isinstance(abort, AbortCheckpoint)
    assert (abort.checkpoint_id, abort.cause) == (1, AbortCause.TIMED_OUT)
    assert "b#0" in abort.reason
    assert t.on_ack(ack("b#0", 1)) is None, "a late ack of an aborted checkpoint is stale"
    assert t.trigger(64.0) is None
    assert t.trigger(65.0) == SendTrigger(2, 1)


def test_a_decline_aborts_once() -> None:
    t = tracker()
    t.trigger(0.0)
    abort = t.on_decline(1, 1, "b#0", "buffer full", 1.0)
    assert abort == AbortCheckpoint(1, 1, AbortCause.DECLINED, "declined by b#0: buffer full")
    assert t.on_decline(1, 1, "a#0", "late", 2.0) is None
    assert t.in_flight is None


def test_stale_acks_and_declines_are_ignored() -> None:
    t = tracker(next_id=5, attempt=3)
    t.trigger(0.0)
    assert t.on_ack(ack("a#0", 4, attempt=3)) is None
    assert t.on_ack(ack("a#0", 5, attempt=2)) is None
    assert t.on_decline(5, 2, "a#0", "zombie", 1.0) is None
    assert t.on_manifest_committed(4, 1.0) is None
    assert t.in_flight == 5


def test_a_failed_manifest_commit_aborts() -> None:
    t = tracker()
    t.trigger(0.0)
    t.on_ack(ack("a#0", 1))
    t.on_ack(ack("b#0", 1))
    abort = t.on_manifest_failed(1, "storage away", 2.0)
    assert abort is not None
    assert abort.cause is AbortCause.MANIFEST_FAILED
    assert t.on_manifest_committed(1, 3.0) is None


def test_checkpoint_ids_never_repeat_across_recoveries() -> None:
    # As the coordinator does: each attempt gets a new tracker, from the next id kept durably
    # (the ids triggered so far); a checkpoint in flight at the recovery is left behind.
    t = tracker(interval=0, pause=0)
    seen = []
    for attempt in range(2, 7):
        inject = t.trigger(float(attempt))
        assert inject is not None
        seen.append(inject.checkpoint_id)
        t = tracker(next_id=t.next_checkpoint_id, attempt=attempt, interval=0, pause=0)
    assert t.trigger(0.0) == SendTrigger(6, 6)
    assert seen == [1, 2, 3, 4, 5]


def test_construction_is_checked() -> None:
    with pytest.raises(ProtocolViolationError):
        tracker(next_id=0)
    with pytest.raises(ProtocolViolationError):
        CheckpointTracker(
            subtasks=(),
            next_checkpoint_id=1,
            attempt=1,
            interval_seconds=0,
            min_pause_seconds=0,
            timeout_seconds=1,
        )

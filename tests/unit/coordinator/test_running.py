"""`Running`: the running phase's decisions, as the actions the coordinator performs."""

from __future__ import annotations

from sluicegate.coordinator.checkpoints.backoff import StorageBackoff
from sluicegate.coordinator.checkpoints.tracker import (
    AbortCause,
    AbortCheckpoint,
    CheckpointTracker,
    CommitManifest,
)
from sluicegate.coordinator.running import (
    ApplyRetention,
    CommitOffsets,
    Complete,
    Fail,
    MarkCorrupt,
    Rebalance,
    Running,
    SendAssign,
    Trigger,
    TriggerPurpose,
)
from sluicegate.operators.protocol.messages import (
    Assign,
    CheckpointAck,
    CheckpointDecline,
    Heartbeat,
    SubtaskFailed,
)
from sluicegate.operators.storage.manifest import CheckpointManifest
from tests.helpers import fake_state_handle

SUBTASKS = ("a#0", "b#0")


def running(
    *, restore_from: int | None = None, periodic: bool = True, backoff: StorageBackoff | None = None
) -> Running:
    tracker = CheckpointTracker(
        subtasks=SUBTASKS, next_checkpoint_id=5, attempt=2,
        interval_seconds=10, min_pause_seconds=0, timeout_seconds=30,
    )  # fmt: skip
    assign = Assign(2, restore_from, 5, {"w1": SUBTASKS})
    return Running(
        tracker, assign, backoff or StorageBackoff(), subtasks=SUBTASKS, periodic=periodic
    )


def acked(r: Running, n: int) -> CheckpointManifest:
    acks = [CheckpointAck(s, n, 2, {}, fake_state_handle(s, n)) for s in SUBTASKS]
    (commit,) = [a for ack in acks for a in r.on_ack(ack)]
    assert isinstance(commit, CommitManifest)
    return CheckpointManifest.from_acks("p", n, 2, commit.acks)


def test_a_tick_triggers_the_periodic_checkpoint_then_waits_for_the_interval() -> None:
    r = running()
    assert r.tick(0.0) == [Trigger(5, 2, TriggerPurpose.PERIODIC)]
    assert r.in_flight == 5
    assert r.tick(1.0) == []


def test_a_waiting_savepoint_is_triggered_first_and_a_timeout_aborts() -> None:
    r = running()
    assert r.tick(0.0, savepoint_waiting=True) == [Trigger(5, 2, TriggerPurpose.SAVEPOINT)]
    (abort,) = r.tick(31.0)
    assert isinstance(abort, AbortCheckpoint)
    assert abort.cause is AbortCause.TIMED_OUT


def test_without_periodic_checkpoints_only_asked_for_ones_are_triggered() -> None:
    r = running(periodic=False)
    assert r.tick(0.0) == []
    assert r.trigger(0.0, TriggerPurpose.REQUESTED, full=True) == Trigger(
        5, 2, TriggerPurpose.REQUESTED, full=True
    )
    assert r.trigger(0.0, TriggerPurpose.REQUESTED) is None  # one is in flight


def test_a_committed_manifest_completes_commits_offsets_and_applies_retention() -> None:
    r = running(restore_from=3)
    r.tick(0.0)
    manifest = acked(r, 5)
    assert r.on_manifest_committed(manifest, 1.0, {"w1": 2}) == [
        Complete(manifest),
        CommitOffsets(manifest),
        ApplyRetention((3,)),
    ]
    assert r.in_flight is None
    assert r.on_manifest_committed(manifest, 1.0, {"w1": 2}) == []  # stale


def test_a_joined_worker_calls_for_a_rebalance_unless_stopping() -> None:
    r = running()
    r.tick(0.0)
    actions = r.on_manifest_committed(acked(r, 5), 1.0, {"w1": 2, "w2": 2})
    assert isinstance(actions[-1], Rebalance)
    assert {w: len(s) for w, s in actions[-1].plan.items()} == {"w1": 1, "w2": 1}
    stopping = running()
    stopping.tick(0.0)
    stopping.stop()
    assert not any(
        isinstance(a, Rebalance)
        for a in stopping.on_manifest_committed(acked(stopping, 5), 1.0, {"w1": 2, "w2": 2})
    )


def test_stopping_ends_periodic_triggers_but_not_timeouts() -> None:
    r = running()
    r.tick(0.0)
    r.stop()
    assert r.tick(20.0) == []
    assert [type(a) for a in r.tick(31.0)] == [AbortCheckpoint]
    assert r.tick(100.0) == []


def test_storage_failures_back_off_periodic_checkpoints_until_one_completes() -> None:
    backoff = StorageBackoff(initial_seconds=50)
    r = running(backoff=backoff)
    r.tick(0.0)
    (abort,) = r.on_trigger_failed(5, "storage down", 0.0)
    assert isinstance(abort, AbortCheckpoint)
    assert r.tick(20.0) == []  # backing off
    assert r.trigger(20.0, TriggerPurpose.REQUESTED) == Trigger(6, 2, TriggerPurpose.REQUESTED)
    acked(r, 6)
    (failed,) = r.on_manifest_failed(6, "storage down", 21.0, storage_failed=True)
    assert isinstance(failed, AbortCheckpoint)
    assert failed.cause is AbortCause.MANIFEST_FAILED
    assert backoff.failures == 2
    r.trigger(22.0, TriggerPurpose.REQUESTED)
    assert r.on_manifest_committed(acked(r, 7), 23.0, {"w1": 2})
    assert backoff.failures == 0
    assert r.tick(40.0) == [Trigger(8, 2, TriggerPurpose.PERIODIC)]


def test_a_decline_aborts_the_checkpoint() -> None:
    r = running()
    r.tick(0.0)
    (abort,) = r.on_decline(CheckpointDecline("a#0", 5, 2, "buffer full"), 1.0)
    assert isinstance(abort, AbortCheckpoint)
    assert abort.cause is AbortCause.DECLINED


def test_a_failed_subtask_fails_the_attempt_after_marking_a_corrupt_checkpoint() -> None:
    r = running()
    assert r.on_subtask_failed(SubtaskFailed("a#0", 1, "old")) == []  # another attempt
    assert r.on_subtask_failed(SubtaskFailed("a#0", 2, "boom", 4)) == [
        MarkCorrupt(4, "boom"),
        Fail("subtask a#0 failed: boom", "a#0"),
    ]


def test_only_a_lost_worker_that_runs_subtasks_fails_the_attempt() -> None:
    r = running()
    assert r.on_worker_lost("w9", "missed its heartbeats") == []
    assert r.on_worker_lost("w1", "missed its heartbeats") == [
        Fail("worker w1 missed its heartbeats")
    ]


def test_a_heartbeat_of_another_attempt_gets_the_assignment_again_unless_stopping() -> None:
    r = running()
    assert r.on_heartbeat(Heartbeat("w1", "i", 2, 2, SUBTASKS)) == []
    assert r.on_heartbeat(Heartbeat("w2", "i", 2, 1, ())) == [SendAssign(r.assign)]
    r.stop()
    assert r.on_heartbeat(Heartbeat("w2", "i", 2, 1, ())) == []

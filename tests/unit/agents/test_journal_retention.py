"""When a finished run's journal entries may be tombstoned."""

from __future__ import annotations

from sluicegate.agents.journal.retention import JOURNAL_LAG, Retention


def test_a_run_is_due_lag_checkpoints_after_the_first_that_holds_it_finished() -> None:
    retention = Retention()
    retention.finished("r1", 0)
    assert retention.completed(10) == []  # no snapshot holds it yet
    retention.snapshot(3)
    for checkpoint in range(3, 3 + JOURNAL_LAG):
        assert retention.completed(checkpoint) == []
    assert retention.completed(3 + JOURNAL_LAG) == [("r1", 0)]
    assert retention.completed(4 + JOURNAL_LAG) == []  # once


def test_runs_are_due_by_their_checkpoint_in_order() -> None:
    retention = Retention(lag=1)
    retention.finished("a", 0)
    retention.snapshot(1)
    retention.snapshot(2)  # nothing new: nothing scheduled
    retention.finished("b", 1)
    retention.finished("c", 0)
    retention.snapshot(3)
    assert retention.completed(2) == [("a", 0)]
    assert retention.completed(9) == [("b", 1), ("c", 0)]


def test_a_rollback_calls_off_a_run_scheduled_or_not_yet_snapshotted() -> None:
    retention = Retention(lag=1)
    retention.finished("a", 0)
    retention.finished("b", 0)
    retention.snapshot(1)
    retention.finished("a2", 0)
    retention.call_off("a")
    retention.call_off("a2")
    retention.snapshot(2)
    assert retention.completed(5) == [("b", 0)]
    retention.finished("a", 0)  # its next final state schedules it again
    retention.snapshot(6)
    assert retention.completed(7) == [("a", 0)]

"""RestoreFilter: the attempt rule, zombies, and the interval sanity check."""

from __future__ import annotations

import pytest

from sluicegate.operators.protocol.exceptions import ProtocolViolationError
from sluicegate.operators.protocol.records import SOURCE_WRITER, RecordKind, RecordMeta
from sluicegate.operators.protocol.restore_filter import Accept, Fenced, RestoreFilter, Skip


def record(attempt: int, interval: int = 9) -> RecordMeta:
    return RecordMeta(attempt, interval, "up#0")


def barrier(attempt: int, checkpoint_id: int) -> RecordMeta:
    return RecordMeta(attempt, checkpoint_id, SOURCE_WRITER, RecordKind.BARRIER, checkpoint_id)


def test_source_records_are_always_accepted() -> None:
    assert RestoreFilter(5, restored_checkpoint_id=8).decide(None) == Accept()


def test_records_and_markers_of_this_attempt_are_accepted() -> None:
    f = RestoreFilter(2, restored_checkpoint_id=8)
    assert f.decide(record(2)) == Accept()
    assert f.decide(barrier(2, 10)) == Accept()


def test_records_and_markers_of_an_older_attempt_are_skipped() -> None:
    f = RestoreFilter(3, restored_checkpoint_id=8)
    assert f.decide(record(2, interval=4)) == Skip(2)
    assert f.decide(record(1, interval=12)) == Skip(1)
    assert f.decide(barrier(2, 9)) == Skip(2)


def test_a_newer_attempt_fences_a_zombie_for_good() -> None:
    f = RestoreFilter(3)
    assert f.decide(record(4)) == Fenced(3, 4)
    assert f.fenced_by == 4
    assert f.decide(None) == Fenced(3, 4)
    assert f.decide(record(3)) == Fenced(3, 4)


def test_a_record_of_this_attempt_inside_the_restored_checkpoint_is_a_violation() -> None:
    f = RestoreFilter(3, restored_checkpoint_id=8)
    with pytest.raises(ProtocolViolationError):
        f.decide(record(3, interval=8))


def test_without_a_restored_checkpoint_any_interval_is_fine() -> None:
    assert RestoreFilter(1).decide(record(1, interval=0)) == Accept()
    assert RestoreFilter(1).attempt == 1

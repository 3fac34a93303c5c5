"""PendingCheckpoint: completion, declines, timeouts, and acks that do not fit."""

from __future__ import annotations

import pytest

from sluicegate.coordinator.checkpoints.pending import PendingCheckpoint
from sluicegate.operators.protocol.channels import TopicPartition
from sluicegate.operators.protocol.exceptions import ProtocolViolationError
from sluicegate.operators.protocol.messages import CheckpointAck
from tests.helpers import fake_state_handle


def ack(subtask: str, checkpoint_id: int = 7, attempt: int = 2, handle: str = "h") -> CheckpointAck:
    positions = {TopicPartition("t", 0): 4}
    return CheckpointAck(subtask, checkpoint_id, attempt, positions, fake_state_handle(handle))


def pending(*subtasks: str) -> PendingCheckpoint:
    return PendingCheckpoint(
        7, attempt=2, subtasks=subtasks, triggered_at=100.0, timeout_seconds=30.0
    )


def complete(p: PendingCheckpoint) -> bool:
    # A call, not the property: mypy would keep an asserted property narrowed for the test.
    return p.is_complete


def test_complete_once_every_subtask_has_acked() -> None:
    p = pending("a#0", "a#1")
    assert p.add_ack(ack("a#1"))
    assert not complete(p)
    assert p.missing == {"a#0"}
    assert p.add_ack(ack("a#0"))
    assert complete(p)
    assert [a.subtask for a in p.acks] == ["a#0", "a#1"]


def test_a_repeated_ack_is_ignored_and_a_different_one_refused() -> None:
    p = pending("a#0", "a#1")
    assert p.add_ack(ack("a#0"))
    assert not p.add_ack(ack("a#0"))
    with pytest.raises(ProtocolViolationError):
        p.add_ack(ack("a#0", handle="other"))


@pytest.mark.parametrize("wrong", [ack("a#9"), ack("a#0", checkpoint_id=8), ack("a#0", attempt=1)])
def test_acks_that_do_not_belong_are_refused(wrong: CheckpointAck) -> None:
    with pytest.raises(ProtocolViolationError):
        pending("a#0").add_ack(wrong)


def test_the_first_decline_wins_and_blocks_completion() -> None:
    p = pending("a#0", "a#1")
    assert p.add_decline("a#1", "buffer full")
    assert not p.add_decline("a#0", "other")
    p.add_ack(ack("a#0"))
    assert p.declined == ("a#1", "buffer full")
    assert not p.is_complete
    with pytest.raises(ProtocolViolationError):
        p.add_decline("b#0", "stranger")


def test_timed_out_only_after_the_deadline_and_only_if_incomplete() -> None:
    p = pending("a#0")
    assert p.deadline == 130.0
    assert not p.is_timed_out(129.9)
    assert p.is_timed_out(130.0)
    p.add_ack(ack("a#0"))
    assert not p.is_timed_out(500.0)


def test_a_checkpoint_without_subtasks_is_refused() -> None:
    with pytest.raises(ProtocolViolationError):
        pending()

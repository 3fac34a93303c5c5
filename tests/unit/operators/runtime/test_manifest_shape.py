"""A checkpoint of another pipeline shape is refused with what to do, not restored in part."""

from __future__ import annotations

from sluicegate.operators.protocol.messages import CheckpointAck
from sluicegate.operators.storage.manifest import CheckpointManifest
from tests.helpers import fake_state_handle


def manifest(*subtasks: str) -> CheckpointManifest:
    acks = [CheckpointAck(s, 4, 1, {}, fake_state_handle(f"shared/{s}", 4)) for s in subtasks]
    return CheckpointManifest.from_acks("p", 4, 1, acks)


def test_the_same_shape_restores() -> None:
    assert manifest("a#0", "b#0").shape_mismatch(["a#0", "b#0"]) is None


def test_an_added_operator_is_refused_naming_it_and_what_to_do() -> None:
    reason = manifest("a#0", "b#0").shape_mismatch(["a#0", "b#0", "router#0"])
    assert reason is not None
    assert "router#0" in reason
    assert "new checkpoint storage" in reason
    assert "--from-savepoint" in reason


def test_another_parallelism_is_refused() -> None:
    reason = manifest("a#0", "a#1").shape_mismatch(["a#0"])
    assert reason is not None
    assert "a#1" in reason

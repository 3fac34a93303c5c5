"""`RetireGate`: a new attempt is assigned once every live worker retired its older subtasks,
or, after the deadline, to those that did."""

from __future__ import annotations

from sluicegate.coordinator.retirement import RetireGate


def test_waits_for_every_live_worker_then_uses_them_all() -> None:
    gate = RetireGate(attempt=5, deadline=10.0)
    alive = {"w1": 2, "w2": 3}
    assert gate.ready(alive, now=0.0) is None
    gate.on_retired("w1", 5)
    assert gate.waiting_for(alive) == ["w2"]
    assert gate.ready(alive, now=1.0) is None
    gate.on_retired("w2", 5)
    assert gate.ready(alive, now=2.0) == {"w1": 2, "w2": 3}


def test_an_answer_for_another_attempt_does_not_count() -> None:
    gate = RetireGate(attempt=5, deadline=10.0)
    gate.on_retired("w1", 4)
    gate.on_retired("w1", 6)
    assert gate.ready({"w1": 2}, now=0.0) is None


def test_a_dead_worker_is_not_waited_for() -> None:
    gate = RetireGate(attempt=1, deadline=10.0)
    gate.on_retired("w1", 1)
    gate.on_retired("gone", 1)  # answered, then died: not alive, so not offered
    assert gate.ready({"w1": 4}, now=0.0) == {"w1": 4}


def test_after_the_deadline_only_the_workers_that_answered() -> None:
    gate = RetireGate(attempt=1, deadline=10.0)
    gate.on_retired("w1", 1)
    assert gate.ready({"w1": 4, "stuck": 4}, now=9.9) is None
    assert gate.ready({"w1": 4, "stuck": 4}, now=10.0) == {"w1": 4}
    assert RetireGate(attempt=1, deadline=0.0).ready({"stuck": 4}, now=1.0) == {}


def test_a_first_placement_waits_for_the_workers_started_together() -> None:
    """w2's first heartbeat comes 65 ms after w1's, whose slots would do: both get subtasks."""
    gate = RetireGate(attempt=1, deadline=30.0, settle_seconds=1.0)
    assert gate.ready({}, now=5.0) is None  # nobody yet: the settle time has not begun
    gate.on_retired("w1", 1)
    assert gate.ready({"w1": 4}, now=7.0) is None
    gate.on_retired("w2", 1)
    assert gate.ready({"w1": 4, "w2": 4}, now=7.065) is None
    assert gate.ready({"w1": 4, "w2": 4}, now=8.0) == {"w1": 4, "w2": 4}


def test_without_settle_time_the_live_workers_are_used_at_once() -> None:
    gate = RetireGate(attempt=2, deadline=30.0)
    gate.on_retired("w1", 2)
    assert gate.ready({"w1": 4}, now=7.0) == {"w1": 4}

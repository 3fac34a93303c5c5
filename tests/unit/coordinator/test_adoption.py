"""The adoption decision: a restarted coordinator keeps the attempt its workers still run."""

from __future__ import annotations

from sluicegate.coordinator.adoption import Adopt, Restart, Wait, decide_adoption
from sluicegate.operators.protocol.messages import Heartbeat

PLAN: dict[str, tuple[str, ...]] = {"w1": ("a#0", "b#0"), "w2": ("a#1", "b#1")}


def beat(worker: str, attempt: int, *subtasks: str) -> Heartbeat:
    return Heartbeat(worker, f"{worker}-i", slots=4, attempt=attempt, subtasks=subtasks)


def test_every_planned_worker_running_its_subtasks_is_adopted() -> None:
    alive = {"w1": beat("w1", 3, "a#0", "b#0"), "w2": beat("w2", 3, "a#1", "b#1")}
    assert decide_adoption(3, PLAN, alive) == Adopt(3, PLAN)


def test_a_worker_not_heard_from_yet_is_waited_for() -> None:
    assert decide_adoption(3, PLAN, {"w1": beat("w1", 3, "a#0", "b#0")}) == Wait(("w2",))


def test_a_worker_at_another_attempt_means_a_restart() -> None:
    alive = {"w1": beat("w1", 3, "a#0", "b#0"), "w2": beat("w2", 0)}  # w2 restarted
    decision = decide_adoption(3, PLAN, alive)
    assert isinstance(decision, Restart)
    assert "w2 runs attempt 0" in decision.reason


def test_a_worker_missing_a_subtask_means_a_restart() -> None:
    alive = {"w1": beat("w1", 3, "a#0"), "w2": beat("w2", 3, "a#1", "b#1")}
    decision = decide_adoption(3, PLAN, alive)
    assert isinstance(decision, Restart)
    assert "b#0" in decision.reason


def test_an_extra_idle_worker_changes_nothing() -> None:
    alive = {
        "w1": beat("w1", 3, "a#0", "b#0"),
        "w2": beat("w2", 3, "a#1", "b#1"),
        "w3": beat("w3", 0),
    }
    assert decide_adoption(3, PLAN, alive) == Adopt(3, PLAN)

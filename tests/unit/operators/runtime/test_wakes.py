"""Wake-ups come out in due order, ties in arrival order, and only once due."""

from __future__ import annotations

from hypothesis import given, strategies as st

from sluicegate.operators.runtime.wakes import WakeQueue, WakeUp


def wake(key: str, due: float) -> WakeUp:
    return WakeUp("tasks", 0, key.encode(), due)


def test_only_due_wake_ups_are_popped() -> None:
    queue = WakeQueue()
    queue.push(wake("late", 5.0))
    queue.push(wake("early", 1.0))
    assert queue.pop_due(0.5) == []
    assert [w.key for w in queue.pop_due(1.0)] == [b"early"]
    assert len(queue) == 1
    assert [w.key for w in queue.pop_due(10.0)] == [b"late"]
    assert len(queue) == 0


@given(st.lists(st.integers(min_value=0, max_value=5), max_size=50))
def test_due_order_with_ties_in_arrival_order(dues: list[int]) -> None:
    queue = WakeQueue()
    for i, due in enumerate(dues):
        queue.push(wake(str(i), float(due)))
    popped = queue.pop_due(5.0)
    expected = sorted(range(len(dues)), key=lambda i: (dues[i], i))
    assert [int(w.key) for w in popped] == expected

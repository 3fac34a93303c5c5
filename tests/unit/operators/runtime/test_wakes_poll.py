"""`poll_timeout_ms`: a subtask's fetch waits no longer than its next wake-up, and only briefly
while calls are in flight, so an agent's next step is not held back by an idle fetch."""

from __future__ import annotations

from sluicegate.operators.runtime.wakes import BUSY_POLL_MS, WakeQueue, WakeUp, poll_timeout_ms


def test_idle_waits_the_whole_fetch_timeout() -> None:
    assert poll_timeout_ms(50, busy=False, next_wake=None, now=10.0) == 50


def test_calls_in_flight_shorten_the_wait() -> None:
    assert poll_timeout_ms(50, busy=True, next_wake=None, now=10.0) == BUSY_POLL_MS
    assert poll_timeout_ms(1, busy=True, next_wake=None, now=10.0) == 1


def test_a_wake_up_due_soon_or_overdue_shortens_the_wait() -> None:
    assert poll_timeout_ms(50, busy=False, next_wake=10.0125, now=10.0) == 13
    assert poll_timeout_ms(50, busy=False, next_wake=9.0, now=10.0) == 0
    assert poll_timeout_ms(50, busy=False, next_wake=11.0, now=10.0) == 50


def test_the_queue_tells_its_earliest_due_time() -> None:
    queue = WakeQueue()
    assert queue.next_due() is None
    queue.push(WakeUp("t", 0, b"late", 5.0))
    queue.push(WakeUp("t", 0, b"early", 2.0))
    assert queue.next_due() == 2.0
    assert [w.key for w in queue.pop_due(3.0)] == [b"early"]
    assert queue.next_due() == 5.0

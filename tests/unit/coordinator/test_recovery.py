"""`Recovery`: when the next attempt starts, after failures, rebalances and stops."""

from __future__ import annotations

from sluicegate.coordinator.recovery import RecoverAt, Recovery
from sluicegate.coordinator.restart import GiveUp, RestartPolicy


def recovery(
    *, stable_seconds: float = 120.0, max_restarts: int | None = None, window: float | None = None
) -> Recovery:
    policy = RestartPolicy(
        initial_delay_seconds=1.0,
        max_delay_seconds=8.0,
        stable_seconds=stable_seconds,
        max_restarts=max_restarts,
        window_seconds=window,
    )
    return Recovery(policy)


def pending(r: Recovery) -> bool:
    return r.pending  # read afresh each time (no narrowing across calls)


def test_a_failure_recovers_after_the_policys_delay_once() -> None:
    r = recovery()
    assert not pending(r)
    assert r.on_failure(10.0) == RecoverAt(11.0)
    assert pending(r)
    assert not r.due(10.5)
    assert r.due(11.0)
    assert not pending(r)
    assert not r.due(12.0)  # once


def test_a_failure_while_a_recovery_is_due_adds_nothing() -> None:
    r = recovery()
    assert r.on_failure(10.0) == RecoverAt(11.0)
    assert r.on_failure(10.5) is None
    assert r.due(11.0)
    assert r.on_failure(12.0) == RecoverAt(14.0)  # the next failure waits longer


def test_a_stable_run_resets_the_delay() -> None:
    r = recovery(stable_seconds=5.0)
    r.on_failure(0.0)
    assert r.due(1.0)
    r.on_running(1.0)
    assert r.on_failure(100.0) == RecoverAt(101.0)


def test_a_rebalance_recovers_at_once_and_a_stop_cancels() -> None:
    r = recovery()
    r.rebalance(20.0)
    assert r.due(20.0)
    r.on_failure(30.0)
    r.cancel()
    assert not pending(r)
    assert not r.due(100.0)


def test_too_many_failures_give_up() -> None:
    r = recovery(max_restarts=1, window=60.0)
    assert isinstance(r.on_failure(0.0), RecoverAt)
    assert r.due(1.0)
    assert isinstance(r.on_failure(2.0), GiveUp)
    assert not pending(r)

"""LivenessTracker: heartbeats, timeouts, forgetting, out-of-order heartbeats."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, strategies as st

from sluicegate.coordinator.liveness import LivenessTracker, WorkerLiveness
from sluicegate.operators.exceptions import ConfigError


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Stands in for the control plane's heartbeat: the tracker is generic over its payload."""

    worker_id: str
    attempt: int


def beat(worker_id: str, attempt: int = 1) -> Heartbeat:
    return Heartbeat(worker_id, attempt)


def test_a_worker_is_alive_until_its_heartbeat_is_older_than_the_timeout() -> None:
    tracker: LivenessTracker[Heartbeat] = LivenessTracker(timeout_seconds=10)
    assert tracker.on_heartbeat("w1", 0, beat("w1"))
    assert tracker.on_heartbeat("w2", 5, beat("w2"))
    assert tracker.alive(10) == ["w1", "w2"]  # exactly the timeout still counts
    assert tracker.dead(10) == []
    assert tracker.dead(10.5) == ["w1"]
    assert tracker.alive(10.5) == ["w2"]
    assert tracker.alive_infos(10.5) == {"w2": beat("w2")}
    assert tracker.dead(16) == ["w1", "w2"]
    assert tracker.alive_infos(16) == {}


def test_a_heartbeat_revives_a_dead_worker_and_says_so() -> None:
    tracker: LivenessTracker[Heartbeat] = LivenessTracker(timeout_seconds=10)
    tracker.on_heartbeat("w1", 0, beat("w1"))
    assert not tracker.on_heartbeat("w1", 5, beat("w1"))
    assert tracker.dead(20) == ["w1"]
    assert tracker.on_heartbeat("w1", 20, beat("w1", attempt=2))
    assert tracker.dead(20) == []
    entry = tracker.get("w1")
    assert entry == WorkerLiveness("w1", 20, beat("w1", attempt=2))


def test_an_out_of_order_heartbeat_is_ignored() -> None:
    tracker: LivenessTracker[str] = LivenessTracker(timeout_seconds=10)
    tracker.on_heartbeat("w1", 8, "new")
    assert not tracker.on_heartbeat("w1", 3, "old")
    entry = tracker.get("w1")
    assert entry is not None
    assert (entry.last_seen, entry.info) == (8, "new")


def test_forgotten_workers_are_neither_dead_nor_alive() -> None:
    tracker: LivenessTracker[None] = LivenessTracker(timeout_seconds=1)
    tracker.on_heartbeat("w1", 0, None)
    tracker.on_heartbeat("w2", 0, None)
    tracker.forget("w1")
    tracker.forget("unknown")
    assert "w1" not in tracker
    assert len(tracker) == 1
    assert tracker.dead(5) == ["w2"]
    assert tracker.get("w1") is None


def test_next_deadline_is_the_oldest_heartbeat_plus_the_timeout() -> None:
    tracker: LivenessTracker[None] = LivenessTracker(timeout_seconds=10)
    assert tracker.next_deadline() is None
    tracker.on_heartbeat("w1", 3, None)
    tracker.on_heartbeat("w2", 1, None)
    assert tracker.next_deadline() == 11
    assert tracker.timeout_seconds == 10


@pytest.mark.parametrize("timeout", [0, -1])
def test_timeout_must_be_positive(timeout: float) -> None:
    with pytest.raises(ConfigError):
        LivenessTracker[None](timeout_seconds=timeout)


@given(
    st.lists(
        st.tuples(st.sampled_from(["w1", "w2", "w3"]), st.floats(0, 100)),
        max_size=30,
    ),
    st.floats(0, 200),
)
def test_dead_and_alive_partition_the_known_workers(
    heartbeats: list[tuple[str, float]], now: float
) -> None:
    tracker: LivenessTracker[None] = LivenessTracker(timeout_seconds=7)
    last: dict[str, float] = {}
    for worker, at in heartbeats:
        tracker.on_heartbeat(worker, at, None)
        last[worker] = max(last.get(worker, at), at)
    dead, alive = tracker.dead(now), tracker.alive(now)
    assert sorted(dead + alive) == sorted(last)
    assert set(dead) == {w for w, at in last.items() if now - at > 7}

"""CoordinatorStatus: what the API shows of a coordinator that is not running (no Kafka)."""

from __future__ import annotations

import time
import uuid

from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.status import CoordinatorStatus
from sluicegate.operators.protocol.messages import Heartbeat
from sluicegate.operators.storage import open_storage
from sluicegate.testing import word_count


def coordinator() -> Coordinator:
    return Coordinator(
        word_count(uuid.uuid4().hex[:8]),
        bootstrap="127.0.0.1:1",  # never contacted: the coordinator does not run
        storage=open_storage("memory://"),
    )


def test_counts_are_summed_per_operator_over_live_workers_of_the_current_attempt() -> None:
    c = coordinator()
    c.attempt = 3
    now = time.monotonic()
    runs = {"desk#0": {"runs": {"running": 2, "done": 5}}, "desk#1": {"runs": {"running": 1}}}
    c.liveness.on_heartbeat("w1", now, Heartbeat("w1", "i", 2, 3, ("desk#0", "desk#1"), runs))
    other = {"desk#2": {"runs": {"done": 4, "failed": 1}}, "count#0": {"rows": {"keys": 7}}}
    c.liveness.on_heartbeat("w2", now, Heartbeat("w2", "j", 2, 3, ("desk#2", "count#0"), other))
    stale = {"desk#0": {"runs": {"running": 100}}}  # a zombie of attempt 2: not counted
    c.liveness.on_heartbeat("w3", now, Heartbeat("w3", "k", 2, 2, ("desk#0",), stale))

    counts = CoordinatorStatus(c).status().counts

    assert counts == {
        "desk": {"runs": {"running": 3, "done": 9, "failed": 1}},
        "count": {"rows": {"keys": 7}},
    }


def test_no_heartbeat_with_counts_gives_no_counts() -> None:
    c = coordinator()
    c.liveness.on_heartbeat("w1", time.monotonic(), Heartbeat("w1", "i", 2, 0, ()))
    assert CoordinatorStatus(c).status().counts == {}

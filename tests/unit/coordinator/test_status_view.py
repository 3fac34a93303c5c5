"""CoordinatorStatus: what the API shows of a coordinator that is not running (no Kafka)."""

from __future__ import annotations

from sluicegate.coordinator.numbering import take_attempt
from sluicegate.coordinator.status import CoordinatorStatus
from sluicegate.operators.protocol.messages import Heartbeat
from tests.unit.coordinator.driving import Driving


async def attempt_3() -> Driving:
    """A coordinator at attempt 3: attempts 1 and 2 were taken before it started."""
    d = Driving()
    for _ in range(2):
        await take_attempt(d.storage)
    await d.start()
    assert d.facts().attempt == 3
    return d


async def test_counts_are_summed_per_operator_over_live_workers_of_the_current_attempt() -> None:
    d = await attempt_3()
    runs = {"desk#0": {"runs": {"running": 2, "done": 5}}, "desk#1": {"runs": {"running": 1}}}
    other = {"desk#2": {"runs": {"done": 4, "failed": 1}}, "count#0": {"rows": {"keys": 7}}}
    stale = {"desk#0": {"runs": {"running": 100}}}  # a zombie of attempt 2: not counted
    await d.step(
        Heartbeat("w1", "i", 2, 3, ("desk#0", "desk#1"), runs),
        Heartbeat("w2", "j", 2, 3, ("desk#2", "count#0"), other),
        Heartbeat("w3", "k", 2, 2, ("desk#0",), stale),
    )

    counts = CoordinatorStatus(d.coordinator).status().counts

    assert counts == {
        "desk": {"runs": {"running": 3, "done": 9, "failed": 1}},
        "count": {"rows": {"keys": 7}},
    }


async def test_no_heartbeat_with_counts_gives_no_counts() -> None:
    d = Driving()
    await d.start()
    await d.step(Heartbeat("w1", "i", 2, 0, ()))
    assert CoordinatorStatus(d.coordinator).status().counts == {}

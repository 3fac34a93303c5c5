"""A worker that joins a running job gets subtasks: right after the next checkpoint completes
the coordinator reassigns through a recovery from it (no restart delay), balanced over the
live workers, once every live worker has retired its subtasks of the older attempt (a subtask
moved from w1 to w2 must not start on w2 while w1 still runs a call of it). Without a broker:
the coordinator's control link is a fake that keeps what it broadcasts."""

from __future__ import annotations

import time

from sluicegate.coordinator.job_state import JobState
from sluicegate.operators.protocol.messages import Retire, Retired
from tests.unit.coordinator.driving import Driving


async def test_a_joining_worker_gets_subtasks_after_the_next_checkpoint() -> None:
    d = Driving()
    now = time.monotonic()
    await d.start(now)
    await d.join("w1", now=now)
    await d.retire_all(now)
    first = d.facts(now).assign  # w1 alone has the slots for every subtask: it gets all four
    assert first is not None
    assert {w: len(s) for w, s in first.assignment.items()} == {"w1": 4}
    first_attempt = first.attempt

    await d.join("w2")
    n = await d.complete_a_checkpoint()
    # Recovering at once, from the checkpoint that just completed.
    assert d.facts().state is JobState.RECOVERING
    await d.step()
    # Phase one: Retire sent, and nothing assigned while w1 may still run a call of a subtask
    # that moves to w2.
    assert [m for m in d.sent.decoded() if isinstance(m, Retire)][-1] == Retire(first_attempt + 1)
    await d.step(Retired("w2", first_attempt + 1))
    assert d.facts().assign is None
    assert d.sent.assigns()[-1].attempt == first_attempt
    await d.step(Retired("w1", first_attempt))  # stale: an answer to an older Retire
    assert d.facts().assign is None
    await d.step(Retired("w1", first_attempt + 1))

    assign = d.sent.assigns()[-1]
    assert assign == d.facts().assign
    assert assign.attempt == first_attempt + 1
    assert assign.restore_from == n
    assert {w: len(s) for w, s in assign.assignment.items()} == {"w1": 2, "w2": 2}
    assert d.facts().restore_fallbacks == 0

    await d.complete_a_checkpoint()  # balanced now: no further reassignment
    assert d.facts().assign is not None
    assert d.facts().attempt == first_attempt + 1


async def test_a_worker_that_never_retires_is_left_out_after_the_wait() -> None:
    d = Driving()
    now = time.monotonic()
    await d.start(now)
    await d.join("w1", now=now)
    await d.join("w2", now=now)
    await d.step(Retired("w1", d.facts().attempt), now=now)
    assert d.facts(now).assign is None  # w2 has not answered, and may still run an older subtask

    later = now + d.settings.retire_wait_seconds
    await d.join("w1", now=later)
    await d.join("w2", now=later)
    assign = d.facts(later).assign
    assert assign is not None
    assert {w: len(s) for w, s in assign.assignment.items()} == {"w1": 4}

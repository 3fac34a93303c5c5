"""A worker that joins a running job gets subtasks: right after the next checkpoint completes
the coordinator reassigns through a recovery from it (no restart delay), balanced over the
live workers, once every live worker has retired its subtasks of the older attempt (a subtask
moved from w1 to w2 must not start on w2 while w1 still runs a call of it). Without a broker:
the coordinator's Kafka producer is a fake that keeps what it broadcasts."""

from __future__ import annotations

import time
import uuid

from sluicegate.coordinator.job_state import JobState
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.protocol.messages import Assign, CheckpointAck, Heartbeat, Retire, Retired
from sluicegate.operators.protocol.wire import decode_message
from sluicegate.operators.storage import open_storage
from sluicegate.testing import word_count
from tests.helpers import fake_state_handle
from tests.unit.coordinator.test_restore_fallback import Sent, all_retired

AT_ONCE = CoordinatorSettings(settle_seconds=0)
"""Placement as soon as the workers have the slots: these tests join workers by hand."""


def join(c: Coordinator, worker: str, now: float) -> None:
    beat = Heartbeat(worker, f"{worker}-1", slots=4, attempt=0, subtasks=())
    c.liveness.on_heartbeat(worker, now, beat)


async def complete_a_checkpoint(c: Coordinator) -> int:
    assert c.tracker is not None
    assert c.assign is not None
    inject = c.tracker.trigger(time.monotonic(), forced=True)
    assert inject is not None
    n = inject.checkpoint_id
    for subtask in (s for subs in c.assign.assignment.values() for s in subs):
        handle = fake_state_handle(f"shared/{subtask}-{n}", n)
        await c._on_message(CheckpointAck(subtask, n, c.attempt, {}, handle))
    return n


def assigned(c: Coordinator) -> Assign | None:
    """The current assignment (a call, so that the type checker does not narrow it)."""
    return c.assign


def assigns(sent: Sent) -> list[Assign]:
    return [m for m in map(decode_message, sent.messages) if isinstance(m, Assign)]


async def test_a_joining_worker_gets_subtasks_after_the_next_checkpoint() -> None:
    c = Coordinator(
        word_count(uuid.uuid4().hex[:8]),
        bootstrap="127.0.0.1:1",
        storage=open_storage("memory://"),
        settings=AT_ONCE,
    )
    sent = Sent()
    c._link = sent
    now = time.monotonic()
    join(c, "w1", now)
    await c._new_attempt()
    await all_retired(c)
    await c._tick(now)  # w1 alone has the slots for every subtask: it gets all four
    assert c.assign is not None
    assert {w: len(s) for w, s in c.assign.assignment.items()} == {"w1": 4}
    first_attempt = c.attempt

    join(c, "w2", time.monotonic())
    n = await complete_a_checkpoint(c)
    # Recovering at once, from the checkpoint that just completed.
    assert c.job.state is JobState.RECOVERING
    await c._tick(time.monotonic())
    # Phase one: Retire sent, and nothing assigned while w1 may still run a call of a subtask
    # that moves to w2.
    assert [m for m in map(decode_message, sent.messages) if isinstance(m, Retire)][-1] == Retire(
        first_attempt + 1
    )
    await c._on_message(Retired("w2", first_attempt + 1))
    await c._tick(time.monotonic())
    assert assigned(c) is None
    assert assigns(sent)[-1].attempt == first_attempt
    await c._on_message(Retired("w1", first_attempt))  # stale: an answer to an older Retire
    await c._tick(time.monotonic())
    assert assigned(c) is None
    await c._on_message(Retired("w1", first_attempt + 1))
    await c._tick(time.monotonic())

    assign = assigns(sent)[-1]
    assert assign == c.assign
    assert assign.attempt == first_attempt + 1
    assert assign.restore_from == n
    assert {w: len(s) for w, s in assign.assignment.items()} == {"w1": 2, "w2": 2}
    assert c.restore_fallbacks == 0

    await complete_a_checkpoint(c)  # balanced now: no further reassignment
    assert c.assign is not None
    assert c.attempt == first_attempt + 1


async def test_a_worker_that_never_retires_is_left_out_after_the_wait() -> None:
    c = Coordinator(
        word_count(uuid.uuid4().hex[:8]),
        bootstrap="127.0.0.1:1",
        storage=open_storage("memory://"),
        settings=AT_ONCE,
    )
    c._link = Sent()
    now = time.monotonic()
    join(c, "w1", now)
    join(c, "w2", now)
    await c._new_attempt()
    await c._on_message(Retired("w1", c.attempt))
    await c._tick(now)
    assert assigned(c) is None  # w2 has not answered, and may still run an older subtask

    assert c.placement.retiring is not None
    later = c.placement.retiring.deadline
    join(c, "w1", later)
    join(c, "w2", later)
    await c._tick(later)
    assert c.assign is not None
    assert {w: len(s) for w, s in c.assign.assignment.items()} == {"w1": 4}

"""What placing an attempt waits for, said in the log and the status. A new attempt whose
live workers offer fewer slots than the pipeline has subtasks waits for more, and says so:
once for each change of the slots on offer, not on every tick, and not once it is placed.
Without a broker (the control link is a fake that keeps what it sends)."""

from __future__ import annotations

import logging
import time
import uuid

import pytest

from sluicegate.cli.commands import render_status
from sluicegate.coordinator.assignment import save_assignment
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.coordinator.status import CoordinatorStatus
from sluicegate.operators.protocol.messages import Heartbeat, Retired
from sluicegate.operators.storage import open_storage
from sluicegate.testing import word_count
from tests.unit.coordinator.test_rebalance import assigned
from tests.unit.coordinator.test_restore_fallback import Sent


async def join(c: Coordinator, worker: str, slots: int) -> None:
    """``worker`` sends its first heartbeat and retires the attempt being placed."""
    beat = Heartbeat(worker, f"{worker}-1", slots=slots, attempt=0, subtasks=())
    await c._on_message(beat)
    await c._on_message(Retired(worker, c.attempt))


def placing() -> Coordinator:
    """A coordinator of a new word count on memory storage, placing as soon as it can."""
    c = Coordinator(
        word_count(uuid.uuid4().hex[:8]),
        bootstrap="127.0.0.1:1",
        storage=open_storage("memory://"),
        settings=CoordinatorSettings(settle_seconds=0),
    )
    c._link = Sent()
    return c


def waits(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "waits for slots" in r.getMessage()]


async def test_too_few_slots_are_logged_once_per_change_until_placed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="sluicegate.coordinator")
    graph = word_count(uuid.uuid4().hex[:8])
    c = Coordinator(
        graph,
        bootstrap="127.0.0.1:1",
        storage=open_storage("memory://"),
        settings=CoordinatorSettings(settle_seconds=0),
    )
    c._link = Sent()
    await c._new_attempt()
    needed = len(list(graph.subtasks()))
    assert needed == 4

    await join(c, "w1", slots=1)
    for _ in range(3):
        await c._tick(time.monotonic())
    assert assigned(c) is None
    assert waits(caplog) == [
        f"pipeline {graph.name}: attempt {c.attempt} waits for slots: 4 subtasks, the live "
        "workers offer 1 (w1: 1); start more workers or give them more --slots"
    ]

    await join(c, "w2", slots=2)
    for _ in range(3):
        await c._tick(time.monotonic())
    assert assigned(c) is None
    assert len(waits(caplog)) == 2
    assert "offer 3 (w1: 1, w2: 2)" in waits(caplog)[-1]

    await join(c, "w3", slots=1)
    await c._tick(time.monotonic())
    assert c.assign is not None
    assert {w: len(s) for w, s in c.assign.assignment.items()} == {"w1": 1, "w2": 2, "w3": 1}
    await c._tick(time.monotonic())
    assert len(waits(caplog)) == 2


async def test_a_new_attempt_logs_its_own_wait(caplog: pytest.LogCaptureFixture) -> None:
    """The same shortage is logged again for the next attempt (it may be a long while
    later: a worker died and the rest cannot host its subtasks)."""
    caplog.set_level(logging.INFO, logger="sluicegate.coordinator")
    c = placing()
    await c._new_attempt()
    await join(c, "w1", slots=2)
    await c._tick(time.monotonic())
    first = c.attempt
    await c._new_attempt()
    await c._on_message(Retired("w1", c.attempt))
    await c._tick(time.monotonic())
    assert [f"attempt {first} waits" in m for m in waits(caplog)] == [True, False]
    assert f"attempt {c.attempt} waits" in waits(caplog)[1]


async def test_status_says_what_the_placement_waits_for() -> None:
    """``GET /status`` and ``sluicegate status`` show the wait; it ends once placed."""
    c = placing()
    view = CoordinatorStatus(c)
    assert view.status().waiting_for is None
    await c._new_attempt()
    await c._tick(time.monotonic())
    assert view.status().waiting_for == "workers"
    await c._on_message(Heartbeat("w1", "w1-1", slots=3, attempt=0, subtasks=()))
    await c._tick(time.monotonic())
    assert view.status().waiting_for == "the live workers to retire their older subtasks"
    await c._on_message(Retired("w1", c.attempt))
    await c._tick(time.monotonic())
    waiting = "slots: 4 subtasks, the live workers offer 3 (w1: 3)"
    assert view.status().waiting_for == waiting
    assert f"waiting for      {waiting}\n" in render_status(view.status(), [], [])

    await join(c, "w2", slots=1)
    await c._tick(time.monotonic())
    assert c.assign is not None
    assert view.status().waiting_for is None
    assert "waiting for" not in render_status(view.status(), [], [])


async def test_status_says_when_it_waits_to_adopt_a_running_attempt() -> None:
    """A restarted coordinator that found a stored plan waits for its workers' heartbeats;
    the plan's worker reporting the attempt ends the wait without a new attempt."""
    storage = open_storage("memory://")
    graph = word_count(uuid.uuid4().hex[:8])
    subtasks = tuple(str(s) for s in graph.subtasks())
    await save_assignment(storage, 4, {"w1": subtasks})
    c = Coordinator(graph, bootstrap="127.0.0.1:1", storage=storage)
    c._link = Sent()
    view = CoordinatorStatus(c)
    await c._start_or_adopt()
    await c._tick(time.monotonic())
    assert view.status().waiting_for == "the heartbeats of attempt 4's workers, to adopt it"
    await c._on_message(Heartbeat("w1", "w1-1", slots=4, attempt=4, subtasks=subtasks))
    await c._tick(time.monotonic())
    assert c.attempt == 4
    assert c.assign is not None
    assert view.status().waiting_for is None

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
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.coordinator.status import CoordinatorStatus
from sluicegate.operators.protocol.messages import Heartbeat, Retired
from sluicegate.operators.storage import open_storage
from sluicegate.testing import word_count
from tests.unit.coordinator.driving import Driving


async def join(d: Driving, worker: str, slots: int) -> None:
    """``worker`` sends its first heartbeat and retires the attempt being placed."""
    beat = Heartbeat(worker, f"{worker}-1", slots=slots, attempt=0, subtasks=())
    await d.step(beat, Retired(worker, d.facts().attempt))


async def placing() -> Driving:
    """A coordinator of a new word count on memory storage, placing as soon as it can."""
    d = Driving(settings=CoordinatorSettings(settle_seconds=0))
    await d.start()
    return d


def waits(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "waits for slots" in r.getMessage()]


async def test_too_few_slots_are_logged_once_per_change_until_placed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="sluicegate.coordinator")
    d = await placing()
    graph = d.graph
    needed = len(list(graph.subtasks()))
    assert needed == 4

    await join(d, "w1", slots=1)
    for _ in range(3):
        await d.step()
    assert d.facts().assign is None
    assert waits(caplog) == [
        f"pipeline {graph.name}: attempt {d.facts().attempt} waits for slots: 4 subtasks, the "
        "live workers offer 1 (w1: 1); start more workers or give them more --slots"
    ]

    await join(d, "w2", slots=2)
    for _ in range(3):
        await d.step()
    assert d.facts().assign is None
    assert len(waits(caplog)) == 2
    assert "offer 3 (w1: 1, w2: 2)" in waits(caplog)[-1]

    await join(d, "w3", slots=1)
    assign = d.facts().assign
    assert assign is not None
    assert {w: len(s) for w, s in assign.assignment.items()} == {"w1": 1, "w2": 2, "w3": 1}
    await d.step()
    assert len(waits(caplog)) == 2


async def test_a_new_attempt_logs_its_own_wait(caplog: pytest.LogCaptureFixture) -> None:
    """The same shortage is logged again for the next attempt (it may be a long while
    later: a worker died and the rest cannot host its subtasks)."""
    caplog.set_level(logging.INFO, logger="sluicegate.coordinator")
    d = Driving(settings=CoordinatorSettings(settle_seconds=0, restart_delay_seconds=0))
    now = time.monotonic()
    await d.start(now)
    await d.step(Heartbeat("w1", "w1-1", 2, 0, ()), Retired("w1", 1), now=now)
    first = d.facts().attempt
    await d.step(Heartbeat("w2", "w2-1", 2, 0, ()), Retired("w2", first), now=now)
    assert d.facts().assign is not None  # placed over w1 and w2
    # w2 dies: the next attempt has w1's 2 slots alone, for 4 subtasks.
    later = now + d.settings.heartbeat_timeout_seconds + 1
    await d.step(Heartbeat("w1", "w1-1", 2, first, ()), now=later)
    await d.step(Retired("w1", first + 1), now=later)
    assert d.facts().attempt == first + 1
    assert [f"attempt {first} waits" in m for m in waits(caplog)] == [True, False]
    assert f"attempt {d.facts().attempt} waits" in waits(caplog)[1]


async def test_status_says_what_the_placement_waits_for() -> None:
    """``GET /status`` and ``sluicegate status`` show the wait; it ends once placed."""
    d = Driving(settings=CoordinatorSettings(settle_seconds=0))
    view = CoordinatorStatus(d.coordinator)
    assert view.status().waiting_for is None
    await d.start()
    await d.step()
    assert view.status().waiting_for == "workers"
    await d.step(Heartbeat("w1", "w1-1", slots=3, attempt=0, subtasks=()))
    assert view.status().waiting_for == "the live workers to retire their older subtasks"
    await d.step(Retired("w1", d.facts().attempt))
    waiting = "slots: 4 subtasks, the live workers offer 3 (w1: 3)"
    assert view.status().waiting_for == waiting
    assert f"waiting for      {waiting}\n" in render_status(view.status(), [], [])

    await join(d, "w2", slots=1)
    assert d.facts().assign is not None
    assert view.status().waiting_for is None
    assert "waiting for" not in render_status(view.status(), [], [])


async def test_status_says_when_it_waits_to_adopt_a_running_attempt() -> None:
    """A restarted coordinator that found a stored plan waits for its workers' heartbeats;
    the plan's worker reporting the attempt ends the wait without a new attempt."""
    storage = open_storage("memory://")
    graph = word_count(uuid.uuid4().hex[:8])
    subtasks = tuple(str(s) for s in graph.subtasks())
    await save_assignment(storage, 4, {"w1": subtasks})
    d = Driving(graph, storage=storage, settings=CoordinatorSettings())
    view = CoordinatorStatus(d.coordinator)
    await d.start()
    await d.step()
    assert view.status().waiting_for == "the heartbeats of attempt 4's workers, to adopt it"
    await d.step(Heartbeat("w1", "w1-1", slots=4, attempt=4, subtasks=subtasks))
    assert d.facts().attempt == 4
    assert d.facts().assign is not None
    assert view.status().waiting_for is None

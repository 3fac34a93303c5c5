"""`Coordinator.facts`: one frozen copy of what the coordinator knows, for its readers."""

from __future__ import annotations

import dataclasses
import time
import uuid

import pytest

from sluicegate.coordinator.facts import CoordinatorFacts
from sluicegate.coordinator.job_state import JobState
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.protocol.messages import Heartbeat, SubtaskFailed
from sluicegate.operators.storage import open_storage
from sluicegate.testing import word_count
from tests.unit.coordinator.driving import AT_ONCE, Driving


def new_coordinator(settings: CoordinatorSettings) -> Coordinator:
    return Coordinator(
        word_count(uuid.uuid4().hex[:8]),
        bootstrap="127.0.0.1:1",  # never contacted: the coordinator does not run
        storage=open_storage("memory://"),
        settings=settings,
    )


@pytest.fixture
def coordinator() -> Coordinator:
    return new_coordinator(CoordinatorSettings(interval_seconds=2.5, heartbeat_timeout_seconds=5))


def test_a_fresh_coordinator_knows_nothing_yet(coordinator: Coordinator) -> None:
    facts = coordinator.facts()
    assert facts.pipeline == coordinator.graph.name
    assert (facts.state, facts.attempt, facts.restarts) == (JobState.CREATED, 0, 0)
    assert facts.assign is None
    assert facts.stop is None
    assert not facts.fenced
    assert facts.workers == ()
    assert facts.checkpoints.completed == 0
    assert facts.checkpoints.in_flight is None
    assert facts.checkpoints.interval_seconds == 2.5
    assert facts.savepoint_outcomes == {"completed": 0, "failed": 0}


async def test_the_facts_are_a_copy_that_later_changes_leave_alone() -> None:
    d = Driving(settings=AT_ONCE.model_copy(update={"interval_seconds": 2.5}))
    await d.start()
    await d.join("w1")
    await d.retire_all()
    first = await d.complete_a_checkpoint()
    before = d.facts()

    await d.complete_a_checkpoint()
    await d.join("w2")
    await d.recover()
    await d.recover()

    assert before.checkpoints.completed == 1
    assert before.checkpoints.last_completed_id == first
    assert before.checkpoints.duration.count == 1
    assert [w.worker_id for w in before.workers] == ["w1"]
    assert before.attempt == 1
    after = d.facts()
    assert (after.checkpoints.completed, after.checkpoints.duration.count) == (2, 2)
    assert [w.worker_id for w in after.alive()] == ["w1", "w2"]
    assert after.restarts == 2


async def test_a_worker_past_its_heartbeat_timeout_is_known_but_not_alive() -> None:
    d = Driving(settings=CoordinatorSettings(heartbeat_timeout_seconds=5))
    await d.start(now=100.0)
    await d.step(Heartbeat("w1", "i", 2, 0, ()), now=100.0)
    facts = d.facts(now=106.0)
    assert [(w.worker_id, w.alive, w.last_seen) for w in facts.workers] == [("w1", False, 100.0)]
    assert facts.alive() == ()


def test_facts_cannot_be_changed(coordinator: Coordinator) -> None:
    facts: CoordinatorFacts = coordinator.facts()
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.attempt = 5  # type: ignore[misc]


async def test_a_recovery_waiting_on_its_restart_delay_says_so_and_until_when() -> None:
    d = Driving(settings=AT_ONCE.model_copy(update={"restart_delay_seconds": 4.0}))
    await d.start()
    await d.join("w1")
    await d.retire_all()
    now = time.monotonic()
    await d.step(SubtaskFailed("counter#0", d.facts().attempt, "boom"), now=now)
    waiting = d.facts(now).waiting_for
    assert waiting is not None
    assert waiting.startswith("the restart delay: the next attempt starts in 4.0 s, at ")
    assert waiting.endswith(" UTC")
    assert d.facts(now + 4.0).waiting_for is None  # due: no longer waiting


def test_restart_settings_out_of_range_are_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match="multiplier"):
        CoordinatorSettings(restart_delay_multiplier=0.5).restart_policy()

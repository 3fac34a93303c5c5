"""JobStateMachine: the transitions table, illegal events, and random event sequences."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from sluicegate.coordinator.exceptions import IllegalTransitionError
from sluicegate.coordinator.job_state import (
    TRANSITIONS,
    JobEvent,
    JobState,
    JobStateMachine,
)
from sluicegate.operators.exceptions import FatalError

TERMINAL = {JobState.STOPPED, JobState.FAILED}


def test_a_job_runs_checkpoints_recovers_and_stops() -> None:
    job = JobStateMachine()
    assert job.state is JobState.CREATED
    steps = [
        (JobEvent.WORKERS_READY, JobState.RUNNING),
        (JobEvent.CHECKPOINT_TRIGGERED, JobState.CHECKPOINTING),
        (JobEvent.CHECKPOINT_ENDED, JobState.RUNNING),
        (JobEvent.CHECKPOINT_TRIGGERED, JobState.CHECKPOINTING),
        (JobEvent.FAILURE_DETECTED, JobState.RECOVERING),
        (JobEvent.FAILURE_DETECTED, JobState.RECOVERING),
        (JobEvent.RECOVERED, JobState.RUNNING),
        (JobEvent.STOP_REQUESTED, JobState.STOPPING),
        (JobEvent.STOPPED, JobState.STOPPED),
    ]
    for event, expected in steps:
        assert job.apply(event) is expected
        assert job.state is expected
    assert job.is_terminal
    assert job.allowed_events() == frozenset()


def test_exhausted_restarts_fail_the_job() -> None:
    job = JobStateMachine(JobState.RUNNING)
    job.apply(JobEvent.FAILURE_DETECTED)
    assert job.apply(JobEvent.RESTARTS_EXHAUSTED) is JobState.FAILED
    assert job.is_terminal


def test_an_illegal_event_raises_with_fields_and_keeps_the_state() -> None:
    job = JobStateMachine()
    with pytest.raises(IllegalTransitionError) as caught:
        job.apply(JobEvent.CHECKPOINT_TRIGGERED)
    assert isinstance(caught.value, FatalError)
    assert caught.value.state is JobState.CREATED
    assert caught.value.event is JobEvent.CHECKPOINT_TRIGGERED
    assert "workers_ready" in str(caught.value)
    assert job.state is JobState.CREATED


def test_checkpoint_ended_is_illegal_once_recovery_aborted_the_checkpoint() -> None:
    job = JobStateMachine(JobState.CHECKPOINTING)
    job.apply(JobEvent.FAILURE_DETECTED)
    assert not job.can_apply(JobEvent.CHECKPOINT_ENDED)
    with pytest.raises(IllegalTransitionError):
        job.apply(JobEvent.CHECKPOINT_ENDED)


def test_a_checkpoint_may_end_while_stopping() -> None:
    job = JobStateMachine(JobState.CHECKPOINTING)
    job.apply(JobEvent.STOP_REQUESTED)
    assert job.apply(JobEvent.CHECKPOINT_ENDED) is JobState.STOPPING


@pytest.mark.parametrize("state", sorted(TERMINAL))
@pytest.mark.parametrize("event", list(JobEvent))
def test_terminal_states_accept_nothing(state: JobState, event: JobEvent) -> None:
    job = JobStateMachine(state)
    with pytest.raises(IllegalTransitionError, match="terminal"):
        job.apply(event)


def test_the_table_covers_every_state_and_only_known_names() -> None:
    assert set(TRANSITIONS) == set(JobState)
    for state, row in TRANSITIONS.items():
        assert set(row) <= set(JobEvent)
        assert set(row.values()) <= set(JobState)
        if state not in TERMINAL:
            assert row[JobEvent.FATAL] is JobState.FAILED


def test_every_non_terminal_state_can_reach_a_terminal_state() -> None:
    reachable_terminal = set(TERMINAL)
    changed = True
    while changed:
        changed = False
        for state, row in TRANSITIONS.items():
            if state not in reachable_terminal and set(row.values()) & reachable_terminal:
                reachable_terminal.add(state)
                changed = True
    assert reachable_terminal == set(JobState)


def test_every_state_is_reachable_from_created() -> None:
    seen = {JobState.CREATED}
    frontier = [JobState.CREATED]
    while frontier:
        for target in TRANSITIONS[frontier.pop()].values():
            if target not in seen:
                seen.add(target)
                frontier.append(target)
    assert seen == set(JobState)


@given(st.lists(st.sampled_from(list(JobEvent)), max_size=60))
def test_random_events_follow_the_table_exactly(events: list[JobEvent]) -> None:
    job = JobStateMachine()
    for event in events:
        before = job.state
        expected = TRANSITIONS[before].get(event)
        if expected is None:
            with pytest.raises(IllegalTransitionError):
                job.apply(event)
            assert job.state is before
        else:
            assert job.apply(event) is expected
        assert job.state in TRANSITIONS
        assert job.can_apply(event) == (event in job.allowed_events())
        if job.is_terminal:
            assert job.state in TERMINAL

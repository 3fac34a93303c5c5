"""The job's lifecycle as an explicit state machine, sans-IO.

The coordinator's task feeds :class:`JobStateMachine` the events it observes and acts on the
state it returns; a transition outside :data:`TRANSITIONS` is a bug in the caller and raises
:class:`IllegalTransitionError` (fatal). The table, as data in :data:`TRANSITIONS`::

    state          event                 -> state
    -------------  --------------------  -------------
    created        workers_ready         -> running
    created        failure_detected      -> recovering     a worker failed while starting
    created        stop_requested        -> stopping       zombies of an older attempt may run
    created        fatal                 -> failed
    running        checkpoint_triggered  -> checkpointing
    running        failure_detected      -> recovering
    running        stop_requested        -> stopping
    running        fatal                 -> failed
    checkpointing  checkpoint_ended      -> running        completed or aborted
    checkpointing  failure_detected      -> recovering     the checkpoint in flight is aborted
    checkpointing  stop_requested        -> stopping       the checkpoint may still end
    checkpointing  fatal                 -> failed
    recovering     recovered             -> running        every subtask of the new attempt is up
    recovering     failure_detected      -> recovering     a failure during recovery: again
    recovering     restarts_exhausted    -> failed         the restart policy gave up
    recovering     stop_requested        -> stopping
    recovering     fatal                 -> failed
    stopping       checkpoint_ended      -> stopping       a checkpoint in flight at the stop ended
    stopping       failure_detected      -> stopping       failing while stopping changes nothing
    stopping       stopped               -> stopped
    stopping       fatal                 -> failed
    stopped        (none: terminal)
    failed         (none: terminal)

Rules the table encodes:

* At most one checkpoint is in flight (``checkpointing``), as in `CheckpointTracker`. Leaving
  ``checkpointing`` for ``recovering`` ends that checkpoint (the tracker aborts it on recovery),
  so ``checkpoint_ended`` is not expected afterwards and is illegal in ``recovering``.
* ``fatal`` fails the job from every live state; ``restarts_exhausted`` only from
  ``recovering``, the one state where the restart policy is asked.
* ``stopped`` and ``failed`` are terminal: every event there is illegal.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from sluicegate.coordinator.exceptions import IllegalTransitionError

__all__ = ["TRANSITIONS", "JobEvent", "JobState", "JobStateMachine"]


class JobState(StrEnum):
    """Where the job is in its lifecycle (a label of the job-state metric)."""

    CREATED = "created"
    RUNNING = "running"
    CHECKPOINTING = "checkpointing"
    RECOVERING = "recovering"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


class JobEvent(StrEnum):
    """What the coordinator observed."""

    WORKERS_READY = "workers_ready"
    CHECKPOINT_TRIGGERED = "checkpoint_triggered"
    CHECKPOINT_ENDED = "checkpoint_ended"
    FAILURE_DETECTED = "failure_detected"
    RECOVERED = "recovered"
    STOP_REQUESTED = "stop_requested"
    STOPPED = "stopped"
    RESTARTS_EXHAUSTED = "restarts_exhausted"
    FATAL = "fatal"


_S = JobState
_E = JobEvent

TRANSITIONS: Final[Mapping[JobState, Mapping[JobEvent, JobState]]] = MappingProxyType(
    {
        _S.CREATED: MappingProxyType(
            {
                _E.WORKERS_READY: _S.RUNNING,
                _E.FAILURE_DETECTED: _S.RECOVERING,
                _E.STOP_REQUESTED: _S.STOPPING,
                _E.FATAL: _S.FAILED,
            }
        ),
        _S.RUNNING: MappingProxyType(
            {
                _E.CHECKPOINT_TRIGGERED: _S.CHECKPOINTING,
                _E.FAILURE_DETECTED: _S.RECOVERING,
                _E.STOP_REQUESTED: _S.STOPPING,
                _E.FATAL: _S.FAILED,
            }
        ),
        _S.CHECKPOINTING: MappingProxyType(
            {
                _E.CHECKPOINT_ENDED: _S.RUNNING,
                _E.FAILURE_DETECTED: _S.RECOVERING,
                _E.STOP_REQUESTED: _S.STOPPING,
                _E.FATAL: _S.FAILED,
            }
        ),
        _S.RECOVERING: MappingProxyType(
            {
                _E.RECOVERED: _S.RUNNING,
                _E.FAILURE_DETECTED: _S.RECOVERING,
                _E.RESTARTS_EXHAUSTED: _S.FAILED,
                _E.STOP_REQUESTED: _S.STOPPING,
                _E.FATAL: _S.FAILED,
            }
        ),
        _S.STOPPING: MappingProxyType(
            {
                _E.CHECKPOINT_ENDED: _S.STOPPING,
                _E.FAILURE_DETECTED: _S.STOPPING,
                _E.STOPPED: _S.STOPPED,
                _E.FATAL: _S.FAILED,
            }
        ),
        _S.STOPPED: MappingProxyType({}),
        _S.FAILED: MappingProxyType({}),
    }
)
"""state -> event -> next state; an absent pair is an illegal transition."""


class JobStateMachine:
    """The job's current state, moved only along :data:`TRANSITIONS`."""

    def __init__(self, state: JobState = JobState.CREATED) -> None:
        self._state = state

    @property
    def state(self) -> JobState:
        """The current state."""
        return self._state

    @property
    def is_terminal(self) -> bool:
        """Whether no event can move the job any more (``stopped`` or ``failed``)."""
        return not TRANSITIONS[self._state]

    def allowed_events(self) -> frozenset[JobEvent]:
        """Events :meth:`apply` accepts in the current state."""
        return frozenset(TRANSITIONS[self._state])

    def can_apply(self, event: JobEvent) -> bool:
        """Whether ``event`` is allowed in the current state."""
        return event in TRANSITIONS[self._state]

    def apply(self, event: JobEvent) -> JobState:
        """Move along ``event`` and return the new state.

        Raises:
            IllegalTransitionError: ``event`` is not allowed in the current state; the state
                is left unchanged.
        """
        next_state = TRANSITIONS[self._state].get(event)
        if next_state is None:
            raise IllegalTransitionError(self._state, event, TRANSITIONS[self._state])
        self._state = next_state
        return next_state

"""`CoordinatorFacts`: what a coordinator knows at one moment, as one frozen value.

Its readers (the HTTP API's status, the metrics, `LocalJob`, the tests) take
`Coordinator.facts()` and read that; none reads the coordinator's own mutable parts (its
tracker, liveness table, stop sequence, ...), so those can change shape without them.
Everything here is a copy: a reader may keep a `CoordinatorFacts` as long as it likes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from sluicegate.coordinator.checkpoint_stats import AbortReason, CheckpointStats, HistogramCounts
from sluicegate.coordinator.incidents import Failure, RecentAbort
from sluicegate.coordinator.job_state import JobState
from sluicegate.coordinator.savepoints.requests import SavepointRequest
from sluicegate.operators.protocol.messages import Assign, Heartbeat

__all__ = [
    "CheckpointFacts",
    "CoordinatorFacts",
    "FactsSource",
    "StopFacts",
    "WorkerFacts",
    "checkpoint_facts",
]


@dataclass(frozen=True, slots=True)
class WorkerFacts:
    """A worker the coordinator heard: its last heartbeat, and when (monotonic seconds)."""

    worker_id: str
    alive: bool
    last_seen: float
    heartbeat: Heartbeat


@dataclass(frozen=True, slots=True)
class StopFacts:
    """The graceful stop under way or done: its phase, its final checkpoint, a note."""

    phase: str
    final_checkpoint: int | None
    note: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointFacts:
    """Checkpoints as this coordinator process saw them (what the metrics report)."""

    completed: int
    aborted: Mapping[AbortReason, int]
    duration: HistogramCounts
    phases: Mapping[str, HistogramCounts]
    last_completed_id: int | None
    last_completed_at: float | None
    last_full_bytes: int | None
    last_incremental_bytes: int | None
    in_flight: int | None
    """The checkpoint of the current attempt from trigger to end, if one."""
    in_flight_triggered_at: float | None
    recent_aborts: tuple[RecentAbort, ...]
    interval_seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorFacts:
    """One coordinator at one moment; see the module docstring."""

    pipeline: str
    state: JobState
    attempt: int
    restarts: int
    """Global recoveries since the pipeline first started (attempts are durable)."""
    assign: Assign | None
    """The assignment of the current attempt, once sent (None while recovering)."""
    failure: Failure | None
    restore_fallbacks: int
    fenced_by: int | None
    """The epoch of the newer coordinator that fenced this one, if one did."""
    waiting_for: str | None
    """What the placement waits for before it can assign (slots, retirements), if anything."""
    stop: StopFacts | None
    workers: tuple[WorkerFacts, ...]
    checkpoints: CheckpointFacts
    savepoint_outcomes: Mapping[str, int]
    savepoint_requests: tuple[SavepointRequest, ...]
    """Copies of this process's latest savepoint requests, oldest first."""
    last_savepoint: tuple[float, int] | None
    """Seconds from request to written, and size in bytes, of the latest savepoint."""

    @property
    def fenced(self) -> bool:
        return self.fenced_by is not None

    def alive(self) -> tuple[WorkerFacts, ...]:
        """The workers whose heartbeats arrive in time."""
        return tuple(w for w in self.workers if w.alive)


class FactsSource(Protocol):
    """What reads a coordinator's facts needs of it (`Coordinator` is one)."""

    def facts(self, now: float | None = None) -> CoordinatorFacts: ...


def checkpoint_facts(
    stats: CheckpointStats,
    *,
    in_flight: int | None,
    recent_aborts: tuple[RecentAbort, ...],
    interval_seconds: float,
) -> CheckpointFacts:
    """A copy of ``stats`` and of the checkpoint ``in_flight`` (None: none)."""
    return CheckpointFacts(
        completed=stats.completed,
        aborted=dict(stats.aborted),
        duration=stats.duration.copy(),
        phases={phase: counts.copy() for phase, counts in stats.phases.items()},
        last_completed_id=stats.last_completed_id,
        last_completed_at=stats.last_completed_at,
        last_full_bytes=stats.last_full_bytes,
        last_incremental_bytes=stats.last_incremental_bytes,
        in_flight=in_flight,
        in_flight_triggered_at=None if in_flight is None else stats.triggered_at(in_flight),
        recent_aborts=recent_aborts,
        interval_seconds=interval_seconds,
    )

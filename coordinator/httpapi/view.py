"""What the HTTP API shows of a running coordinator: the `CoordinatorView` contract.

The coordinator implements `CoordinatorView`; the HTTP layer only reads it, so the API can be
tested against any implementation. Every model here is part of the public API (OpenAPI) and
carries only plain data.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from sluicegate.operators.exceptions import RetryableError

__all__ = [
    "CheckpointInfo",
    "CheckpointRefusedError",
    "CheckpointStatus",
    "CoordinatorView",
    "JobStatus",
    "StopInfo",
    "SubtaskInfo",
    "WorkerInfo",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StopInfo(_Model):
    """How a graceful stop (``POST /stop``) goes."""

    phase: str = Field(
        description="want_checkpoint|checkpointing|send_stop|draining|done "
        "(done: every subtask stopped)"
    )
    final_checkpoint: int | None = Field(
        description="the final checkpoint, once completed (the next start resumes from it)"
    )
    note: str = Field(description="why there is no final checkpoint, when there is none")


class JobStatus(_Model):
    pipeline: str
    state: str = Field(
        description="created|running|checkpointing|recovering|stopping|stopped|failed"
    )
    attempt: int = Field(ge=0)
    last_completed_checkpoint: int | None
    checkpoint_lag_seconds: float | None = Field(
        description="seconds since the last completed checkpoint (None before the first)"
    )
    restarts: int = Field(ge=0)
    waiting_for: str | None = Field(
        default=None,
        description='what placing the next attempt waits for, e.g. "slots: 4 subtasks, the '
        'live workers offer 1 (w1: 1)" (None: the attempt is placed, or recovery waits out '
        "its restart delay)",
    )
    fenced_by: int | None = Field(
        default=None,
        ge=1,
        description="the epoch of a newer coordinator of the pipeline that fenced this one: it "
        "coordinates nothing and the rest of this status is stale (ask the newer one)",
    )
    stop: StopInfo | None = Field(
        default=None, description="the graceful stop, once one was asked for"
    )
    counts: dict[str, dict[str, dict[str, int]]] = Field(
        default_factory=dict,
        description="operator uid -> group -> name -> count, summed over the last heartbeats "
        "of the current attempt's subtasks; an agent reports runs by status, "
        'e.g. {"refund-desk": {"runs": {"running": 3, "done": 40}}}',
    )


class WorkerInfo(_Model):
    worker_id: str
    slots: int = Field(ge=0)
    subtasks: list[str]
    seconds_since_heartbeat: float = Field(ge=0)
    alive: bool


class SubtaskInfo(_Model):
    subtask: str = Field(description="uid#index")
    worker_id: str | None
    attempt: int = Field(ge=0)


class CheckpointStatus(StrEnum):
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    ABORTED = "aborted"


class CheckpointInfo(_Model):
    checkpoint_id: int = Field(ge=1)
    attempt: int = Field(ge=0)
    status: CheckpointStatus
    triggered_at: float | None = Field(description="unix time")
    completed_at: float | None = Field(description="unix time")
    full_bytes: int = Field(ge=0)
    incremental_bytes: int = Field(ge=0)
    alignment_seconds: float = Field(ge=0, description="slowest subtask")
    sync_seconds: float = Field(ge=0, description="slowest subtask")
    async_seconds: float = Field(ge=0, description="slowest subtask")
    reason: str | None = Field(default=None, description="why it was aborted")


class CheckpointRefusedError(RetryableError):
    """A checkpoint cannot be triggered now; ``reason`` says why (one is in flight, ...)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CoordinatorView(Protocol):
    """What a coordinator exposes to its HTTP API."""

    def status(self) -> JobStatus: ...

    def workers(self) -> list[WorkerInfo]: ...

    def subtasks(self) -> list[SubtaskInfo]: ...

    async def checkpoints(self) -> list[CheckpointInfo]:
        """Completed checkpoints still retained, plus the one in flight and recent aborts."""
        ...

    async def trigger_checkpoint(self) -> int:
        """Trigger a checkpoint now; its id. Raises `CheckpointRefusedError` when not allowed."""
        ...

    async def stop(self, *, final_checkpoint: bool, wait_seconds: float) -> JobStatus:
        """Stop the job gracefully (a no-op if it is stopping or ended); the status once it
        ended, or after ``wait_seconds``."""
        ...

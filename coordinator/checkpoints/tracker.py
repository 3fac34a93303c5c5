"""The coordinator's checkpoint state machine, sans-IO.

:class:`CheckpointTracker` is fed triggers, acks, declines, clock ticks and manifest commits of
one attempt; it answers with actions the coordinator's task performs:

* :class:`SendTrigger` — send ``TriggerCheckpoint(n)`` of ``attempt`` to the workers: each source
  subtask puts barrier ``n`` on its source channels at its read position;
* :class:`CommitManifest` — every subtask acked: commit the manifest of ``n`` (create-if-absent),
  then call :meth:`CheckpointTracker.on_manifest_committed`;
* :class:`BroadcastCompleted` — tell every subtask that ``n`` completed (sinks publish);
* :class:`AbortCheckpoint` — tell every subtask that ``n`` was aborted.

At most one checkpoint is in flight, from trigger until its manifest is committed or it is
aborted. A recovery starts a new attempt with a new tracker (the coordinator and the protocol
model test alike); what was in flight is left behind, its acks stale. Checkpoint ids only grow
and never repeat, across attempts too: each tracker is built with the next free id, which the
coordinator keeps durably (`coordinator.numbering`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum

from sluicegate.coordinator.checkpoints.pending import PendingCheckpoint
from sluicegate.operators.protocol.exceptions import ProtocolViolationError
from sluicegate.operators.protocol.messages import CheckpointAck

__all__ = [
    "AbortCause",
    "AbortCheckpoint",
    "BroadcastCompleted",
    "CheckpointTracker",
    "CommitManifest",
    "SendTrigger",
]


class AbortCause(StrEnum):
    """Why a checkpoint was aborted (`coordinator.checkpoint_stats` maps it to a metric label)."""

    DECLINED = "declined"
    TIMED_OUT = "timed_out"
    MANIFEST_FAILED = "manifest_failed"
    RECOVERY = "recovery"


@dataclass(frozen=True, slots=True)
class SendTrigger:
    """Send ``TriggerCheckpoint(checkpoint_id)`` of ``attempt`` to the workers; every source subtask
    takes barrier ``checkpoint_id`` at its read positions (the coordinator writes no topic)."""

    checkpoint_id: int
    attempt: int


@dataclass(frozen=True, slots=True)
class CommitManifest:
    """Commit the manifest of ``checkpoint_id`` from ``acks`` (one per subtask, by subtask)."""

    checkpoint_id: int
    attempt: int
    acks: tuple[CheckpointAck, ...]


@dataclass(frozen=True, slots=True)
class BroadcastCompleted:
    """Tell every subtask that ``checkpoint_id`` completed."""

    checkpoint_id: int
    attempt: int


@dataclass(frozen=True, slots=True)
class AbortCheckpoint:
    """Tell every subtask that ``checkpoint_id`` was aborted."""

    checkpoint_id: int
    attempt: int
    cause: AbortCause
    reason: str


class CheckpointTracker:
    """Decides when to trigger checkpoints and when they complete or abort.

    Times are seconds on the injected clock (``now`` arguments). ``interval_seconds`` is the
    least time between two triggers; ``min_pause_seconds`` the least time between the end of
    one checkpoint (completed or aborted) and the trigger of the next; ``timeout_seconds``
    how long a checkpoint may wait for its acks.
    """

    def __init__(
        self,
        *,
        subtasks: Collection[str],
        next_checkpoint_id: int,
        attempt: int,
        interval_seconds: float,
        min_pause_seconds: float,
        timeout_seconds: float,
    ) -> None:
        if next_checkpoint_id < 1:
            raise ProtocolViolationError(f"checkpoint ids start at 1 ({next_checkpoint_id})")
        self._subtasks = frozenset(subtasks)
        if not self._subtasks:
            raise ProtocolViolationError("a pipeline has at least one subtask")
        self._next_id = next_checkpoint_id
        self._attempt = attempt
        self._interval = interval_seconds
        self._min_pause = min_pause_seconds
        self._timeout = timeout_seconds
        self._pending: PendingCheckpoint | None = None
        self._committing: int | None = None
        self._last_triggered_at: float | None = None
        self._last_ended_at: float | None = None
        self._last_completed: int | None = None

    @property
    def attempt(self) -> int:
        """The current attempt."""
        return self._attempt

    @property
    def next_checkpoint_id(self) -> int:
        """The id the next trigger will use; keep it durably before injecting barriers."""
        return self._next_id

    @property
    def in_flight(self) -> int | None:
        """The checkpoint between trigger and manifest commit or abort, if any."""
        if self._pending is not None:
            return self._pending.checkpoint_id
        return self._committing

    @property
    def last_completed(self) -> int | None:
        """The newest checkpoint whose manifest was committed by this tracker."""
        return self._last_completed

    def trigger(self, now: float, *, forced: bool = False) -> SendTrigger | None:
        """Start the next checkpoint if allowed now, else ``None``.

        Not allowed while one is in flight, before ``min_pause_seconds`` have passed since
        the last one ended, or (unless ``forced``, e.g. asked for over HTTP) before
        ``interval_seconds`` have passed since the last trigger.
        """
        if self.in_flight is not None:
            return None
        if self._last_ended_at is not None and now - self._last_ended_at < self._min_pause:
            return None
        if (
            not forced
            and self._last_triggered_at is not None
            and now - self._last_triggered_at < self._interval
        ):
            return None
        checkpoint_id = self._next_id
        self._next_id += 1
        self._last_triggered_at = now
        self._pending = PendingCheckpoint(
            checkpoint_id,
            attempt=self._attempt,
            subtasks=self._subtasks,
            triggered_at=now,
            timeout_seconds=self._timeout,
        )
        return SendTrigger(checkpoint_id, self._attempt)

    def on_ack(self, ack: CheckpointAck) -> CommitManifest | None:
        """Record an ack; :class:`CommitManifest` once every subtask has acked.

        Acks of another checkpoint or attempt are stale and ignored.
        """
        pending = self._current(ack.checkpoint_id, ack.attempt)
        if pending is None or not pending.add_ack(ack) or not pending.is_complete:
            return None
        self._pending = None
        self._committing = pending.checkpoint_id
        return CommitManifest(pending.checkpoint_id, pending.attempt, pending.acks)

    def on_decline(
        self, checkpoint_id: int, attempt: int, subtask: str, reason: str, now: float
    ) -> AbortCheckpoint | None:
        """A subtask declined ``checkpoint_id``: abort it (unless the decline is stale)."""
        pending = self._current(checkpoint_id, attempt)
        if pending is None or not pending.add_decline(subtask, reason):
            return None
        return self._abort(now, AbortCause.DECLINED, f"declined by {subtask}: {reason}")

    def on_tick(self, now: float) -> AbortCheckpoint | None:
        """Time passes: abort the checkpoint in flight if it waited past its deadline."""
        if self._pending is None or not self._pending.is_timed_out(now):
            return None
        missing = ", ".join(sorted(self._pending.missing))
        return self._abort(now, AbortCause.TIMED_OUT, f"timed out waiting for {missing}")

    def on_manifest_committed(self, checkpoint_id: int, now: float) -> BroadcastCompleted | None:
        """The manifest of ``checkpoint_id`` is committed: it completed. Stale calls are ignored."""
        if self._committing != checkpoint_id:
            return None
        self._committing = None
        self._last_completed = checkpoint_id
        self._last_ended_at = now
        return BroadcastCompleted(checkpoint_id, self._attempt)

    def on_manifest_failed(
        self, checkpoint_id: int, reason: str, now: float
    ) -> AbortCheckpoint | None:
        """The manifest of ``checkpoint_id`` could not be committed: abort it."""
        if self._committing != checkpoint_id:
            return None
        return self._abort(now, AbortCause.MANIFEST_FAILED, reason)

    def on_trigger_failed(
        self, checkpoint_id: int, reason: str, now: float
    ) -> AbortCheckpoint | None:
        """Checkpoint ``checkpoint_id`` could not be started (its id could not be recorded in
        storage, or its barriers not sent): abort it. Stale calls are ignored."""
        if self.in_flight != checkpoint_id or self._committing is not None:
            return None
        return self._abort(now, AbortCause.MANIFEST_FAILED, reason)

    def _current(self, checkpoint_id: int, attempt: int) -> PendingCheckpoint | None:
        pending = self._pending
        if pending is None or pending.checkpoint_id != checkpoint_id or attempt != self._attempt:
            return None
        return pending

    def _abort(self, now: float, cause: AbortCause, reason: str) -> AbortCheckpoint:
        checkpoint_id = self.in_flight
        assert checkpoint_id is not None
        self._pending = None
        self._committing = None
        self._last_ended_at = now
        return AbortCheckpoint(checkpoint_id, self._attempt, cause, reason)

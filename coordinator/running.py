"""The running phase of an attempt, sans-IO: what the coordinator does while its subtasks run.

`Running` exists from the moment an attempt's assignment is taken up until the attempt fails,
rebalances or the job ends. The coordinator feeds it what it observes (clock ticks, acks,
declines, failed subtasks, lost or restarted workers, manifest commits) and performs the
actions it answers, in order, in one executor (`Coordinator._execute`); the protocol model test
(``tests/unit/protocol_model``) performs them on its simulated world. The decisions::

    observed                                     actions answered, in order
    -------------------------------------------  ----------------------------------------------
    tick, a savepoint waits for a checkpoint     Trigger(savepoint)
    tick, periodic due (not stopping, no         Trigger(periodic)
      storage backoff)
    tick, the checkpoint in flight timed out     AbortCheckpoint
    trigger asked for (HTTP, final of a stop)    Trigger(requested | final), or nothing
    trigger could not be recorded                AbortCheckpoint (periodic ones back off)
    ack, the last one of the checkpoint          CommitManifest
    decline                                      AbortCheckpoint
    manifest committed                           Complete, CommitOffsets, ApplyRetention,
                                                 then Rebalance if the live workers call for
                                                 another plan (not while stopping)
    manifest failed (exists, or storage failed)  AbortCheckpoint (storage: periodic backs off)
    subtask of this attempt failed               MarkCorrupt (its restore found a corrupt
                                                 checkpoint), then Fail
    assigned worker missed heartbeats/restarted  Fail
    heartbeat of another attempt (not stopping)  SendAssign (it missed the assignment)

At most one checkpoint is in flight (`CheckpointTracker`); a checkpoint's trigger is recorded
durably before its barriers are sent, so its id never repeats. A completed checkpoint resets
the storage backoff (`StorageBackoff`, shared by the attempts of one coordinator).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from sluicegate.coordinator.assignment import unbalanced
from sluicegate.coordinator.checkpoints.backoff import StorageBackoff
from sluicegate.coordinator.checkpoints.tracker import (
    AbortCheckpoint,
    CheckpointTracker,
    CommitManifest,
)
from sluicegate.operators.protocol.messages import (
    Assign,
    CheckpointAck,
    CheckpointDecline,
    Heartbeat,
    SubtaskFailed,
)
from sluicegate.operators.storage.manifest import CheckpointManifest

__all__ = [
    "ApplyRetention",
    "CommitOffsets",
    "Complete",
    "Fail",
    "MarkCorrupt",
    "Rebalance",
    "Running",
    "RunningAction",
    "SendAssign",
    "Trigger",
    "TriggerPurpose",
]


class TriggerPurpose(StrEnum):
    """Why a checkpoint is triggered (the executor tells the savepoint or stop it serves)."""

    PERIODIC = "periodic"
    SAVEPOINT = "savepoint"
    REQUESTED = "requested"
    FINAL = "final"


@dataclass(frozen=True, slots=True)
class Trigger:
    """Record ``checkpoint_id`` as used, then send ``TriggerCheckpoint`` to the workers."""

    checkpoint_id: int
    attempt: int
    purpose: TriggerPurpose
    full: bool = False
    """Upload every state file (not only those the previous checkpoint lacks)."""


@dataclass(frozen=True, slots=True)
class Complete:
    """Checkpoint ``manifest`` completed: count it, broadcast ``completed(n)``, tell the stop
    and the savepoints."""

    manifest: CheckpointManifest


@dataclass(frozen=True, slots=True)
class CommitOffsets:
    """Commit the sources' group offsets of ``manifest`` (for lag tools only)."""

    manifest: CheckpointManifest


@dataclass(frozen=True, slots=True)
class ApplyRetention:
    """Apply retention after a completed checkpoint; ``pinned``: checkpoints it must keep
    (the executor adds those being written as savepoints)."""

    pinned: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Rebalance:
    """The live workers call for another placement: recover at once, nothing failed."""

    plan: Mapping[str, tuple[str, ...]]
    slots: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class MarkCorrupt:
    """Mark checkpoint ``checkpoint_id`` corrupt: recoveries fall back to the previous one."""

    checkpoint_id: int
    reason: str


@dataclass(frozen=True, slots=True)
class Fail:
    """The attempt failed: recover (or, while stopping, stop what is left)."""

    reason: str
    subtask: str | None = None


@dataclass(frozen=True, slots=True)
class SendAssign:
    """Send the assignment again (a worker's heartbeat names another attempt)."""

    assign: Assign


RunningAction = (
    Trigger
    | AbortCheckpoint
    | CommitManifest
    | Complete
    | CommitOffsets
    | ApplyRetention
    | Rebalance
    | MarkCorrupt
    | Fail
    | SendAssign
)


class Running:
    """One running attempt: its assignment and its checkpoints; see the module docstring."""

    def __init__(
        self,
        tracker: CheckpointTracker,
        assign: Assign,
        backoff: StorageBackoff,
        *,
        subtasks: Sequence[str],
        periodic: bool = True,
    ) -> None:
        """``backoff``: the coordinator's, kept across attempts; ``subtasks``: every subtask of
        the job; ``periodic``: whether checkpoints are triggered on the interval (else only
        when asked for)."""
        self._tracker = tracker
        self._subtasks = subtasks
        self._assign = assign
        self._backoff = backoff
        self._periodic = periodic
        self._stopping = False
        self._balanced_for: dict[str, int] | None = None
        """The live workers' slots the assignment was last found balanced for: `unbalanced`
        depends only on them (the subtasks and the assignment are this attempt's), so it is
        not planned again until they change (it planned every subtask after every
        checkpoint)."""

    @property
    def assign(self) -> Assign:
        return self._assign

    @property
    def attempt(self) -> int:
        return self._assign.attempt

    @property
    def in_flight(self) -> int | None:
        """The checkpoint between trigger and manifest commit or abort, if any."""
        return self._tracker.in_flight

    def assigned(self, worker: str) -> bool:
        """Whether ``worker`` runs subtasks of this attempt."""
        return bool(self._assign.assignment.get(worker))

    def stop(self) -> None:
        """A graceful stop began: no periodic checkpoints or rebalances any more."""
        self._stopping = True

    def tick(self, now: float, *, savepoint_waiting: bool = False) -> list[RunningAction]:
        """Time passes: trigger what is due (a savepoint's checkpoint first, then the periodic
        one), and abort the checkpoint in flight if it timed out."""
        actions: list[RunningAction] = []
        if savepoint_waiting and not self._stopping:
            actions.extend(self._trigger(now, TriggerPurpose.SAVEPOINT))
        if self._periodic and not self._stopping and not self._backoff.waiting(now):
            actions.extend(self._trigger(now, TriggerPurpose.PERIODIC))
        if (abort := self._tracker.on_tick(now)) is not None:
            actions.append(abort)
        return actions

    def trigger(self, now: float, purpose: TriggerPurpose, *, full: bool = False) -> Trigger | None:
        """A checkpoint asked for now (not periodic; ``full``: a full one): its trigger, or
        None if one is in flight or the minimum pause has not passed."""
        triggered = self._trigger(now, purpose, full=full)
        return triggered[0] if triggered else None

    def on_trigger_failed(self, checkpoint_id: int, reason: str, now: float) -> list[RunningAction]:
        """The trigger of ``checkpoint_id`` could not be recorded in storage."""
        self._backoff.failed(now)
        abort = self._tracker.on_trigger_failed(checkpoint_id, reason, now)
        return [abort] if abort is not None else []

    def on_ack(self, ack: CheckpointAck) -> list[RunningAction]:
        commit = self._tracker.on_ack(ack)
        return [commit] if commit is not None else []

    def on_decline(self, decline: CheckpointDecline, now: float) -> list[RunningAction]:
        abort = self._tracker.on_decline(
            decline.checkpoint_id, decline.attempt, decline.subtask, decline.reason, now
        )
        return [abort] if abort is not None else []

    def on_manifest_committed(
        self, manifest: CheckpointManifest, now: float, slots: Mapping[str, int]
    ) -> list[RunningAction]:
        """The manifest of ``manifest.checkpoint_id`` is committed; ``slots``: the live
        workers' slots (whether they call for another placement)."""
        if self._tracker.on_manifest_committed(manifest.checkpoint_id, now) is None:
            return []
        self._backoff.succeeded()
        restore_from = self._assign.restore_from
        actions: list[RunningAction] = [
            Complete(manifest),
            CommitOffsets(manifest),
            ApplyRetention((restore_from,) if restore_from else ()),
        ]
        if not self._stopping and slots != self._balanced_for:
            plan = unbalanced(self._subtasks, slots, self._assign.assignment)
            if plan is not None:
                actions.append(Rebalance(plan, dict(slots)))
            else:
                self._balanced_for = dict(slots)
        return actions

    def on_manifest_failed(
        self, checkpoint_id: int, reason: str, now: float, *, storage_failed: bool
    ) -> list[RunningAction]:
        """The manifest could not be committed: it exists already, or storage failed
        (``storage_failed``: periodic checkpoints back off)."""
        if storage_failed:
            self._backoff.failed(now)
        abort = self._tracker.on_manifest_failed(checkpoint_id, reason, now)
        return [abort] if abort is not None else []

    def on_subtask_failed(self, failed: SubtaskFailed) -> list[RunningAction]:
        """A subtask failed; failures of other attempts are stale."""
        if failed.attempt != self.attempt:
            return []
        actions: list[RunningAction] = []
        if failed.corrupt_checkpoint is not None:
            actions.append(MarkCorrupt(failed.corrupt_checkpoint, failed.reason))
        actions.append(Fail(f"subtask {failed.subtask} failed: {failed.reason}", failed.subtask))
        return actions

    def on_worker_lost(self, worker: str, why: str) -> list[RunningAction]:
        """``worker`` missed its heartbeats or restarted (``why``): the attempt fails if it
        ran subtasks of it."""
        return [Fail(f"worker {worker} {why}")] if self.assigned(worker) else []

    def on_heartbeat(self, beat: Heartbeat) -> list[RunningAction]:
        """A heartbeat from a worker of this coordinator's attempts."""
        if self._stopping or beat.attempt == self._assign.attempt:
            return []
        return [SendAssign(self._assign)]

    def _trigger(self, now: float, purpose: TriggerPurpose, *, full: bool = False) -> list[Trigger]:
        forced = purpose is not TriggerPurpose.PERIODIC
        send = self._tracker.trigger(now, forced=forced)
        return [] if send is None else [Trigger(send.checkpoint_id, send.attempt, purpose, full)]

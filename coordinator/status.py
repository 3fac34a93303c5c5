"""The running `Coordinator` as its HTTP API sees it: an implementation of `CoordinatorView`,
reading `Coordinator.facts` (and the manifests in storage), never the coordinator's own parts."""

from __future__ import annotations

import asyncio
import contextlib
import time

from sluicegate.coordinator.facts import CoordinatorFacts
from sluicegate.coordinator.httpapi.view import (
    CheckpointInfo,
    CheckpointRefusedError,
    CheckpointStatus,
    JobStatus,
    StopInfo,
    SubtaskInfo,
    WorkerInfo,
)
from sluicegate.coordinator.service import Coordinator
from sluicegate.operators.graph import SubtaskId
from sluicegate.operators.storage.manifest import ManifestStore

__all__ = ["CoordinatorStatus"]


class CoordinatorStatus:
    """Reads a `Coordinator` for the API; runs on the coordinator's own event loop."""

    def __init__(self, coordinator: Coordinator) -> None:
        self._c = coordinator

    def status(self) -> JobStatus:
        facts = self._c.facts()
        done_at = facts.checkpoints.last_completed_at
        lag = max(time.time() - done_at, 0.0) if done_at is not None else None
        stop = facts.stop
        return JobStatus(
            pipeline=facts.pipeline,
            state=facts.state.value,
            attempt=facts.attempt,
            last_completed_checkpoint=facts.checkpoints.last_completed_id,
            checkpoint_lag_seconds=lag,
            restarts=facts.restarts,
            waiting_for=facts.waiting_for,
            fenced_by=facts.fenced_by,
            stop=None
            if stop is None
            else StopInfo(phase=stop.phase, final_checkpoint=stop.final_checkpoint, note=stop.note),
            counts=_counts(facts),
        )

    def workers(self) -> list[WorkerInfo]:
        now = time.monotonic()
        return [
            WorkerInfo(
                worker_id=w.worker_id,
                slots=w.heartbeat.slots,
                subtasks=list(w.heartbeat.subtasks),
                seconds_since_heartbeat=max(now - w.last_seen, 0.0),
                alive=w.alive,
            )
            for w in self._c.facts(now).workers
        ]

    def subtasks(self) -> list[SubtaskInfo]:
        facts = self._c.facts()
        assign = facts.assign
        owner = {
            subtask: worker
            for worker, subtasks in (assign.assignment.items() if assign else [])
            for subtask in subtasks
        }
        return [
            SubtaskInfo(subtask=str(s), worker_id=owner.get(str(s)), attempt=facts.attempt)
            for s in self._c.graph.subtasks()
        ]

    async def checkpoints(self) -> list[CheckpointInfo]:
        infos: list[CheckpointInfo] = []
        for m in await ManifestStore(self._c.storage).retained():
            snapshots = list(m.subtasks.values())
            infos.append(
                CheckpointInfo(
                    checkpoint_id=m.checkpoint_id,
                    attempt=m.attempt,
                    status=CheckpointStatus.COMPLETED,
                    triggered_at=m.triggered_at,
                    completed_at=m.completed_at,
                    full_bytes=m.full_bytes,
                    incremental_bytes=m.uploaded_bytes,
                    alignment_seconds=max((s.alignment_seconds for s in snapshots), default=0),
                    sync_seconds=max((s.sync_seconds for s in snapshots), default=0),
                    async_seconds=max((s.async_seconds for s in snapshots), default=0),
                )
            )
        facts = self._c.facts()
        for abort in facts.checkpoints.recent_aborts:
            infos.append(
                _empty(abort.checkpoint_id, abort.attempt, CheckpointStatus.ABORTED, abort.reason)
            )
        if (in_flight := facts.checkpoints.in_flight) is not None:
            pending = _empty(in_flight, facts.attempt, CheckpointStatus.IN_PROGRESS)
            triggered_at = facts.checkpoints.in_flight_triggered_at
            infos.append(pending.model_copy(update={"triggered_at": triggered_at}))
        return infos  # the API orders them, newest first

    async def trigger_checkpoint(self) -> int:
        checkpoint_id = await self._c.trigger_checkpoint()
        if checkpoint_id is None:
            raise CheckpointRefusedError(
                "a checkpoint is in flight, the minimum pause has not passed, or the job is "
                "not running; try again in a moment"
            )
        return checkpoint_id

    async def stop(self, *, final_checkpoint: bool, wait_seconds: float) -> JobStatus:
        self._c.request_stop(final_checkpoint=final_checkpoint)
        if wait_seconds > 0:
            # The answer is sent before the process exits: the server lets requests in
            # progress finish when the coordinator's run ends.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_seconds):
                    await self._c.ended.wait()
        return self.status()


def _empty(
    checkpoint_id: int, attempt: int, status: CheckpointStatus, reason: str | None = None
) -> CheckpointInfo:
    return CheckpointInfo(
        checkpoint_id=checkpoint_id,
        attempt=attempt,
        status=status,
        triggered_at=None,
        completed_at=None,
        full_bytes=0,
        incremental_bytes=0,
        alignment_seconds=0,
        sync_seconds=0,
        async_seconds=0,
        reason=reason,
    )


def _counts(facts: CoordinatorFacts) -> dict[str, dict[str, dict[str, int]]]:
    """Every live worker's last reported counts of the current attempt, summed per uid."""
    reported = (
        (SubtaskId.parse(subtask).uid, group, name, n)
        for worker in facts.alive()
        if worker.heartbeat.attempt == facts.attempt
        for subtask, groups in worker.heartbeat.counts.items()
        for group, counts in groups.items()
        for name, n in counts.items()
    )
    summed: dict[str, dict[str, dict[str, int]]] = {}
    for uid, group, name, n in reported:
        total = summed.setdefault(uid, {}).setdefault(group, {})
        total[name] = total.get(name, 0) + n
    return summed

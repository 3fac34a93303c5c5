"""The running `Coordinator` as its HTTP API sees it: an implementation of `CoordinatorView`."""

from __future__ import annotations

import asyncio
import contextlib
import time

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

__all__ = ["CoordinatorStatus"]


class CoordinatorStatus:
    """Reads a `Coordinator` for the API; runs on the coordinator's own event loop."""

    def __init__(self, coordinator: Coordinator) -> None:
        self._c = coordinator

    def status(self) -> JobStatus:
        c = self._c
        last = c.stats.last_completed_id
        done_at = c.stats.last_completed_at
        lag = max(time.time() - done_at, 0.0) if done_at is not None else None
        return JobStatus(
            pipeline=c.graph.name,
            state=c.job.state.value,
            attempt=c.attempt,
            last_completed_checkpoint=last,
            checkpoint_lag_seconds=lag,
            restarts=c.restarts,
            waiting_for=c.placement.waiting_for,
            fenced_by=c.fence.fenced_by if c.fence is not None else None,
            stop=None
            if c.stopping is None
            else StopInfo(
                phase=c.stopping.phase.value,
                final_checkpoint=c.stopping.completed,
                note=c.stopping.note,
            ),
            counts=self._counts(),
        )

    def _counts(self) -> dict[str, dict[str, dict[str, int]]]:
        """Every live worker's last reported counts of the current attempt, summed per uid."""
        reported = (
            (SubtaskId.parse(subtask).uid, group, name, n)
            for beat in self._c.liveness.alive_infos(time.monotonic()).values()
            if beat.attempt == self._c.attempt
            for subtask, groups in beat.counts.items()
            for group, counts in groups.items()
            for name, n in counts.items()
        )
        summed: dict[str, dict[str, dict[str, int]]] = {}
        for uid, group, name, n in reported:
            total = summed.setdefault(uid, {}).setdefault(group, {})
            total[name] = total.get(name, 0) + n
        return summed

    def workers(self) -> list[WorkerInfo]:
        now = time.monotonic()
        alive = set(self._c.liveness.alive(now))
        infos = []
        for worker in sorted(alive | set(self._c.liveness.dead(now))):
            entry = self._c.liveness.get(worker)
            if entry is None:
                continue
            infos.append(
                WorkerInfo(
                    worker_id=worker,
                    slots=entry.info.slots,
                    subtasks=list(entry.info.subtasks),
                    seconds_since_heartbeat=max(now - entry.last_seen, 0.0),
                    alive=worker in alive,
                )
            )
        return infos

    def subtasks(self) -> list[SubtaskInfo]:
        assign = self._c.assign
        owner = {
            subtask: worker
            for worker, subtasks in (assign.assignment.items() if assign else [])
            for subtask in subtasks
        }
        return [
            SubtaskInfo(subtask=str(s), worker_id=owner.get(str(s)), attempt=self._c.attempt)
            for s in self._c.graph.subtasks()
        ]

    async def checkpoints(self) -> list[CheckpointInfo]:
        infos: list[CheckpointInfo] = []
        for m in await self._c.manifests.retained():
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
        for abort in self._c.aborts:
            infos.append(
                _empty(abort.checkpoint_id, abort.attempt, CheckpointStatus.ABORTED, abort.reason)
            )
        tracker = self._c.tracker
        if tracker is not None and tracker.in_flight is not None:
            in_flight = _empty(tracker.in_flight, tracker.attempt, CheckpointStatus.IN_PROGRESS)
            triggered_at = self._c.stats.triggered_at(tracker.in_flight)
            infos.append(in_flight.model_copy(update={"triggered_at": triggered_at}))
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

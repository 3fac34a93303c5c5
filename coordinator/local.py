"""A pipeline run in one process: every subtask as an asyncio task, checkpointed.

`LocalJob` is the engine's test driver and the embedded mode until workers run in processes
of their own (the coordinator issue). It uses the same sans-IO `CheckpointTracker` as the
coordinator, and the same storage layout, so what it writes is what a coordinator restores.

`start` performs, in order:

1. create the pipeline's topics (refusing existing ones of another shape);
2. take the next attempt durably (``attempts/<A>`` with create-if-absent), before any subtask
   of attempt ``A`` produces a record;
3. find the latest completed checkpoint, and the next checkpoint id (ids never repeat: every
   triggered id leaves a ``checkpoints/<n>/_triggered`` marker first);
4. start every subtask from its restore point, and the coordinator loop.

`crash` cancels every task at once (what a kill would do to the process, minus the OS);
`start` again recovers at a new attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path

from aiokafka import AIOKafkaProducer
from prometheus_client import CollectorRegistry

from coordinator.barriers import inject_barriers
from coordinator.checkpoints.commit import commit_checkpoint
from coordinator.checkpoints.tracker import (
    AbortCheckpoint,
    CheckpointTracker,
    InjectBarriers,
)
from coordinator.numbering import next_checkpoint_id, take_attempt
from operators.exceptions import FatalError
from operators.graph import JobGraph
from operators.runtime.control import (
    CheckpointAborted,
    CheckpointAck,
    CheckpointCompleted,
    CheckpointDecline,
    InMemoryControl,
    SubtaskFailed,
)
from operators.runtime.manifest import ManifestStore
from operators.runtime.subtask import Subtask, SubtaskSettings
from operators.runtime.topics import ensure_topics
from operators.storage import Storage

__all__ = ["JobFailedError", "LocalJob"]

logger = logging.getLogger(__name__)

_TICK_S = 0.02


class JobFailedError(FatalError):
    """A subtask of the job failed; ``subtask`` names it."""

    def __init__(self, subtask: str, reason: str) -> None:
        super().__init__(f"subtask {subtask} failed: {reason}")
        self.subtask, self.reason = subtask, reason


class LocalJob:
    """Every subtask of ``graph`` in this process; steps in the module docstring."""

    def __init__(
        self,
        graph: JobGraph,
        *,
        bootstrap: str,
        storage: Storage,
        work_dir: Path,
        interval_seconds: float = 1.0,
        min_pause_seconds: float = 0.0,
        timeout_seconds: float = 60.0,
        checkpointing: bool = True,
        subtask_settings: SubtaskSettings | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        """``registry``: where the subtasks report their metrics (default: the global one)."""
        self.graph = graph
        self._bootstrap = bootstrap
        self._storage = storage
        self._manifests = ManifestStore(storage)
        self._work_dir = work_dir
        self._interval = interval_seconds
        self._min_pause = min_pause_seconds
        self._timeout = timeout_seconds
        self._checkpointing = checkpointing
        self._settings = subtask_settings
        self._registry = registry
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._loop: asyncio.Task[None] | None = None
        self._producer: AIOKafkaProducer | None = None
        self.subtasks: dict[str, Subtask] = {}
        self.attempt = 0
        self.completed: list[int] = []
        self.restored_from: int | None = None
        self._completed_event = asyncio.Event()
        self._triggered_at: dict[int, float] = {}

    async def start(self) -> None:
        """Start or recover the job; steps in the module docstring."""
        await ensure_topics(self._bootstrap, self.graph)
        self.attempt = await take_attempt(self._storage)
        manifest = await self._manifests.latest()
        self.restored_from = manifest.checkpoint_id if manifest else None
        names = [str(s) for s in self.graph.subtasks()]
        tracker = CheckpointTracker(
            subtasks=names,
            next_checkpoint_id=await next_checkpoint_id(self._storage),
            attempt=self.attempt,
            interval_seconds=self._interval,
            min_pause_seconds=self._min_pause,
            timeout_seconds=self._timeout,
        )
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap, enable_idempotence=True
        )
        await self._producer.start()
        control = InMemoryControl()
        for subtask_id in self.graph.subtasks():
            name = str(subtask_id)
            subtask = Subtask(
                graph=self.graph,
                subtask=subtask_id,
                attempt=self.attempt,
                bootstrap=self._bootstrap,
                storage=self._storage,
                control=control.link(name),
                local_dir=self._work_dir / name,
                restore=manifest.restore_point(name) if manifest else None,
                next_checkpoint_id=tracker.next_checkpoint_id,
                settings=self._settings,
                registry=self._registry,
            )
            self.subtasks[name] = subtask
            self._tasks[name] = asyncio.create_task(subtask.run(), name=name)
        self._loop = asyncio.create_task(self._coordinate(tracker, control))
        logger.info(
            "job %s started at attempt %s from checkpoint %s",
            self.graph.name,
            self.attempt,
            self.restored_from,
        )

    async def crash(self) -> None:
        """Cancel every task at once, as a killed process would stop."""
        tasks = [*self._tasks.values(), *([self._loop] if self._loop else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._loop = None
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    stop = crash

    async def wait_for_checkpoints(self, count: int, timeout_s: float) -> None:
        """Wait until ``count`` checkpoints completed since this job object was made."""
        deadline = time.monotonic() + timeout_s
        while len(self.completed) < count:
            self.raise_failure()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"only {len(self.completed)} of {count} checkpoints completed")
            self._completed_event.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._completed_event.wait(), min(remaining, 0.5))

    def raise_failure(self) -> None:
        """Raise `JobFailedError` if a subtask or the coordinator loop died."""
        for name, task in [*self._tasks.items(), ("coordinator", self._loop)]:
            if task is not None and task.done() and not task.cancelled():
                exc = task.exception()
                if exc is not None:
                    raise JobFailedError(name, repr(exc)) from exc

    # -- coordinator loop -----------------------------------------------------------------

    async def _coordinate(self, tracker: CheckpointTracker, control: InMemoryControl) -> None:
        while True:
            now = time.monotonic()
            if self._checkpointing and (inject := tracker.trigger(now)) is not None:
                await self._inject(inject)
            if (timed_out := tracker.on_tick(now)) is not None:
                self._abort(control, timed_out)
            try:
                # Not wait_for: on 3.11 it swallows a cancel (crash) that lands as a message
                # arrives, and this loop would outlive the job.
                async with asyncio.timeout(_TICK_S):
                    message = await control.to_coordinator.get()
            except TimeoutError:
                continue
            now = time.monotonic()
            if isinstance(message, CheckpointAck):
                commit = tracker.on_ack(message)
                if commit is not None:
                    result = await commit_checkpoint(
                        self._manifests, tracker, self.graph.name, commit, now,
                        triggered_at=self._triggered_at.pop(commit.checkpoint_id, None),
                    )  # fmt: skip
                    if isinstance(result, AbortCheckpoint):
                        self._abort(control, result)
                    elif result is not None:
                        done = result[1]
                        self.completed.append(done.checkpoint_id)
                        self._completed_event.set()
                        control.broadcast(CheckpointCompleted(done.checkpoint_id, done.attempt))
            elif isinstance(message, CheckpointDecline):
                declined = tracker.on_decline(
                    message.checkpoint_id, message.attempt, message.subtask, message.reason, now
                )
                if declined is not None:
                    self._abort(control, declined)
            elif isinstance(message, SubtaskFailed):
                raise JobFailedError(message.subtask, message.reason)

    async def _inject(self, action: InjectBarriers) -> None:
        assert self._producer is not None
        self._triggered_at = {action.checkpoint_id: time.time()}  # at most one in flight
        await inject_barriers(
            self._producer, self._storage, self.graph, action.checkpoint_id, action.attempt
        )

    def _abort(self, control: InMemoryControl, abort: AbortCheckpoint) -> None:
        logger.info("checkpoint %s aborted: %s", abort.checkpoint_id, abort.reason)
        control.broadcast(CheckpointAborted(abort.checkpoint_id, abort.attempt, abort.reason))

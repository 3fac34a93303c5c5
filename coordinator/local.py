"""A pipeline run in one process: the coordinator and one worker hosting every subtask.

`LocalJob` is the engine's test driver and the embedded mode (`sluicegate demo --wordcount`).
It is not a second coordinator: it runs the same `Coordinator` and `Worker` as the processes of
``sluicegate up``, joined by an in-memory control bus instead of Kafka control topics, so what
it writes is what a coordinator restores, and every decision is made by the same code.

What differs is the failure policy, chosen for a driver that tests crash and recover at points
of their own choosing: the coordinator never restarts the job itself (a failed subtask ends it
``failed``, and `LocalJob.raise_failure` raises `JobFailedError`), and heartbeats never time
out (the worker shares the event loop with the test).

`start` starts the coordinator (which takes the next attempt durably, finds the latest completed
checkpoint and assigns every subtask) and the worker, and returns once the worker runs the
subtasks of that attempt. `crash` cancels both at once (what a kill would do to the process,
minus the OS); `start` again recovers at a new attempt.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from prometheus_client import CollectorRegistry

from sluicegate.coordinator.exceptions import JobFailedError
from sluicegate.coordinator.job_state import JobState
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.kafka import KafkaLike
from sluicegate.operators.runtime.control import InMemoryBus
from sluicegate.operators.runtime.subtask import Subtask, SubtaskSettings
from sluicegate.operators.runtime.worker import Worker
from sluicegate.operators.runtime.worker_settings import WorkerSettings
from sluicegate.operators.storage import Storage

__all__ = ["LocalJob"]

_WORKER = "local"
_POLL_S = 0.02


class LocalJob:
    """Every subtask of ``graph`` in this process; see the module docstring."""

    def __init__(
        self,
        graph: JobGraph,
        *,
        bootstrap: KafkaLike,
        storage: Storage,
        work_dir: Path,
        settings: CoordinatorSettings | None = None,
        subtask_settings: SubtaskSettings | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        """``settings``: the coordinator's (default: `CoordinatorSettings`'s defaults), except
        the failure policy of the module docstring, which replaces its heartbeat timeout,
        adoption, settling and restart policy; its process fields (storage, API) are unused.
        ``subtask_settings``: the subtasks'. ``registry``: where the subtasks report their
        metrics (default: the global one)."""
        self.graph = graph
        self._bootstrap = bootstrap
        self._storage = storage
        self._work_dir = work_dir
        self._settings = (settings or CoordinatorSettings()).model_copy(
            update={
                "heartbeat_timeout_seconds": 1e9,
                "adopt_seconds": 0,  # its worker dies with it (`crash`): nothing to adopt
                "settle_seconds": 0,  # one worker, in this process: no other to wait for
            }
        )
        self._subtask_settings = subtask_settings
        self._registry = registry
        self._coordinator: Coordinator | None = None
        self._worker: Worker | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._completed_before = 0

    @property
    def attempt(self) -> int:
        return self._coordinator.facts().attempt if self._coordinator else 0

    @property
    def restored_from(self) -> int | None:
        """The checkpoint the running attempt restored (None: it started from scratch)."""
        assign = self._coordinator.facts().assign if self._coordinator else None
        return assign.restore_from if assign else None

    @property
    def completed(self) -> int:
        """Checkpoints completed since this job object was made (across its restarts)."""
        now = self._coordinator.facts().checkpoints.completed if self._coordinator else 0
        return self._completed_before + now

    @property
    def subtasks(self) -> dict[str, Subtask]:
        """The running subtasks, by name."""
        return self._worker.subtasks if self._worker else {}

    async def start(self) -> None:
        """Start or recover the job; see the module docstring."""
        bus = InMemoryBus()
        self._completed_before = self.completed
        self._coordinator = Coordinator(
            self.graph,
            bootstrap=self._bootstrap,
            storage=self._storage,
            # No restart in one process: a failure fails the job (`start` again to recover).
            settings=self._settings.model_copy(
                update={"restart_max_failures": 0, "restart_window_seconds": 1e9}
            ),
            link=bus.coordinator_end(),
        )
        self._worker = Worker(
            self.graph,
            WorkerSettings(
                worker_id=_WORKER,
                slots=len(self.graph.subtasks()),
                state_dir=self._work_dir,
                heartbeat_seconds=0.2,
            ),
            bootstrap=self._bootstrap,
            storage=self._storage,
            subtask_settings=self._subtask_settings,
            registry=self._registry,
            link=bus.worker_end(),
        )
        self._tasks = [
            asyncio.create_task(self._coordinator.run(), name="coordinator"),
            asyncio.create_task(self._worker.run(), name="worker"),
        ]
        await self._until_assigned(self._coordinator, self._worker)

    async def _until_assigned(self, coordinator: Coordinator, worker: Worker) -> None:
        while (assign := coordinator.facts().assign) is None or worker.attempt != assign.attempt:
            self.raise_failure()
            await asyncio.sleep(_POLL_S)

    async def crash(self) -> None:
        """Cancel the coordinator and the worker at once, as a killed process would stop."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    stop = crash

    async def wait_for_checkpoints(self, count: int, timeout_s: float) -> None:
        """Wait until ``count`` checkpoints completed since this job object was made."""
        deadline = time.monotonic() + timeout_s
        while self.completed < count:
            self.raise_failure()
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {self.completed} of {count} checkpoints completed")
            await asyncio.sleep(_POLL_S)

    async def trigger_checkpoint(self) -> int | None:
        """Trigger a checkpoint now if none is in flight; its id, or None."""
        return await self._coordinator.trigger_checkpoint() if self._coordinator else None

    def raise_failure(self) -> None:
        """Raise `JobFailedError` if a subtask, the worker or the coordinator failed."""
        for task in self._tasks:
            if task.done() and not task.cancelled() and (exc := task.exception()) is not None:
                raise JobFailedError(task.get_name(), repr(exc)) from exc
        facts = self._coordinator.facts() if self._coordinator is not None else None
        if facts is not None and facts.state is JobState.FAILED:
            failure = facts.failure
            raise JobFailedError(
                (failure.subtask if failure else None) or "coordinator",
                failure.reason if failure else "the job failed",
            )

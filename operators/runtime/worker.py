"""A worker: the OS process that hosts subtasks, driven by the coordinator over Kafka.

`Worker.run` performs, in order:

1. open its end of the control plane (`WorkerLink`: the Kafka control topics, or an in-memory
   bus in one process); the coordinator re-sends the current assignment to any worker whose
   heartbeat disagrees with it;
2. every ``heartbeat_seconds``: send a `Heartbeat` with the attempt, the running subtasks and
   their operators' status counts (an agent's runs by status). Until its first assignment, and
   for `EAGER_FOR_SECONDS` at most, every `EAGER_BEAT_SECONDS`: a coordinator hears only the
   heartbeats sent after it joined, so one started together with the worker would otherwise
   learn of it a whole heartbeat late (the cold start of a job waited that long);
3. on `Retire(A)` (phase one of a new attempt A): retire every subtask of an older attempt
   (they are zombies now: the calls they are running may finish, within ``retire_seconds``,
   so that an effect in flight is journaled, not cut off), cancel them, and answer
   `Retired(A)`; from then on an `Assign` older than A is ignored. The coordinator assigns
   attempt A only once every live worker has answered, so no subtask starts anywhere while an
   older copy of it still runs a call;
4. on an `Assign` of a newer attempt (phase two): retire whatever still runs (nothing, after a
   `Retire`), then start the subtasks assigned to this worker, each restored from the
   manifest of ``restore_from`` read from checkpoint storage;
5. on ``trigger(n)``, ``completed(n)``, ``aborted(n)``, ``stop``: hand the message to every
   running subtask (a stopped subtask's task ends without error, and the heartbeats stop
   listing it);
6. when a subtask fails, report `SubtaskFailed` once; the coordinator recovers globally.

A worker outlives a stopped job: it idles, heartbeating, until a coordinator assigns it a newer
attempt (the job started again).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from sluicegate.operators.graph import JobGraph, SubtaskId
from sluicegate.operators.kafka import KafkaLike
from sluicegate.operators.protocol.messages import (
    RECORDS_GROUP,
    Assign,
    CheckpointAborted,
    CheckpointCompleted,
    FromWorker,
    Heartbeat,
    Retire,
    Retired,
    StopSubtasks,
    SubtaskFailed,
    ToSubtask,
    TriggerCheckpoint,
)
from sluicegate.operators.runtime.bounded import error_text
from sluicegate.operators.runtime.control import InboxLink, WorkerLink
from sluicegate.operators.runtime.exceptions import CorruptCheckpointError
from sluicegate.operators.runtime.kafka_control import KafkaWorkerLink
from sluicegate.operators.runtime.subtask import Subtask, SubtaskSettings
from sluicegate.operators.runtime.worker_settings import WorkerSettings
from sluicegate.operators.storage import NotFoundError, Storage, open_storage
from sluicegate.operators.storage.manifest import ManifestStore

__all__ = ["Worker"]

logger = logging.getLogger(__name__)

EAGER_BEAT_SECONDS = 0.2
"""How often a worker that was never assigned beats (if ``heartbeat_seconds`` is longer)."""
EAGER_FOR_SECONDS = 10.0
"""How long after its start a worker beats eagerly at most."""


@dataclass(slots=True)
class _Hosted:
    """A subtask this worker runs: the subtask, its control link, its task."""

    subtask: Subtask
    link: InboxLink
    task: asyncio.Task[None]
    reported: bool = False
    """Its failure was reported to the coordinator."""


class Worker:
    """Hosts up to ``slots`` subtasks of ``graph``; steps in the module docstring."""

    def __init__(
        self,
        graph: JobGraph,
        settings: WorkerSettings,
        *,
        bootstrap: KafkaLike,
        storage: Storage | None = None,
        subtask_settings: SubtaskSettings | None = None,
        registry: CollectorRegistry | None = None,
        link: WorkerLink | None = None,
    ) -> None:
        """``settings``: who it is, its slots, its folder, its heartbeat and retire times;
        ``storage``: checkpoint storage (default: ``settings.storage_url`` opened);
        ``subtask_settings``: the subtasks' tuning (default: ``settings.subtask``);
        ``registry``: where the subtasks report their metrics (default: the global one, which
        ``sluicegate worker --metrics-port`` serves); ``link``: the control plane (default: the
        pipeline's Kafka control topics)."""
        self.graph, self.settings = graph, settings
        self._bootstrap = bootstrap
        self._storage = storage if storage is not None else open_storage(settings.storage_url)
        self._subtask_settings = subtask_settings or settings.subtask
        self._registry = registry
        self.attempt = 0
        self._retired_to = 0
        """The newest attempt a `Retire` was answered for: older assignments are stale."""
        self.incarnation = uuid.uuid4().hex
        self._hosted: dict[str, _Hosted] = {}
        self._link = link or KafkaWorkerLink(bootstrap, graph.name)

    @property
    def worker_id(self) -> str:
        """Its unique name (``settings.worker_id``)."""
        return self.settings.worker_id

    @property
    def subtasks(self) -> dict[str, Subtask]:
        """The subtasks this worker hosts now, by name."""
        return {name: hosted.subtask for name, hosted in self._hosted.items()}

    async def send(self, message: FromWorker) -> None:
        """Send ``message`` to the coordinator."""
        await self._link.send(message)

    async def run(self) -> None:
        """Run until cancelled; steps in the module docstring."""
        async with self._link:
            heartbeat = asyncio.create_task(self._heartbeat())
            try:
                logger.info("worker %s ready with %s slots", self.worker_id, self.settings.slots)
                while True:
                    for message in await self._link.receive(0.1):
                        await self._on_command(message)
                    await self._report_failures()
            finally:
                heartbeat.cancel()
                await asyncio.gather(heartbeat, return_exceptions=True)
                await self._stop_subtasks()

    async def _heartbeat(self) -> None:
        eager_until = asyncio.get_running_loop().time() + EAGER_FOR_SECONDS
        while True:
            running = tuple(sorted(n for n, h in self._hosted.items() if not h.task.done()))
            counts = {n: self._counts(n) for n in running}
            await self.send(
                Heartbeat(
                    self.worker_id,
                    self.incarnation,
                    self.settings.slots,
                    self.attempt,
                    running,
                    counts,
                )
            )
            eager = self.attempt == 0 and asyncio.get_running_loop().time() < eager_until
            every = self.settings.heartbeat_seconds
            await asyncio.sleep(min(every, EAGER_BEAT_SECONDS) if eager else every)

    def _counts(self, name: str) -> dict[str, dict[str, int]]:
        """What the heartbeat reports of running subtask ``name``: its operator's counts and
        the engine's own `RECORDS_GROUP`."""
        subtask = self._hosted[name].subtask
        return {**subtask.status_counts(), RECORDS_GROUP: subtask.records_counts()}

    async def _on_command(self, message: object) -> None:
        if isinstance(message, Assign):
            if message.attempt > self.attempt and message.attempt >= self._retired_to:
                await self._assign(message)
        elif isinstance(message, Retire):
            await self._retire(message)
        elif isinstance(message, TriggerCheckpoint | CheckpointCompleted | CheckpointAborted):
            self._hand_over(message)
        elif isinstance(message, StopSubtasks):
            await self._stop(message)

    async def _stop(self, stop: StopSubtasks) -> None:
        """The job is stopping: subtasks of its attempt finish their messages and stop;
        subtasks of an older attempt (none should be left) are cancelled."""
        if stop.attempt > self.attempt:
            await self._stop_subtasks()
            self.attempt = stop.attempt  # an older assignment re-sent later must not start
        elif stop.attempt == self.attempt:
            self._hand_over(stop)

    async def _retire(self, retire: Retire) -> None:
        """Step 3 of the module docstring (answered again when the coordinator asks again)."""
        if retire.attempt > self.attempt:
            await self._stop_subtasks(retire=True)
        self._retired_to = max(self._retired_to, retire.attempt)
        await self.send(Retired(self.worker_id, retire.attempt))

    def _hand_over(self, message: ToSubtask) -> None:
        for hosted in self._hosted.values():
            hosted.link.inbox.put_nowait(message)

    async def _assign(self, assign: Assign) -> None:
        await self._stop_subtasks(retire=True)
        self.attempt = assign.attempt
        mine = assign.assignment.get(self.worker_id, ())
        manifest = None
        if assign.restore_from is not None:
            try:
                manifest = await ManifestStore(self._storage).load(assign.restore_from)
            except NotFoundError:
                # Deleted since the coordinator chose it: as unrestorable as a corrupt file.
                # Report it rather than die, so the coordinator falls back at once.
                logger.error(
                    "worker %s: the manifest of checkpoint %s is missing",
                    self.worker_id, assign.restore_from,
                )  # fmt: skip
                for name in mine:
                    reason = f"the manifest of checkpoint {assign.restore_from} is missing"
                    await self.send(SubtaskFailed(name, self.attempt, reason, assign.restore_from))
                return
        for name in mine:
            link = InboxLink(self.send)
            subtask = Subtask(
                graph=self.graph,
                subtask=SubtaskId.parse(name),
                attempt=assign.attempt,
                bootstrap=self._bootstrap,
                storage=self._storage,
                control=link,
                local_dir=self.settings.work_dir / name,
                restore=manifest.restore_point(name) if manifest else None,
                next_checkpoint_id=assign.next_checkpoint_id,
                settings=self._subtask_settings,
                registry=self._registry,
            )
            self._hosted[name] = _Hosted(
                subtask, link, asyncio.create_task(subtask.run(), name=name)
            )
        logger.info(
            "worker %s runs %s at attempt %s from checkpoint %s",
            self.worker_id, list(mine), assign.attempt, assign.restore_from,
        )  # fmt: skip

    async def _stop_subtasks(self, *, retire: bool = False) -> None:
        """Stop every hosted subtask; with ``retire``, first let each finish the calls it is
        running, for up to ``retire_seconds`` (step 3 of the module docstring)."""
        running = [h for h in self._hosted.values() if not h.task.done()]
        if retire and running:
            await asyncio.gather(
                *(h.subtask.retire(self.settings.retire_seconds) for h in running),
                return_exceptions=True,
            )
        tasks = [hosted.task for hosted in self._hosted.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._hosted.clear()

    async def _report_failures(self) -> None:
        for name, hosted in self._hosted.items():
            task = hosted.task
            if hosted.reported or not task.done() or task.cancelled():
                continue
            exc = task.exception()
            if exc is None:
                continue
            hosted.reported = True
            reason = error_text(exc)  # bounded: the error may quote a record
            logger.error("subtask %s failed: %s", name, reason)
            corrupt = exc.checkpoint_id if isinstance(exc, CorruptCheckpointError) else None
            await self.send(SubtaskFailed(name, self.attempt, reason, corrupt))

"""The coordinator of one pipeline: assignment, checkpoints, failure detection, recovery.

All decisions happen in one asyncio task without locks (`Coordinator.run`); the decisions
themselves live in small sans-IO classes (`CheckpointTracker`, the liveness and restart rules).
Workers are reached only through Kafka (`operators.runtime.control_wire`).

`run` performs, in order:

1. create the pipeline's topics; take the next attempt durably (``attempts/<A>``), so a
   restarted coordinator never reuses one: whatever was in flight is abandoned, and the
   pipeline recovers from the last completed checkpoint;
2. wait for live workers with enough slots, then assign every subtask and send `Assign`
   (attempt, checkpoint to restore, next checkpoint id) to the workers;
3. loop: read worker messages; re-send the assignment to a worker whose heartbeat disagrees;
   trigger checkpoints (barriers into every source partition), commit manifests when every
   subtask acked, broadcast ``completed(n)`` and commit the sources' group offsets; on a dead
   worker or a failed subtask, recover: new attempt, reassign to live workers, restore all.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from coordinator.checkpoints import CheckpointTracker
from coordinator.metadata import mark_triggered, next_checkpoint_id, take_attempt
from operators.graph import JobGraph
from operators.protocol.records import COORDINATOR_WRITER, RecordKind, RecordMeta, encode_headers
from operators.runtime.control import (
    Assign,
    CheckpointAborted,
    CheckpointAck,
    CheckpointCompleted,
    CheckpointDecline,
    FromWorker,
    Heartbeat,
    SubtaskFailed,
    ToWorker,
)
from operators.runtime.control_wire import (
    decode_message,
    encode_message,
    to_coordinator_topic,
    to_workers_topic,
)
from operators.runtime.manifest import CheckpointManifest, ManifestStore
from operators.runtime.topics import ensure_topics
from operators.storage import AlreadyExistsError, Storage

__all__ = ["Coordinator", "CoordinatorSettings"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorSettings:
    interval_seconds: float = 1.0
    min_pause_seconds: float = 0.0
    timeout_seconds: float = 60.0
    heartbeat_timeout_seconds: float = 6.0
    restart_delay_seconds: float = 0.5


@dataclass(slots=True)
class _WorkerState:
    incarnation: str
    slots: int
    attempt: int
    subtasks: tuple[str, ...]
    seen_at: float


class Coordinator:
    """Coordinates ``graph``'s workers through Kafka; steps in the module docstring."""

    def __init__(
        self,
        graph: JobGraph,
        *,
        bootstrap: str,
        storage: Storage,
        settings: CoordinatorSettings | None = None,
    ) -> None:
        self.graph = graph
        self._bootstrap = bootstrap
        self._storage = storage
        self._manifests = ManifestStore(storage)
        self.settings = settings or CoordinatorSettings()
        self._subtasks = [str(s) for s in graph.subtasks()]
        self._workers: dict[str, _WorkerState] = {}
        self._assignment: dict[str, tuple[str, ...]] | None = None
        self._assign: Assign | None = None
        self._tracker: CheckpointTracker | None = None
        self._producer: AIOKafkaProducer | None = None
        self._offsets: AIOKafkaConsumer | None = None
        self._recover_at: float | None = None
        self.attempt = 0
        self.state = "created"
        self.restarts = 0
        self.restore_fallbacks = 0
        self.completed: list[int] = []
        self.last_completed_at: float | None = None

    async def run(self) -> None:
        """Coordinate until cancelled; steps in the module docstring."""
        await ensure_topics(self._bootstrap, self.graph)
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap, enable_idempotence=True
        )
        await self._producer.start()
        consumer = AIOKafkaConsumer(bootstrap_servers=self._bootstrap, enable_auto_commit=False)
        await consumer.start()
        self._offsets = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            group_id=f"sluicegate.{self.graph.name}",
            enable_auto_commit=False,
        )
        await self._offsets.start()
        try:
            events = TopicPartition(to_coordinator_topic(self.graph.name), 0)
            consumer.assign([events])
            await consumer.seek_to_end(events)
            await self._new_attempt()
            while True:
                batches = await consumer.getmany(events, timeout_ms=50)
                for record in batches.get(events, []):
                    await self._on_message(decode_message(record.value))
                await self._tick(time.monotonic())
        finally:
            await consumer.stop()
            await self._offsets.stop()
            await self._producer.stop()

    # -- decisions ------------------------------------------------------------------------

    async def _tick(self, now: float) -> None:
        dead = [
            w
            for w, s in self._workers.items()
            if now - s.seen_at > self.settings.heartbeat_timeout_seconds
        ]
        for worker in dead:
            del self._workers[worker]
            if self._assigned(worker):
                await self._fail(f"worker {worker} missed its heartbeats")
        if self._recover_at is not None and now >= self._recover_at:
            self._recover_at = None
            await self._new_attempt()
        if self._assign is None and self._recover_at is None:
            await self._try_assign(now)
            return
        tracker = self._tracker
        if tracker is None or self._assign is None:
            return
        if (inject := tracker.trigger(now)) is not None:
            await self._inject(inject.checkpoint_id, inject.attempt)
        if (abort := tracker.on_tick(now)) is not None:
            logger.warning("checkpoint %s aborted: %s", abort.checkpoint_id, abort.reason)
            await self._broadcast(
                CheckpointAborted(abort.checkpoint_id, abort.attempt, abort.reason)
            )

    async def _on_message(self, message: FromWorker | ToWorker) -> None:
        now = time.monotonic()
        if isinstance(message, Heartbeat):
            worker = message.worker_id
            known = self._workers.get(worker)
            self._workers[worker] = _WorkerState(
                message.incarnation, message.slots, message.attempt, message.subtasks, now
            )
            if known is None:
                logger.info("worker %s joined with %s slots", worker, message.slots)
            elif known.incarnation != message.incarnation and self._assigned(worker):
                # Restarted under the same id: its subtasks are gone, the others run on.
                await self._fail(f"worker {worker} restarted and lost its subtasks")
                return
            if self._assign is not None and message.attempt != self._assign.attempt:
                await self._broadcast(self._assign)  # it missed the assignment: send it again
            return
        tracker = self._tracker
        if tracker is None:
            return
        if isinstance(message, CheckpointAck):
            commit = tracker.on_ack(message)
            if commit is None:
                return
            manifest = CheckpointManifest.from_acks(
                self.graph.name, commit.checkpoint_id, commit.attempt, commit.acks
            )
            try:
                await self._manifests.commit(manifest)
            except AlreadyExistsError:
                tracker.on_manifest_failed(commit.checkpoint_id, "manifest exists", now)
                return
            done = tracker.on_manifest_committed(commit.checkpoint_id, now)
            if done is not None:
                self.completed.append(done.checkpoint_id)
                self.last_completed_at = time.time()
                await self._broadcast(CheckpointCompleted(done.checkpoint_id, done.attempt))
                await self._commit_source_offsets(manifest)
        elif isinstance(message, CheckpointDecline):
            abort = tracker.on_decline(
                message.checkpoint_id, message.attempt, message.subtask, message.reason, now
            )
            if abort is not None:
                await self._broadcast(
                    CheckpointAborted(abort.checkpoint_id, abort.attempt, abort.reason)
                )
        elif isinstance(message, SubtaskFailed) and message.attempt == self.attempt:
            if message.corrupt_checkpoint is not None:
                logger.error(
                    "checkpoint %s is corrupt (%s): falling back to the previous checkpoint",
                    message.corrupt_checkpoint, message.reason,
                )  # fmt: skip
                await self._manifests.mark_corrupt(message.corrupt_checkpoint, message.reason)
                self.restore_fallbacks += 1
            await self._fail(f"subtask {message.subtask} failed: {message.reason}")

    def _assigned(self, worker: str) -> bool:
        return bool(self._assignment and self._assignment.get(worker))

    async def _fail(self, reason: str) -> None:
        if self._recover_at is not None:
            return
        logger.warning("recovering pipeline %s: %s", self.graph.name, reason)
        self.state = "recovering"
        self.restarts += 1
        self._assign = None
        self._assignment = None
        self._recover_at = time.monotonic() + self.settings.restart_delay_seconds

    async def _new_attempt(self) -> None:
        """Take the next attempt durably and prepare the tracker for it."""
        attempt = self.attempt = await take_attempt(self._storage)
        self._tracker = CheckpointTracker(
            subtasks=self._subtasks,
            next_checkpoint_id=await next_checkpoint_id(self._storage),
            attempt=attempt,
            interval_seconds=self.settings.interval_seconds,
            min_pause_seconds=self.settings.min_pause_seconds,
            timeout_seconds=self.settings.timeout_seconds,
        )
        logger.info("pipeline %s: attempt %s", self.graph.name, attempt)

    async def _try_assign(self, now: float) -> None:
        live = sorted(self._workers.items())
        if sum(s.slots for _, s in live) < len(self._subtasks):
            return
        assignment: dict[str, list[str]] = {w: [] for w, _ in live}
        free = {w: s.slots for w, s in live}
        workers = [w for w, _ in live]
        i = 0
        for subtask in self._subtasks:
            while free[workers[i % len(workers)]] == 0:
                i += 1
            worker = workers[i % len(workers)]
            assignment[worker].append(subtask)
            free[worker] -= 1
            i += 1
        latest = await self._manifests.latest()
        assert self._tracker is not None
        self._assignment = {w: tuple(s) for w, s in assignment.items()}
        self._assign = Assign(
            attempt=self.attempt,
            restore_from=latest.checkpoint_id if latest else None,
            next_checkpoint_id=self._tracker.next_checkpoint_id,
            assignment=self._assignment,
        )
        self.state = "running"
        await self._broadcast(self._assign)
        logger.info(
            "attempt %s assigned from checkpoint %s: %s",
            self.attempt, self._assign.restore_from, self._assignment,
        )  # fmt: skip

    # -- I/O ------------------------------------------------------------------------------

    async def _broadcast(self, message: ToWorker) -> None:
        assert self._producer is not None
        await self._producer.send_and_wait(
            to_workers_topic(self.graph.name), encode_message(message), partition=0
        )

    async def _inject(self, checkpoint_id: int, attempt: int) -> None:
        assert self._producer is not None
        await mark_triggered(self._storage, checkpoint_id)
        meta = RecordMeta(
            attempt, checkpoint_id, COORDINATOR_WRITER, RecordKind.BARRIER, checkpoint_id
        )
        headers = encode_headers(meta)
        for source in self.graph.sources():
            for p in range(source.partitions):
                await self._producer.send(source.name, b"", partition=p, headers=headers)
        await self._producer.flush()

    async def _commit_source_offsets(self, manifest: CheckpointManifest) -> None:
        """Commit ``R_p`` of every source partition for lag tools (never read back by us)."""
        offsets: dict[TopicPartition, int] = {}
        sources = {s.name for s in self.graph.sources()}
        for snapshot in manifest.subtasks.values():
            for topic, partitions in snapshot.positions.items():
                if topic in sources:
                    offsets.update({TopicPartition(topic, p): o for p, o in partitions.items()})
        if offsets and self._offsets is not None:
            self._offsets.assign(list(offsets))
            await self._offsets.commit(offsets)

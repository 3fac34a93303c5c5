"""One subtask: an operator's parallel instance reading its partitions, keeping its state,
aligning barriers, snapshotting, and writing its outputs.

`Subtask.run` performs, in order:

1. open the state: restore it from the `RestorePoint` (the local copy when it is still on
   disk, else a verified download) or create it empty;
2. start the idempotent producer (records and markers), then open the `Sink` of each sink
   topic the operator writes (`operators.runtime.sinks`) with the restored checkpoint: an
   exactly-once sink fences older producers of this sink subtask and publishes the outputs of
   checkpoints up to the restored one that were not published yet;
3. open the `Operator` (it schedules the wake-ups its restored state calls for);
4. assign the input partitions (no consumer group) and seek each to ``R_p`` of the restore
   point, or to the beginning;
5. loop: handle control messages (``trigger``: barrier n on every source channel at the read
   position; ``completed``, ``aborted``, ``stop``), settle the sinks' background work
   (`Sink.poll`: an exactly-once sink's transaction runs beside the loop), fetch records,
   classify each (`Inputs`: source data, or records of the job's own topics through the
   `RestoreFilter`) and pass it through the `BarrierAligner` to processing (`OperatorCalls`:
   a synchronous process function is called directly when no barrier is being aligned), run
   the wake-ups that are due, then ship the outputs gathered; ``stop`` ends the loop (the job
   is stopping) and `run` returns.

Emitted records, barrier markers and dead letters go out through `Outputs`
(`operators.runtime.outputs`): to a sink topic's `Sink`, or through the producer stamped with
the writer's attempt, interval and pipeline, in one batch per partition until shipped. On
``completed(n)`` the sinks hear of it first (`Sink.on_completed`), then the operator.

On barrier alignment (`_snapshot`): drain the calls in flight; tell the operator and the sinks
(`on_snapshot`); take the local RocksDB checkpoint (write batch flushed, hard links); bump the
writer interval to ``n+1``; write barrier ``n`` to every partition of every output topic; then
(in the caller) process the released buffer. The asynchronous phase runs in a task: flush the
producer (every record of interval ≤ n is in Kafka before the ack), upload the new files, ack
with the state handle and ``R_p``.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from aiokafka import (
    AIOKafkaConsumer,
    AIOKafkaProducer,
    ConsumerRecord,
    TopicPartition as KafkaTopicPartition,
)
from prometheus_client import CollectorRegistry

from sluicegate.operators.graph import JobGraph, SubtaskId
from sluicegate.operators.kafka import KafkaLike, clients as kafka_clients
from sluicegate.operators.metrics import FetchedPositions, SubtaskMetrics
from sluicegate.operators.protocol.alignment import (
    Aborted,
    Aligned,
    BarrierAligner,
    Buffered,
    Decline,
)
from sluicegate.operators.protocol.channels import Channel, TopicPartition
from sluicegate.operators.protocol.messages import (
    CheckpointAborted,
    CheckpointAck,
    CheckpointCompleted,
    CheckpointDecline,
    RestorePoint,
    StopSubtasks,
    TriggerCheckpoint,
)
from sluicegate.operators.protocol.records import SOURCE_WRITER
from sluicegate.operators.protocol.restore_filter import Fenced, RestoreFilter
from sluicegate.operators.runtime.batches import PartitionBatches
from sluicegate.operators.runtime.calls import OperatorCalls
from sluicegate.operators.runtime.changelog_snapshots import ChangelogSnapshots
from sluicegate.operators.runtime.closing import close_quietly
from sluicegate.operators.runtime.context import OperatorOpenContext
from sluicegate.operators.runtime.control import ControlLink
from sluicegate.operators.runtime.exceptions import (
    CorruptCheckpointError,
    SinkProgressError,
    SubtaskFencedError,
)
from sluicegate.operators.runtime.inputs import BarrierAt, Inputs, Rejected
from sluicegate.operators.runtime.outputs import Outputs
from sluicegate.operators.runtime.sinks import Sink, build_sinks
from sluicegate.operators.runtime.state_transfer import (
    Restored,
    Snapshots,
    SnapshotStore,
    fetch,
    sst_checksums,
)
from sluicegate.operators.runtime.wakes import poll_timeout_ms
from sluicegate.operators.specs import TopicKind
from sluicegate.operators.state.changelog import ChangelogFormatError
from sluicegate.operators.state.local_checkpoint import LocalCheckpoint, prune_local_checkpoints
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.state.store import PartitionState
from sluicegate.operators.storage import CorruptFileError, NotFoundError, Storage, StorageError

__all__ = [
    "CorruptCheckpointError",
    "SinkProgressError",
    "Subtask",
    "SubtaskFencedError",
    "SubtaskSettings",
]

logger = logging.getLogger(__name__)

_YIELD_EVERY = 100

Incoming: TypeAlias = ConsumerRecord[bytes, bytes]
Classified: TypeAlias = Channel | BarrierAt | Rejected | Fenced | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SubtaskSettings:
    max_buffered: int = 100_000
    """Records buffered during alignment before the checkpoint is declined."""
    max_in_flight: int = 64
    """Async process-function calls running at once."""
    fetch_timeout_ms: int = 50
    """How long one fetch from Kafka waits for records when the subtask has nothing else to do."""
    fetch_max_records: int = 2000
    """The most records one fetch returns."""
    keep_local_checkpoints: int = 2
    """Local RocksDB checkpoints kept on disk after a checkpoint completes (the newest ones)."""
    state_changelog: bool = False
    """Checkpoint the state as a changelog of each interval's writes and RocksDB files
    materialized in the background (:mod:`operators.runtime.changelog_snapshots`)."""


class Subtask:
    """One parallel instance of an operator; steps in the module docstring."""

    def __init__(
        self,
        *,
        graph: JobGraph,
        subtask: SubtaskId,
        attempt: int,
        bootstrap: KafkaLike,
        storage: Storage,
        control: ControlLink,
        local_dir: Path,
        restore: RestorePoint | None = None,
        next_checkpoint_id: int | None = None,
        settings: SubtaskSettings | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        """``next_checkpoint_id``: the id the coordinator triggers next (default: the restored
        checkpoint's plus one). A record's interval is the checkpoint whose barrier follows it,
        so this is the writer's first interval. ``registry``: where `SubtaskMetrics` are
        reported (default: the global one)."""
        self.graph, self.id, self.attempt = graph, subtask, attempt
        self.name = str(subtask)
        self._metrics = SubtaskMetrics.of(registry).bind(graph.name, subtask.uid, self.name)
        self._spec = graph.operators[subtask.uid]
        self._bootstrap = bootstrap
        self._control = control
        self._local_dir = local_dir
        self._restore = restore
        self._settings = settings or SubtaskSettings()
        self._storage = storage
        self._snapshots: Snapshots = (
            ChangelogSnapshots(
                storage, self._checkpoints_dir, on_materialized=self._metrics.materialized_bytes.inc
            )
            if self._settings.state_changelog
            else SnapshotStore(storage, uploaded=sst_checksums(restore.handle) if restore else None)
        )
        restored = restore.checkpoint_id if restore else None
        restored_id = restored or 0
        sources = {t.name for t in graph.sources()}
        self._inputs = Inputs(
            graph.name,
            graph.channels(subtask),
            [p for p in graph.input_partitions(subtask) if p.topic in sources],
            RestoreFilter(attempt, restored_checkpoint_id=restored),
        )
        self._aligner: BarrierAligner[Incoming] = BarrierAligner(
            graph.channels(subtask),
            max_buffered=self._settings.max_buffered,
            last_checkpoint_id=restored_id,
        )
        self.interval = next_checkpoint_id or restored_id + 1
        self._operator = self._spec.factory()
        self._owned = set(graph.input_partitions(subtask))
        self._align_started: float | None = None
        self._upload: asyncio.Task[None] | None = None
        self._store: RocksDBStateStore | None = None
        self._states: dict[tuple[str, int], PartitionState] = {}  # handles of ``_store``
        self._calls = OperatorCalls(
            self.name,
            self._operator,
            uid=subtask.uid,
            outputs_allowed=set(self._spec.outputs),
            owned=self._owned,
            states=self._state_of,
            interval=lambda: self.interval,
            dead_letter=self._dead_letter,
            max_in_flight=self._settings.max_in_flight,
        )
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._sinks: dict[str, Sink] = {}
        """sink topic -> its sink; topics may share one"""
        self._distinct_sinks: list[Sink] = []
        """Every sink once (topics may share one), in the order of the operator's outputs."""
        self.records_in = 0
        self._outputs: Outputs | None = None
        self._stop_requested = False

    async def run(self) -> None:
        """Run until stopped, cancelled, fenced or failed; steps in the module docstring."""
        self._metrics.start()
        try:
            await self._open_state()
            await self._start_producers()
            await self._operator.open(self._open_context())
            await self._start_consumer()
            logger.info("%s running at attempt %s", self.name, self.attempt)
            while not self._stop_requested:
                await self._handle_control()
                if not self._stop_requested:
                    await self._fetch_once()
            logger.info("%s stopped: the job is stopping", self.name)
        finally:
            await self._close()

    async def retire(self, timeout_s: float) -> None:
        """This subtask is being replaced (a newer attempt): let the process-function and
        wake-up calls already running finish, within ``timeout_s``, and start no other. An agent's
        tool call in flight then journals its outcome instead of being cut off and called again
        by the next attempt. The caller cancels the subtask afterwards; nothing it does from
        now on is part of any checkpoint."""
        left = await self._calls.executor.retire(timeout_s)
        if left:
            logger.warning(
                "%s: %s calls still running after %.0f s are cancelled", self.name, left, timeout_s
            )

    def status_counts(self) -> dict[str, dict[str, int]]:
        """The operator's `Operator.status_counts`, copied (the heartbeat sends them); empty
        if they fail, which must not stop the heartbeats."""
        try:
            return {group: dict(c) for group, c in self._operator.status_counts().items()}
        except Exception:
            logger.warning("%s: status_counts failed", self.name, exc_info=True)
            return {}

    # -- start and stop -------------------------------------------------------------------

    async def _open_state(self) -> None:
        db_dir = self._local_dir / "db"
        shutil.rmtree(db_dir, ignore_errors=True)
        if self._restore is None:
            self._store = RocksDBStateStore.open(db_dir)
            self._snapshots.attach(self._store, None)
            self._states.clear()
            return
        try:
            source = await fetch(self._storage, self._restore.handle, self._checkpoints_dir)
        except CorruptFileError as exc:
            raise CorruptCheckpointError(self._restore.checkpoint_id, exc.path) from exc
        except NotFoundError as exc:
            # A file the manifest lists is gone (deleted by hand, a lost bucket object, a
            # retention bug): as unrestorable as a corrupt one, so the same fallback applies.
            raise CorruptCheckpointError(
                self._restore.checkpoint_id, exc.path, missing=True
            ) from exc
        try:
            self._store = RocksDBStateStore.restore(source, db_dir)
        except ChangelogFormatError as exc:
            raise CorruptCheckpointError(self._restore.checkpoint_id, exc.path.name) from exc
        self._snapshots.attach(self._store, Restored(source, self._restore.handle))
        self._states.clear()

    async def _start_producers(self) -> None:
        assert self._store is not None
        self._producer = kafka_clients.producer(
            self._bootstrap, enable_idempotence=True, linger_ms=5
        )
        await self._producer.start()
        batches = PartitionBatches(self._producer)
        self._sinks = build_sinks(
            self.graph,
            self.id,
            bootstrap=self._bootstrap,
            appender=batches,
            metadata=self._store.metadata(),
        )
        self._distinct_sinks = list(dict.fromkeys(self._sinks.values()))
        self._outputs = self._calls.outputs = Outputs(
            self.graph,
            self.id,
            attempt=self.attempt,
            producer=self._producer,
            batches=batches,
            sinks=self._sinks,
            metrics=self._metrics,
        )
        restored = self._restore.checkpoint_id if self._restore else None
        for sink in self._distinct_sinks:
            await sink.open(restored)

    async def _start_consumer(self) -> None:
        self._consumer = kafka_clients.consumer(
            self._bootstrap,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
        )
        await self._consumer.start()
        self._lag = FetchedPositions(self._consumer)
        partitions = self.graph.input_partitions(self.id)
        self._consumer.assign([KafkaTopicPartition(p.topic, p.partition) for p in partitions])
        for p in partitions:
            tp = KafkaTopicPartition(p.topic, p.partition)
            if self._restore is not None and p in self._restore.positions:
                self._consumer.seek(tp, self._restore.positions[p])
                self._lag.seen(p.topic, p.partition, self._restore.positions[p])
            else:
                await self._consumer.seek_to_beginning(tp)
            if self.graph.topics[p.topic].kind is TopicKind.SOURCE:
                position = await self._consumer.position(tp)
                self._inputs.source_next[p] = position
                self._lag.seen(p.topic, p.partition, position)

    async def _close(self) -> None:
        """Release everything, whatever fails on the way: the state store above all, whose
        lock would stop the next attempt's subtask in this worker from opening it."""
        try:
            await self._calls.executor.cancel()
            await close_quietly(self.name, "operator", self._operator.close())
            if self._upload is not None and not self._upload.done():
                self._upload.cancel()
                await asyncio.gather(self._upload, return_exceptions=True)
            await close_quietly(self.name, "snapshots", self._snapshots.close())
            for closer in (self._consumer, self._producer):
                if closer is not None:
                    await close_quietly(self.name, type(closer).__name__, closer.stop())
            for sink in self._distinct_sinks:
                await close_quietly(self.name, type(sink).__name__, sink.close())
        finally:
            if self._store is not None:
                self._store.close()
            self._metrics.close()

    # -- the loop -------------------------------------------------------------------------

    async def _handle_control(self) -> None:
        while (message := self._control.poll()) is not None:
            if message.attempt != self.attempt:
                continue
            if isinstance(message, TriggerCheckpoint):
                await self._on_trigger(message.checkpoint_id)
            elif isinstance(message, CheckpointCompleted):
                await self._on_completed(message.checkpoint_id)
            elif isinstance(message, StopSubtasks):
                self._stop_requested = True
                return  # later messages are of no use to a subtask that stops
            elif isinstance(message, CheckpointAborted):
                aborted = self._aligner.on_abort(message.checkpoint_id)
                if aborted is not None:
                    logger.info("%s dropped alignment: %s", self.name, aborted.reason)
                    self._align_started = None
                    await self._process_released()

    async def _fetch_once(self) -> None:
        assert self._consumer is not None
        assert self._outputs is not None
        if self._upload is not None and self._upload.done():
            self._upload.result()  # an upload failure fails the subtask
        for sink in self._distinct_sinks:
            sink.poll()  # a failed publication fails the subtask
        batches = await self._consumer.getmany(
            timeout_ms=poll_timeout_ms(
                self._settings.fetch_timeout_ms,
                busy=self._calls.executor.in_flight > 0,
                next_wake=self._calls.wakes.next_due(),
                now=time.monotonic(),
            ),
            max_records=self._settings.fetch_max_records,
        )
        for tp, fetched in batches.items():
            if fetched:
                self._lag.seen(tp.topic, tp.partition, fetched[-1].offset + 1)
        await self._metrics.on_fetch(self._lag, self._aligner.buffered)
        for records in batches.values():
            self.records_in += len(records)
            self._metrics.records_in.inc(len(records))
            for n, record in enumerate(records, start=1):
                what = self._inputs.classify(record)
                if self._calls.direct and type(what) is Channel and self._aligner.aligning is None:
                    # The common case, without a coroutine: a synchronous process function,
                    # a data record, no barrier being aligned.
                    if (failure := self._calls.call_now(record)) is not None:
                        await self._dead_letter(record, failure)
                else:
                    await self._on_record(record, what)
                if n % _YIELD_EVERY == 0:
                    # A sync process function never awaits: let heartbeats and control run.
                    await asyncio.sleep(0)
        await self._calls.run_due_wakes()
        await self._outputs.ship()
        self._calls.executor.raise_failure()

    async def _on_record(self, record: Incoming, what: Classified) -> None:
        if type(what) is Channel:
            if self._aligner.aligning is None:  # no barrier to align: the common case
                await self._calls.process(record)
                return
            action = self._aligner.on_record(what, record)
            if isinstance(action, Buffered):
                return
            if isinstance(action, Decline):
                await self._decline(action)
                return
            await self._calls.process(record)
        elif isinstance(what, BarrierAt):
            await self._on_barrier(what.channel, what.checkpoint_id, what.offset)
        elif isinstance(what, Rejected):
            await self._dead_letter(record, what.reason)
        elif isinstance(what, Fenced):
            raise SubtaskFencedError(self.name, self.attempt, what.newer_attempt)

    async def _on_trigger(self, checkpoint_id: int) -> None:
        """Barrier ``checkpoint_id`` arrives on every source channel, right before the next
        record this subtask would read there: ``R_p`` is that record's offset."""
        for partition, position in sorted(self._inputs.source_next.items()):
            await self._on_barrier(Channel(partition, SOURCE_WRITER), checkpoint_id, position)

    async def _on_barrier(self, channel: Channel, checkpoint_id: int, offset: int) -> None:
        for action in self._aligner.on_barrier(channel, checkpoint_id, offset):
            if isinstance(action, Aborted):
                logger.info("%s dropped alignment: %s", self.name, action.reason)
            elif isinstance(action, Aligned):
                await self._snapshot(action)
            self._align_started = None
            await self._process_released()
        if self._aligner.aligning is not None and self._align_started is None:
            self._align_started = time.perf_counter()

    async def _decline(self, action: Decline) -> None:
        logger.warning(
            "%s declines checkpoint %s: %s", self.name, action.checkpoint_id, action.reason
        )
        self._align_started = None
        await self._control.send(
            CheckpointDecline(self.name, action.checkpoint_id, self.attempt, action.reason)
        )
        await self._process_released()

    async def _process_released(self) -> None:
        for record in self._aligner.release():
            await self._calls.process(record)

    # -- processing -----------------------------------------------------------------------

    def _open_context(self) -> OperatorOpenContext:
        owned = self._spec.owned_topics
        return OperatorOpenContext(
            subtask=self.name,
            attempt=self.attempt,
            bootstrap=self._bootstrap,
            input_partitions=[(p.topic, p.partition) for p in sorted(self._owned)],
            owned_topics={
                t.suffix: self._spec.owned_topic_name(self.graph.name, t.suffix) for t in owned
            },
            storage=self._storage,
            _states=self._state_of,
            _schedule=self._calls.schedule_wake,
            _clock=time.monotonic,
        )

    def _state_of(self, topic: str, partition: int) -> PartitionState:
        if (state := self._states.get((topic, partition))) is None:
            assert self._store is not None
            if TopicPartition(topic, partition) not in self._owned:
                raise ValueError(f"{self.name} does not read {topic}[{partition}]")
            state = self._states[topic, partition] = self._store.partition(topic, partition)
        return state

    async def _dead_letter(self, incoming: Incoming, error: Exception) -> None:
        assert self._outputs is not None
        await self._outputs.dead_letter(incoming, error)

    @property
    def records_out(self) -> int:
        """Records emitted by this subtask."""
        return self._outputs.records_out if self._outputs else 0

    @property
    def dead_letters(self) -> int:
        """Input records this subtask dead-lettered."""
        return self._outputs.dead_letters if self._outputs else 0

    # -- checkpoints ----------------------------------------------------------------------

    @property
    def _checkpoints_dir(self) -> Path:
        return self._local_dir / "checkpoints"

    async def _snapshot(self, aligned: Aligned) -> None:
        assert self._store is not None
        assert self._producer is not None
        n = aligned.checkpoint_id
        # None: aligned by the barrier that started the alignment (one channel), no wait.
        aligning = self._align_started
        alignment_s = 0.0 if aligning is None else max(time.perf_counter() - aligning, 0.0)
        await self._calls.executor.drain()
        self._operator.on_snapshot(n)
        for sink in self._distinct_sinks:
            sink.on_snapshot(n)
        if self._upload is not None:
            await self._upload  # at most one upload at a time; normally long finished
        started = time.perf_counter()
        local = await self._snapshots.take(self._store, n, self._checkpoints_dir)
        self.interval = n + 1
        assert self._outputs is not None
        await self._outputs.barrier(n)
        sync_s = time.perf_counter() - started
        positions = dict(aligned.positions)
        self._upload = asyncio.create_task(
            self._upload_and_ack(local, positions, alignment_s, sync_s)
        )

    async def _upload_and_ack(
        self,
        local: LocalCheckpoint,
        positions: dict[TopicPartition, int],
        alignment_s: float,
        sync_s: float,
    ) -> None:
        assert self._producer is not None
        await self._producer.flush()
        try:
            result = await self._snapshots.upload(local)
        except StorageError as exc:
            # Storage may be back by the next checkpoint: decline this one, keep running (a
            # failed subtask would cost a global recovery per failed upload).
            n = local.inventory.checkpoint_id
            logger.warning("%s declines checkpoint %s: upload failed: %s", self.name, n, exc)
            reason = f"upload failed: {exc}"
            await self._control.send(CheckpointDecline(self.name, n, self.attempt, reason))
            return
        ack = CheckpointAck(
            subtask=self.name,
            checkpoint_id=local.inventory.checkpoint_id,
            attempt=self.attempt,
            positions=positions,
            handle=result.handle,
            alignment_seconds=alignment_s,
            sync_seconds=sync_s,
            async_seconds=result.seconds,
        )
        self._metrics.on_ack(alignment_s, sync_s, result.seconds)
        await self._control.send(ack)

    async def _on_completed(self, checkpoint_id: int) -> None:
        for sink in self._distinct_sinks:
            await sink.on_completed(checkpoint_id)
        await self._operator.on_completed(checkpoint_id)
        keep = self._settings.keep_local_checkpoints
        prune_local_checkpoints(self._checkpoints_dir, keep=keep, completed=checkpoint_id)

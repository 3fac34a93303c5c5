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

Steps 1-4 build every part at once (`RunningSubtask`, `operators.runtime.running`), each one
registered to be closed, in reverse, however the subtask ends; step 5 is `RunningSubtask.loop`.
On barrier alignment it runs the synchronous phase of `operators.protocol.snapshot` (drain the
calls, tell the operator and sinks; take the local RocksDB checkpoint; barrier ``n`` to every
output partition, the writer's interval now ``n+1``; start the asynchronous phase: flush the
producer, upload the new files, ack with the state handle and ``R_p``), then processes the
released buffer.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition as KafkaTopicPartition
from prometheus_client import CollectorRegistry

from sluicegate.operators.graph import JobGraph, SubtaskId
from sluicegate.operators.kafka import KafkaLike, clients as kafka_clients
from sluicegate.operators.metrics import FetchedPositions, SubtaskMetrics
from sluicegate.operators.protocol.alignment import BarrierAligner
from sluicegate.operators.protocol.channels import TopicPartition
from sluicegate.operators.protocol.messages import RestorePoint
from sluicegate.operators.protocol.restore_filter import RestoreFilter
from sluicegate.operators.runtime.batches import PartitionBatches
from sluicegate.operators.runtime.calls import OperatorCalls
from sluicegate.operators.runtime.changelog_snapshots import ChangelogSnapshots
from sluicegate.operators.runtime.closing import close_quietly
from sluicegate.operators.runtime.context import OperatorOpenContext
from sluicegate.operators.runtime.control import ControlLink
from sluicegate.operators.runtime.exceptions import (
    CorruptCheckpointError,
)
from sluicegate.operators.runtime.inputs import Inputs
from sluicegate.operators.runtime.outputs import Outputs
from sluicegate.operators.runtime.running import Incoming, LoopSettings, RunningSubtask
from sluicegate.operators.runtime.sinks.building import build_sinks
from sluicegate.operators.runtime.snapshot_tracing import SnapshotTracing
from sluicegate.operators.runtime.state_transfer import (
    Restored,
    Snapshots,
    SnapshotStore,
    fetch,
    sst_checksums,
)
from sluicegate.operators.specs import TopicKind
from sluicegate.operators.state.changelog import ChangelogFormatError
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.state.store import PartitionState
from sluicegate.operators.storage import CorruptFileError, NotFoundError, Storage
from sluicegate.operators.tracing import tracer

__all__ = ["Subtask", "SubtaskSettings"]

logger = logging.getLogger(__name__)


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
        self._bootstrap, self._storage, self._control = bootstrap, storage, control
        self._local_dir, self._restore = local_dir, restore
        self._settings = settings or SubtaskSettings()
        restored = restore.checkpoint_id if restore else None
        self._first_interval = next_checkpoint_id or (restored or 0) + 1
        self._operator = self._spec.factory()
        self._owned = set(graph.input_partitions(subtask))
        self._running: RunningSubtask | None = None
        """Set by `run` once every part is open."""

    async def run(self) -> None:
        """Run until stopped, cancelled, fenced or failed; steps in the module docstring."""
        self._metrics.start()
        try:
            async with AsyncExitStack() as closing:
                self._running = running = await self._start(closing)
                logger.info("%s running at attempt %s", self.name, self.attempt)
                await running.loop()
                logger.info("%s stopped: the job is stopping", self.name)
        finally:
            self._metrics.close()

    async def retire(self, timeout_s: float) -> None:
        """This subtask is being replaced (a newer attempt): let the process-function and
        wake-up calls already running finish, within ``timeout_s``, and start no other. An agent's
        tool call in flight then journals its outcome instead of being cut off and called again
        by the next attempt. The caller cancels the subtask afterwards; nothing it does from
        now on is part of any checkpoint."""
        if self._running is None:
            return  # still starting: no call runs yet
        left = await self._running.calls.executor.retire(timeout_s)
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

    @property
    def records_in(self) -> int:
        """Records this subtask read."""
        return self._running.records_in if self._running else 0

    @property
    def records_out(self) -> int:
        """Records emitted by this subtask."""
        return self._running.outputs.records_out if self._running else 0

    def records_counts(self) -> dict[str, int]:
        """`RECORDS_GROUP` of the heartbeat: records in and out, and the lag once read."""
        counts = {"in": self.records_in, "out": self.records_out}
        lag = self._running.metrics.lag_records if self._running else None
        if lag is not None:
            counts["lag"] = lag
        return counts

    @property
    def dead_letters(self) -> int:
        """Input records this subtask dead-lettered."""
        return self._running.outputs.dead_letters if self._running else 0

    # -- steps 1 to 4: every part, open, each registered with ``closing`` ------------------

    async def _start(self, closing: AsyncExitStack) -> RunningSubtask:
        name, graph, settings = self.name, self.graph, self._settings
        restored = self._restore.checkpoint_id if self._restore else None
        checkpoints_dir = self._local_dir / "checkpoints"
        snapshots = self._snapshots(checkpoints_dir)
        store = await self._open_state(snapshots, checkpoints_dir)
        closing.callback(store.close)  # last of all: its lock would stop the next attempt
        closing.push_async_callback(close_quietly, name, "snapshots", snapshots.close())
        states: dict[tuple[str, int], PartitionState] = {}

        def state_of(topic: str, partition: int) -> PartitionState:
            if (state := states.get((topic, partition))) is None:
                if TopicPartition(topic, partition) not in self._owned:
                    raise ValueError(f"{name} does not read {topic}[{partition}]")
                state = states[topic, partition] = store.partition(topic, partition)
            return state

        producer = kafka_clients.producer(
            self._bootstrap,
            enable_idempotence=True,
            linger_ms=5,
            max_batch_size=kafka_clients.BATCH_BYTES,
        )
        closing.push_async_callback(close_quietly, name, "producer", producer.stop())
        await producer.start()  # a cancel during the start leaves it to be stopped too
        batches = PartitionBatches(producer)
        by_topic = build_sinks(
            graph, self.id, bootstrap=self._bootstrap, appender=batches, metadata=store.metadata()
        )
        sinks = list(dict.fromkeys(by_topic.values()))
        for sink in sinks:
            closing.push_async_callback(close_quietly, name, type(sink).__name__, sink.close())
        outputs = Outputs(
            graph,
            self.id,
            attempt=self.attempt,
            interval=self._first_interval,
            producer=producer,
            batches=batches,
            sinks=by_topic,
            metrics=self._metrics,
        )
        for sink in sinks:
            await sink.open(restored)

        async def dead_letter(incoming: Incoming, error: Exception) -> None:
            await outputs.dead_letter(incoming, error)

        calls = OperatorCalls(
            name,
            self._operator,
            uid=self.id.uid,
            outputs_allowed=set(self._spec.outputs),
            owned=self._owned,
            states=state_of,
            outputs=outputs,
            dead_letter=dead_letter,
            max_in_flight=settings.max_in_flight,
        )
        closing.push_async_callback(close_quietly, name, "operator", self._operator.close())
        closing.push_async_callback(calls.executor.cancel)  # before the operator closes
        await self._operator.open(self._open_context(state_of, calls))
        inputs = self._inputs(restored)
        consumer = kafka_clients.consumer(
            self._bootstrap,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
        )
        closing.push_async_callback(close_quietly, name, "consumer", consumer.stop())
        await consumer.start()
        lag = FetchedPositions(consumer)
        await self._seek(consumer, lag, inputs)
        running = RunningSubtask(
            name=name,
            attempt=self.attempt,
            settings=LoopSettings(
                fetch_timeout_ms=settings.fetch_timeout_ms,
                fetch_max_records=settings.fetch_max_records,
                keep_local_checkpoints=settings.keep_local_checkpoints,
            ),
            control=self._control,
            metrics=self._metrics,
            operator=self._operator,
            inputs=inputs,
            aligner=BarrierAligner(
                graph.channels(self.id),
                max_buffered=settings.max_buffered,
                last_checkpoint_id=restored or 0,
            ),
            store=store,
            snapshots=snapshots,
            checkpoints_dir=checkpoints_dir,
            producer=producer,
            sinks=sinks,
            outputs=outputs,
            calls=calls,
            consumer=consumer,
            lag=lag,
            tracing=SnapshotTracing(tracer("sluicegate.operators"), pipeline=self.graph.name),
        )
        closing.push_async_callback(running.cancel_upload)  # first of all
        return running

    def _snapshots(self, checkpoints_dir: Path) -> Snapshots:
        if self._settings.state_changelog:
            on_materialized = self._metrics.materialized_bytes.inc
            return ChangelogSnapshots(
                self._storage, checkpoints_dir, on_materialized=on_materialized
            )
        uploaded = sst_checksums(self._restore.handle) if self._restore else None
        return SnapshotStore(self._storage, uploaded=uploaded)

    async def _open_state(self, snapshots: Snapshots, checkpoints_dir: Path) -> RocksDBStateStore:
        """Step 1: the state restored from the restore point (the local copy when it is still
        on disk, else a verified download), or a new one."""
        db_dir = self._local_dir / "db"
        shutil.rmtree(db_dir, ignore_errors=True)
        restore = self._restore
        if restore is None:
            store = RocksDBStateStore.open(db_dir)
            snapshots.attach(store, None)
            return store
        try:
            source = await fetch(self._storage, restore.handle, checkpoints_dir)
        except CorruptFileError as exc:
            raise CorruptCheckpointError(restore.checkpoint_id, exc.path) from exc
        except NotFoundError as exc:
            # A file the manifest lists is gone (deleted by hand, a lost bucket object, a
            # retention bug): as unrestorable as a corrupt one, so the same fallback applies.
            raise CorruptCheckpointError(restore.checkpoint_id, exc.path, missing=True) from exc
        try:
            store = RocksDBStateStore.restore(source, db_dir)
        except ChangelogFormatError as exc:
            raise CorruptCheckpointError(restore.checkpoint_id, exc.path.name) from exc
        snapshots.attach(store, Restored(source, restore.handle))
        return store

    def _inputs(self, restored: int | None) -> Inputs:
        sources = {t.name for t in self.graph.sources()}
        return Inputs(
            self.graph.name,
            self.graph.channels(self.id),
            [p for p in self.graph.input_partitions(self.id) if p.topic in sources],
            RestoreFilter(self.attempt, restored_checkpoint_id=restored),
        )

    async def _seek(
        self, consumer: AIOKafkaConsumer, lag: FetchedPositions, inputs: Inputs
    ) -> None:
        """Step 4: assign the input partitions, each at ``R_p`` of the restore point or at the
        beginning; note the read position of every source partition."""
        partitions = self.graph.input_partitions(self.id)
        consumer.assign([KafkaTopicPartition(p.topic, p.partition) for p in partitions])
        if self._restore is not None:
            await self._warn_of_deleted(consumer, self._restore.positions)
        for p in partitions:
            tp = KafkaTopicPartition(p.topic, p.partition)
            if self._restore is not None and p in self._restore.positions:
                consumer.seek(tp, self._restore.positions[p])
                lag.seen(p.topic, p.partition, self._restore.positions[p])
            else:
                await consumer.seek_to_beginning(tp)
            if self.graph.topics[p.topic].kind is TopicKind.SOURCE:
                position = await consumer.position(tp)
                inputs.source_next[p] = position
                lag.seen(p.topic, p.partition, position)

    async def _warn_of_deleted(
        self, consumer: AIOKafkaConsumer, positions: Mapping[TopicPartition, int]
    ) -> None:
        """Say so, loudly, when records past a restored position are gone from the log (the
        topic's retention, or records deleted by hand, ran ahead of a job that was down): the
        reader goes on from the oldest record left, and nothing else would tell."""
        mine = {
            KafkaTopicPartition(p.topic, p.partition): offset
            for p in self.graph.input_partitions(self.id)
            if (offset := positions.get(p)) is not None
        }
        if not mine:
            return
        starts = await consumer.beginning_offsets(list(mine))
        for tp, offset in sorted(mine.items()):
            if offset < (start := starts[tp]):
                logger.warning(
                    "%s: %d records of %s[%d] (offsets %d to %d) were deleted from the log "
                    "before this job read them; it goes on from offset %d. Keep the topic's "
                    "retention (retention.ms, and record timestamps within it) longer than the "
                    "job may be down",
                    self.name, start - offset, tp.topic, tp.partition, offset, start - 1, start,
                )  # fmt: skip

    def _open_context(
        self, states: Callable[[str, int], PartitionState], calls: OperatorCalls
    ) -> OperatorOpenContext:
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
            _states=states,
            _schedule=calls.schedule_wake,
            _clock=time.monotonic,
        )

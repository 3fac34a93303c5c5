"""`RunningSubtask`: a subtask once its parts are open, and its loop.

`operators.runtime.subtask.Subtask.run` opens the parts in one step (state, producer, sinks,
outputs, the operator, the consumer) and hands them here, every one of them there: nothing is
set later. `RunningSubtask.loop` then handles control messages, fetches, aligns barriers and
checkpoints until a ``stop`` (the module docstring of `operators.runtime.subtask` has the
steps). The synchronous phase of a checkpoint follows `operators.protocol.snapshot`, the
sans-IO sequence the protocol model test performs too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeAlias

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord

from sluicegate.operators.contract import Operator
from sluicegate.operators.metrics import FetchedPositions, SubtaskInstruments
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
    StopSubtasks,
    TriggerCheckpoint,
)
from sluicegate.operators.protocol.records import SOURCE_WRITER
from sluicegate.operators.protocol.restore_filter import Fenced
from sluicegate.operators.protocol.snapshot import (
    Capture,
    ForwardBarrier,
    Quiesce,
    Upload,
    snapshot_steps,
)
from sluicegate.operators.runtime.calls import OperatorCalls
from sluicegate.operators.runtime.control import ControlLink
from sluicegate.operators.runtime.exceptions import SubtaskFencedError
from sluicegate.operators.runtime.inputs import BarrierAt, Inputs, Rejected
from sluicegate.operators.runtime.outputs import Outputs
from sluicegate.operators.runtime.sinks.contract import Sink
from sluicegate.operators.runtime.snapshot_tracing import SnapshotMarks, SnapshotTracing
from sluicegate.operators.runtime.state_transfer import Snapshots
from sluicegate.operators.runtime.wakes import poll_timeout_ms
from sluicegate.operators.state.local_checkpoint import LocalCheckpoint, prune_local_checkpoints
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import StorageError

__all__ = ["LoopSettings", "RunningSubtask"]

logger = logging.getLogger(__name__)

_YIELD_EVERY = 100

Incoming: TypeAlias = ConsumerRecord[bytes, bytes]
Classified: TypeAlias = Channel | BarrierAt | Rejected | Fenced | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopSettings:
    """What the loop reads of `operators.runtime.subtask.SubtaskSettings`."""

    fetch_timeout_ms: int
    fetch_max_records: int
    keep_local_checkpoints: int


@dataclass(kw_only=True, eq=False)
class RunningSubtask:
    """Subtask ``name`` at ``attempt`` with every part open; `loop` runs it."""

    name: str
    attempt: int
    settings: LoopSettings
    control: ControlLink
    metrics: SubtaskInstruments
    operator: Operator
    inputs: Inputs
    aligner: BarrierAligner[Incoming]
    store: RocksDBStateStore
    snapshots: Snapshots
    checkpoints_dir: Path
    producer: AIOKafkaProducer
    sinks: list[Sink]
    """Every sink once (topics may share one), in the order of the operator's outputs."""
    outputs: Outputs
    calls: OperatorCalls
    consumer: AIOKafkaConsumer
    lag: FetchedPositions
    tracing: SnapshotTracing
    records_in: int = 0
    _stop_requested: bool = field(default=False, init=False)
    _align_started: float | None = field(default=None, init=False)
    _upload: asyncio.Task[None] | None = field(default=None, init=False)

    async def loop(self) -> None:
        """Until a ``stop``: control messages, then a fetch and what it brings."""
        while not self._stop_requested:
            await self._handle_control()
            if not self._stop_requested:
                await self._fetch_once()

    async def cancel_upload(self) -> None:
        """Cancel the asynchronous phase under way, if any (at close)."""
        if self._upload is not None and not self._upload.done():
            self._upload.cancel()
            await asyncio.gather(self._upload, return_exceptions=True)

    # -- the loop -------------------------------------------------------------------------

    async def _handle_control(self) -> None:
        while (message := self.control.poll()) is not None:
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
                aborted = self.aligner.on_abort(message.checkpoint_id)
                if aborted is not None:
                    logger.info("%s dropped alignment: %s", self.name, aborted.reason)
                    self._align_started = None
                    await self._process_released()

    async def _fetch_once(self) -> None:
        if self._upload is not None and self._upload.done():
            self._upload.result()  # an upload failure fails the subtask
        for sink in self.sinks:
            sink.poll()  # a failed publication fails the subtask
        batches = await self.consumer.getmany(
            timeout_ms=poll_timeout_ms(
                self.settings.fetch_timeout_ms,
                busy=self.calls.executor.in_flight > 0,
                next_wake=self.calls.wakes.next_due(),
                now=time.monotonic(),
            ),
            max_records=self.settings.fetch_max_records,
        )
        for tp, fetched in batches.items():
            if fetched:
                self.lag.seen(tp.topic, tp.partition, fetched[-1].offset + 1)
        await self.metrics.on_fetch(self.lag, self.aligner.buffered)
        classify, call_now, direct = self.inputs.classify, self.calls.call_now, self.calls.direct
        for records in batches.values():
            self.records_in += len(records)
            self.metrics.records_in.inc(len(records))
            # Only a record through `_on_record` (a barrier) starts or ends an alignment.
            direct_now = direct and self.aligner.aligning is None
            for n, record in enumerate(records, start=1):
                what = classify(record)
                if direct_now and type(what) is Channel:
                    # The common case, without a coroutine: a synchronous process function,
                    # a data record, no barrier being aligned.
                    if (failure := call_now(record)) is not None:
                        await self.dead_letter(record, failure)
                else:
                    await self._on_record(record, what)
                    direct_now = direct and self.aligner.aligning is None
                if n % _YIELD_EVERY == 0:
                    # A sync process function never awaits: let heartbeats and control run.
                    await asyncio.sleep(0)
        await self.calls.run_due_wakes()
        await self.outputs.ship()
        self.calls.executor.raise_failure()

    async def _on_record(self, record: Incoming, what: Classified) -> None:
        if type(what) is Channel:
            if self.aligner.aligning is None:  # no barrier to align: the common case
                await self.calls.process(record)
                return
            action = self.aligner.on_record(what, record)
            if isinstance(action, Buffered):
                return
            if isinstance(action, Decline):
                await self._decline(action)
                return
            await self.calls.process(record)
        elif isinstance(what, BarrierAt):
            await self._on_barrier(what.channel, what.checkpoint_id, what.offset)
        elif isinstance(what, Rejected):
            await self.dead_letter(record, what.reason)
        elif isinstance(what, Fenced):
            raise SubtaskFencedError(self.name, self.attempt, what.newer_attempt)

    async def _on_trigger(self, checkpoint_id: int) -> None:
        """Barrier ``checkpoint_id`` arrives on every source channel, right before the next
        record this subtask would read there: ``R_p`` is that record's offset."""
        for partition, position in sorted(self.inputs.source_next.items()):
            await self._on_barrier(Channel(partition, SOURCE_WRITER), checkpoint_id, position)

    async def _on_barrier(self, channel: Channel, checkpoint_id: int, offset: int) -> None:
        for action in self.aligner.on_barrier(channel, checkpoint_id, offset):
            if isinstance(action, Aborted):
                logger.info("%s dropped alignment: %s", self.name, action.reason)
            elif isinstance(action, Aligned):
                await self._snapshot(action)
            self._align_started = None
            await self._process_released()
        if self.aligner.aligning is not None and self._align_started is None:
            self._align_started = time.perf_counter()

    async def _decline(self, action: Decline) -> None:
        logger.warning(
            "%s declines checkpoint %s: %s", self.name, action.checkpoint_id, action.reason
        )
        self._align_started = None
        await self.control.send(
            CheckpointDecline(self.name, action.checkpoint_id, self.attempt, action.reason)
        )
        await self._process_released()

    async def _process_released(self) -> None:
        for record in self.aligner.release():
            await self.calls.process(record)

    async def dead_letter(self, incoming: Incoming, error: Exception) -> None:
        """Send ``incoming`` to the dead-letter topic with ``error``."""
        await self.outputs.dead_letter(incoming, error)

    # -- checkpoints ----------------------------------------------------------------------

    async def _snapshot(self, aligned: Aligned) -> None:
        """The synchronous phase, step by step (`operators.protocol.snapshot`)."""
        # None: aligned by the barrier that started the alignment (one channel), no wait.
        aligned_at = time.perf_counter()
        aligning = aligned_at if self._align_started is None else self._align_started
        started = local = None
        for step in snapshot_steps(aligned):
            match step:
                case Quiesce(checkpoint_id=n):
                    await self.calls.executor.drain()
                    self.operator.on_snapshot(n)
                    for sink in self.sinks:
                        sink.on_snapshot(n)
                    if self._upload is not None:
                        await self._upload  # at most one upload at a time; normally done
                case Capture(checkpoint_id=n):
                    started = time.perf_counter()
                    local = await self.snapshots.take(self.store, n, self.checkpoints_dir)
                case ForwardBarrier(checkpoint_id=n):
                    await self.outputs.barrier(n)
                case Upload(positions=positions):
                    assert started is not None
                    assert local is not None  # Capture comes before Upload
                    marks = SnapshotMarks(
                        aligning=aligning, aligned=aligned_at, capturing=started,
                        synced=time.perf_counter(),
                    )  # fmt: skip
                    self._upload = asyncio.create_task(
                        self._upload_and_ack(local, dict(positions), marks)
                    )

    async def _upload_and_ack(
        self, local: LocalCheckpoint, positions: dict[TopicPartition, int], marks: SnapshotMarks
    ) -> None:
        marks = replace(marks, uploading=time.perf_counter())
        await self.producer.flush()
        try:
            result = await self.snapshots.upload(local)
        except StorageError as exc:
            # Storage may be back by the next checkpoint: decline this one, keep running (a
            # failed subtask would cost a global recovery per failed upload).
            n = local.inventory.checkpoint_id
            logger.warning("%s declines checkpoint %s: upload failed: %s", self.name, n, exc)
            decline = CheckpointDecline(self.name, n, self.attempt, f"upload failed: {exc}")
            marks = replace(marks, uploaded=time.perf_counter())
            await self.control.send(decline)
            self.tracing.declined(decline, marks, time.perf_counter())
            return
        marks = replace(marks, uploaded=time.perf_counter())
        alignment_s, sync_s = marks.alignment_seconds, marks.sync_seconds
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
        self.metrics.on_ack(alignment_s, sync_s, result.seconds)
        await self.control.send(ack)
        self.tracing.acked(ack, marks, time.perf_counter())

    async def _on_completed(self, checkpoint_id: int) -> None:
        for sink in self.sinks:
            await sink.on_completed(checkpoint_id)
        await self.operator.on_completed(checkpoint_id)
        keep = self.settings.keep_local_checkpoints
        prune_local_checkpoints(self.checkpoints_dir, keep=keep, completed=checkpoint_id)

"""The simulated world around the real protocol cores: Kafka, producers, storage, a sink.

Only the world is simulated. Every subtask filters with the real
:class:`~operators.protocol.restore_filter.RestoreFilter`, aligns with the real
:class:`~operators.protocol.alignment.BarrierAligner` (or a subclass under test), reads and
writes real ``sg-*`` headers, and the coordinator decides with the real running phase,
:class:`~coordinator.running.Running` (around the real
:class:`~coordinator.checkpoints.tracker.CheckpointTracker`): the world performs the actions it
answers, as `Coordinator._execute` does on Kafka and storage.

* A partition is an append-only list; nothing ever removes from it, so a crash leaves
  orphaned tails behind, as Kafka does.
* Each subtask has one producer: a queue per output partition, flushed one record at a time,
  so per partition the order of its records and markers is the order it sent them.
* Checkpoint storage maps state handles to snapshots; manifests map checkpoint ids to acks.
  Both survive crashes; everything else of a subtask does not.
* The sink topic holds committed transactions only (what ``read_committed`` consumers see)
  and, per sink subtask, the "published up to" mark and the producer epoch that fences
  zombies. A sink subtask publishes as ``ExactlyOnceSink`` does: a completion starts a
  transaction beside the loop (an event of its own commits it), and only a later event of
  the loop removes what it published from state, so snapshots and crashes fall in between.
  A crash finds a transaction in flight committed or aborted (its successor's fencing waits
  for a commit already under way, or aborts it).
* Operator ``i`` reads topic ``t{i}`` (``t0`` is the source) and folds each value into a
  per-key accumulator, emitting the new accumulator to ``t{i+1}`` (the last operator emits to
  the sink). The fold is order-sensitive, so a lost, repeated or reordered record shows.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from sluicegate.coordinator.checkpoints.backoff import StorageBackoff
from sluicegate.coordinator.checkpoints.tracker import (
    AbortCheckpoint,
    CheckpointTracker,
    CommitManifest,
)
from sluicegate.coordinator.running import (
    ApplyRetention,
    CommitOffsets,
    Complete,
    Running,
    RunningAction,
    Trigger,
)
from sluicegate.operators.protocol.alignment import (
    Aligned,
    BarrierAligner,
    Buffered,
    Decline,
    Process,
)
from sluicegate.operators.protocol.channels import Channel, TopicPartition
from sluicegate.operators.protocol.messages import Assign, CheckpointAck, CheckpointDecline
from sluicegate.operators.protocol.records import (
    SOURCE_WRITER,
    RecordKind,
    RecordMeta,
    decode_headers,
    encode_headers,
)
from sluicegate.operators.protocol.restore_filter import Fenced, RestoreFilter, Skip
from sluicegate.operators.protocol.snapshot import (
    Capture,
    ForwardBarrier,
    Quiesce,
    Upload,
    snapshot_steps,
)
from sluicegate.operators.storage.manifest import CheckpointManifest
from tests.helpers import fake_state_handle
from tests.unit.protocol_model.subtask import (
    AbortMessage,
    CompletedMessage,
    DeclineMessage,
    LogRecord,
    Publication,
    SimSubtask,
    Snapshot,
    TriggerMessage,
    fold,
)

__all__ = ["Chooser", "ModelConfig", "Shape", "SinkTopic", "World"]

Chooser = Callable[[int], int]
"""``chooser(n)`` picks an index in ``range(n)``; the test decides how (hypothesis draws)."""


@dataclass(frozen=True, slots=True)
class Shape:
    """A chain of operators: operator ``i`` reads ``partitions[i]`` partitions of ``t{i}``."""

    partitions: tuple[int, ...]
    parallelism: tuple[int, ...]

    @property
    def operators(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Knobs of one simulated run; times are in simulation steps."""

    max_buffered: int
    interval: float
    min_pause: float
    timeout: float
    zombies: bool
    aligner_class: type[BarrierAligner[LogRecord]] = BarrierAligner
    filter_class: type[RestoreFilter] = RestoreFilter


@dataclass(slots=True)
class SinkTopic:
    """Committed sink transactions, the "published up to" marks and the fencing epochs."""

    committed: list[tuple[int, int]] = field(default_factory=list)
    published_up_to: dict[str, int] = field(default_factory=dict)
    epochs: dict[str, int] = field(default_factory=dict)

    def commit(self, uid: str, attempt: int, up_to: int, outputs: list[tuple[int, int]]) -> None:
        """One transaction: the outputs and the mark, atomically; a zombie is fenced."""
        if self.epochs[uid] != attempt:
            raise AssertionError(f"zombie {uid} of attempt {attempt} reached the sink")
        self.committed.extend(outputs)
        self.published_up_to[uid] = up_to


class World:
    """Everything in memory; :meth:`step` performs one event chosen by the chooser."""

    def __init__(self, shape: Shape, config: ModelConfig, source: list[tuple[int, int]]) -> None:
        self.shape = shape
        self.config = config
        self.source = deque(source)
        self.log: dict[TopicPartition, list[LogRecord]] = {
            TopicPartition(f"t{op}", q): []
            for op, count in enumerate(shape.partitions)
            for q in range(count)
        }
        self.now = 0.0
        self.attempt = 1
        # Kept durably by the coordinator before it injects barriers, like the attempt.
        self.durable_next_id = 1
        self.storage: dict[str, Snapshot] = {}
        self.manifests: dict[int, tuple[CheckpointAck, ...]] = {}
        self.sink = SinkTopic()
        self.to_coordinator: deque[CheckpointAck | DeclineMessage] = deque()
        self.committing: CommitManifest | None = None
        self.crashes = 0
        self.crash_situations: list[str] = []
        self.counts: dict[str, int] = dict.fromkeys(
            (
                "aligned",
                "completed",
                "aborted",
                "declined",
                "released on abort",
                "fenced",
                "publishing",
                "published",
            ),
            0,
        )
        self.happened: set[str] = set()
        """Which of the counted outcomes the last step had: a crash may be aimed right after."""
        self.trace: list[str] = []
        self.uids = [
            f"op{op}#{j}" for op in range(shape.operators) for j in range(shape.parallelism[op])
        ]
        self.running = self._new_attempt()
        self.subtasks: dict[str, SimSubtask] = {uid: self._restore(uid) for uid in self.uids}
        self.zombies: list[SimSubtask] = []

    # -- choosing ------------------------------------------------------------------------

    def enabled(self) -> list[tuple[str, Callable[[Chooser], None]]]:
        """The events possible now, with a label for the trace."""
        steps: list[tuple[str, Callable[[Chooser], None]]] = []
        for sub in [*self.subtasks.values(), *self.zombies]:
            for tp in sub.readable(self.log):
                steps.append((f"poll {sub.name} {tp.topic}[{tp.partition}]", self._poll(sub, tp)))
            for tp, queue in sub.outbox.items():
                if queue:
                    steps.append(
                        (f"flush {sub.name} {tp.topic}[{tp.partition}]", self._flush(sub, tp))
                    )
        for sub in self.subtasks.values():
            if sub.uploads:
                steps.append((f"upload {sub.name}", self._upload(sub)))
            if sub.publishing is not None:
                done = "settle" if sub.publishing.committed else "commit"
                label = f"{done} {sub.name}'s publication up to {sub.publishing.up_to}"
                steps.append((label, self._publication_step(sub)))
            if sub.inbox:
                steps.append((f"deliver {sub.inbox[0]} to {sub.name}", self._deliver(sub)))
        if self.source:
            steps.append(("append source", self._append_source))
        if self.to_coordinator:
            steps.append((f"coordinator gets {self.to_coordinator[0]}", self._coordinator_receive))
        if self.committing is not None:
            steps.append((f"commit manifest {self.committing.checkpoint_id}", self._commit))
        steps.append(("tick", self._tick))
        return steps

    def step(self, chooser: Chooser) -> None:
        """Perform one enabled event picked by ``chooser``; :attr:`happened` says what it did."""
        steps = self.enabled()
        label, perform = steps[chooser(len(steps))]
        self.happened.clear()
        self.trace.append(f"{self.now:g} {label}")
        perform(chooser)

    def drain(self, *, rounds: int = 40) -> None:
        """Without faults or zombies: run to quiescence, then checkpoint until all is published.

        Raises AssertionError if the pipeline does not settle (a liveness failure).
        """
        self.zombies.clear()
        for _ in range(rounds):
            self._quiesce()
            if self._settled():
                return
            self.now += self.config.timeout + self.config.interval + self.config.min_pause + 1
            self.trace.append(f"{self.now:g} drain: tick")
            self._tick(lambda _: 0)
        raise AssertionError("the pipeline did not settle:\n" + "\n".join(self.trace[-60:]))

    def _quiesce(self) -> None:
        while True:
            steps = [s for s in self.enabled() if s[0] != "tick"]
            if not steps:
                return
            label, perform = steps[0]
            self.trace.append(f"{self.now:g} drain: {label}")
            perform(lambda _: 0)

    def _settled(self) -> bool:
        return (
            not self.source
            and self.running.in_flight is None
            and all(
                not sub.unpublished and sub.aligner.aligning is None and sub.publishing is None
                for sub in self.subtasks.values()
            )
        )

    # -- data plane ----------------------------------------------------------------------

    def _append_source(self, chooser: Chooser) -> None:
        # The outside world writes in bursts, which is what fills barrier buffers.
        for _ in range(min(len(self.source), 1 + chooser(4))):
            key, value = self.source.popleft()
            partition = TopicPartition("t0", key % self.shape.partitions[0])
            self.log[partition].append(LogRecord(key, value))

    def _flush(self, sub: SimSubtask, tp: TopicPartition) -> Callable[[Chooser], None]:
        def perform(_: Chooser) -> None:
            self.log[tp].append(sub.outbox[tp].popleft())

        return perform

    def _poll(self, sub: SimSubtask, tp: TopicPartition) -> Callable[[Chooser], None]:
        """Read one record; the order of the protocol cores is the one of a real subtask."""

        def perform(_: Chooser) -> None:
            offset = sub.positions[tp]
            record = self.log[tp][offset]
            sub.positions[tp] = offset + 1
            # A source record's headers are user data: never decoded.
            meta = None if tp.topic == "t0" else decode_headers(record.headers)
            decision = sub.restore_filter.decide(meta)
            if isinstance(decision, Fenced):
                self.trace.append(f"  {sub.name} fenced by attempt {decision.newer_attempt}")
                sub.fenced = True
                self._count("fenced")
                self.zombies = [z for z in self.zombies if not z.fenced]
                return
            if isinstance(decision, Skip):
                return
            channel = Channel(tp, SOURCE_WRITER if meta is None else meta.writer)
            if meta is not None and meta.checkpoint_id is not None:
                self._barrier(sub, channel, meta.checkpoint_id, offset)
                return
            outcome = sub.aligner.on_record(channel, record)
            if isinstance(outcome, Buffered):
                self.happened.add("buffered")
            elif isinstance(outcome, Process):
                self._apply_all(sub, [record])
            elif isinstance(outcome, Decline):
                self.trace.append(f"  {sub.name}: {outcome}")
                self._count("declined")
                if sub in self.subtasks.values():
                    self.to_coordinator.append(
                        DeclineMessage(sub.uid, outcome.checkpoint_id, sub.attempt, outcome.reason)
                    )
                self._apply_all(sub, sub.aligner.release())

        return perform

    def _sync_phase(self, sub: SimSubtask, aligned: Aligned) -> None:
        """The production sequence (`operators.protocol.snapshot`) on the simulated log; the
        caller then replays the released records."""
        self._count("aligned")
        snapshot = None
        for step in snapshot_steps(aligned):
            match step:
                case Quiesce():
                    pass  # the model's calls are synchronous, its uploads a queue
                case Capture():
                    snapshot = sub.snapshot()
                case ForwardBarrier(checkpoint_id=n):
                    sub.interval = n + 1
                    marker = RecordMeta(sub.attempt, n, sub.uid, RecordKind.BARRIER, n)
                    for queue in sub.outbox.values():
                        queue.append(LogRecord(-1, 0, tuple(encode_headers(marker))))
                case Upload(checkpoint_id=n, positions=positions):
                    assert snapshot is not None, "the state is captured before its upload"
                    sub.uploads.append((n, dict(positions), snapshot))

    def _apply_all(self, sub: SimSubtask, records: list[LogRecord]) -> None:
        for record in records:
            output = fold(sub.state, record.key, record.value)
            if sub.operator == self.shape.operators - 1:
                # Written ahead into state for the current interval; published on completion.
                sub.unpublished.setdefault(sub.interval, []).append(output)
                continue
            meta = RecordMeta(sub.attempt, sub.interval, sub.uid)
            target = TopicPartition(
                f"t{sub.operator + 1}", output[0] % self.shape.partitions[sub.operator + 1]
            )
            sub.outbox[target].append(LogRecord(*output, tuple(encode_headers(meta))))

    # -- control plane -------------------------------------------------------------------

    def _upload(self, sub: SimSubtask) -> Callable[[Chooser], None]:
        def perform(_: Chooser) -> None:
            n, positions, snapshot = sub.uploads.popleft()
            handle = f"attempt-{sub.attempt}/{n}/{sub.uid}"
            self.storage[handle] = snapshot
            self.to_coordinator.append(
                CheckpointAck(sub.uid, n, sub.attempt, positions, fake_state_handle(handle, n))
            )

        return perform

    def _barrier(self, sub: SimSubtask, channel: Channel, n: int, offset: int) -> None:
        for action in sub.aligner.on_barrier(channel, n, offset):
            self.trace.append(f"  {sub.name}: {action}")
            if isinstance(action, Aligned):
                self._sync_phase(sub, action)
            self._apply_all(sub, sub.aligner.release())

    def _deliver(self, sub: SimSubtask) -> Callable[[Chooser], None]:
        def perform(_: Chooser) -> None:
            message = sub.inbox.popleft()
            if message.attempt != sub.attempt:
                return
            if isinstance(message, TriggerMessage):
                # Barrier n on every source channel, right before the next record to read.
                for tp in sorted(p for p in sub.positions if p.topic == "t0"):
                    channel = Channel(tp, SOURCE_WRITER)
                    self._barrier(sub, channel, message.checkpoint_id, sub.positions[tp])
                return
            if isinstance(message, AbortMessage):
                aborted = sub.aligner.on_abort(message.checkpoint_id)
                if aborted is not None:
                    self.trace.append(f"  {sub.name}: {aborted}")
                    released = sub.aligner.release()
                    if released:
                        self._count("released on abort")
                    self._apply_all(sub, released)
                return
            if sub.operator != self.shape.operators - 1:
                return
            sub.completed = max(sub.completed, message.checkpoint_id)
            self._start_publication(sub)

        return perform

    def _start_publication(self, sub: SimSubtask) -> None:
        """`ExactlyOnceSink.poll`: start a transaction of what completed, unless one runs."""
        if sub.publishing is not None or sub.completed <= sub.published:
            return
        intervals = tuple(sorted(i for i in sub.unpublished if i <= sub.completed))
        outputs = tuple(o for i in intervals for o in sub.unpublished[i])
        sub.publishing = Publication(sub.completed, intervals, outputs)
        self._count("publishing")

    def _publication_step(self, sub: SimSubtask) -> Callable[[Chooser], None]:
        def perform(_: Chooser) -> None:
            publication = sub.publishing
            assert publication is not None
            if not publication.committed:  # the transaction commits, beside the loop
                self._commit_publication(sub, publication)
                return
            for interval in publication.intervals:  # the loop's next poll settles it
                del sub.unpublished[interval]
            sub.published, sub.publishing = publication.up_to, None
            self._start_publication(sub)

        return perform

    def _commit_publication(self, sub: SimSubtask, publication: Publication) -> None:
        self.sink.commit(sub.uid, sub.attempt, publication.up_to, list(publication.outputs))
        publication.committed = True
        self._count("published")

    def _coordinator_receive(self, _: Chooser) -> None:
        message = self.to_coordinator.popleft()
        if isinstance(message, CheckpointAck):
            self._perform(self.running.on_ack(message))
            return
        decline = CheckpointDecline(
            message.subtask, message.checkpoint_id, message.attempt, message.reason
        )
        self._perform(self.running.on_decline(decline, self.now))

    def _commit(self, _: Chooser) -> None:
        commit = self.committing
        assert commit is not None
        self.committing = None
        assert commit.checkpoint_id not in self.manifests, "manifests are create-if-absent"
        self.manifests[commit.checkpoint_id] = commit.acks
        manifest = CheckpointManifest.from_acks(
            "model", commit.checkpoint_id, commit.attempt, commit.acks
        )
        completed = self.running.on_manifest_committed(manifest, self.now, self._slots)
        assert any(isinstance(action, Complete) for action in completed)
        self._perform(completed)

    def _tick(self, _: Chooser) -> None:
        # Only ticks move the clock, so a checkpoint's timeout counts coordinator rounds.
        self.now += 1
        self._perform(self.running.tick(self.now))

    def _perform(self, actions: list[RunningAction]) -> None:
        """Do what the running phase answered, in order, as `Coordinator._execute` does."""
        for action in actions:
            match action:
                case Trigger():
                    self._inject(action)
                case AbortCheckpoint():
                    self._broadcast_abort(action)
                case CommitManifest():
                    self.committing = action  # committed by an event of its own
                case Complete(manifest=manifest):
                    self._count("completed")
                    for sub in self.subtasks.values():
                        sub.inbox.append(CompletedMessage(manifest.checkpoint_id, manifest.attempt))
                case CommitOffsets() | ApplyRetention():
                    pass  # nothing the protocol depends on: lag tools and retention
                case _:
                    raise AssertionError(f"the model's running attempt cannot {action}")

    def time_out(self) -> None:
        """The clock jumps past the timeout and the coordinator ticks: what is in flight aborts."""
        self.now += self.config.timeout
        self.trace.append(f"{self.now:g} clock jumps past the timeout")
        self._tick(lambda _: 0)

    def _inject(self, inject: Trigger) -> None:
        self.durable_next_id = inject.checkpoint_id + 1  # recorded as used before the barriers
        for sub in self.subtasks.values():  # the trigger goes over the control plane
            if sub.operator == 0:
                sub.inbox.append(TriggerMessage(inject.checkpoint_id, inject.attempt))

    def _broadcast_abort(self, abort: AbortCheckpoint | None) -> None:
        if abort is None:
            return
        self.trace.append(f"  {abort}")
        self._count("aborted")
        if self.committing is not None and self.committing.checkpoint_id == abort.checkpoint_id:
            self.committing = None
        for sub in self.subtasks.values():
            sub.inbox.append(AbortMessage(abort.checkpoint_id, abort.attempt))

    def _count(self, outcome: str) -> None:
        self.counts[outcome] += 1
        self.happened.add(outcome)

    # -- crash and global recovery -------------------------------------------------------

    def crash(self, chooser: Chooser) -> None:
        """Every subtask and the coordinator lose what is not in storage; rewind to the last
        completed checkpoint at a new attempt. Old subtasks may live on as zombies."""
        self.crashes += 1
        self.trace.append(f"{self.now:g} crash and recovery to attempt {self.attempt + 1}")
        self.crash_situations.extend(self._situations())
        self.attempt += 1
        self.running = self._new_attempt()  # as the coordinator does: one tracker per attempt
        self.to_coordinator.clear()
        self.committing = None
        for old in self.subtasks.values():
            # Fencing by the successors: a transaction in flight ends committed or aborted.
            if old.publishing is not None and not old.publishing.committed and chooser(2):
                self._commit_publication(old, old.publishing)
            old.publishing = None
            if self.config.zombies and chooser(2):
                old.inbox.clear()
                old.uploads.clear()
                old.unpublished.clear()
                self.zombies.append(old)
        self.subtasks = {uid: self._restore(uid) for uid in self.uids}

    def _situations(self) -> list[str]:
        found = []
        subs = self.subtasks.values()
        if any(sub.aligner.aligning is not None for sub in subs):
            found.append("crash mid-alignment")
        if any(sub.uploads for sub in subs):
            found.append("crash between sync phase and ack")
        if any(isinstance(m, CompletedMessage) for sub in subs for m in sub.inbox):
            found.append("crash between completion and sink publication")
        if any(sub.publishing is not None and not sub.publishing.committed for sub in subs):
            found.append("crash with a sink transaction in flight")
        if any(sub.publishing is not None and sub.publishing.committed for sub in subs):
            found.append("crash between a sink commit and its removal from state")
        if self.committing is not None:
            found.append("crash before manifest commit")
        return found or ["crash elsewhere"]

    @property
    def _slots(self) -> dict[str, int]:
        """One worker runs every subtask: the model never calls for a rebalance."""
        return {"w": len(self.uids)}

    def _new_attempt(self) -> Running:
        tracker = CheckpointTracker(
            subtasks=self.uids,
            next_checkpoint_id=self.durable_next_id,
            attempt=self.attempt,
            interval_seconds=self.config.interval,
            min_pause_seconds=self.config.min_pause,
            timeout_seconds=self.config.timeout,
        )
        assign = Assign(self.attempt, None, self.durable_next_id, {"w": tuple(self.uids)})
        # Storage never fails in the model: the backoff stays at rest.
        return Running(tracker, assign, StorageBackoff(), subtasks=self.uids)

    def _restore(self, uid: str) -> SimSubtask:
        """A subtask of the current attempt, from the last completed checkpoint or empty.

        Steps: load state and ``R_p`` from the manifest; a sink subtask fences older
        producers, drops what its transactions already published and publishes the rest.
        """
        operator, index = (int(part) for part in uid.removeprefix("op").split("#"))
        parallelism = self.shape.parallelism[operator]
        inputs = [
            TopicPartition(f"t{operator}", q)
            for q in range(self.shape.partitions[operator])
            if q % parallelism == index
        ]
        last = self.shape.operators - 1
        outputs = (
            []
            if operator == last
            else [
                TopicPartition(f"t{operator + 1}", q)
                for q in range(self.shape.partitions[operator + 1])
            ]
        )
        writers = (
            [SOURCE_WRITER]
            if operator == 0
            else [f"op{operator - 1}#{j}" for j in range(self.shape.parallelism[operator - 1])]
        )
        channels = [Channel(tp, writer) for tp in inputs for writer in writers]
        m = max(self.manifests, default=0)
        positions = dict.fromkeys(inputs, 0)
        snapshot = Snapshot((), ())
        if m:
            ack = next(a for a in self.manifests[m] if a.subtask == uid)
            positions = dict(ack.positions)
            snapshot = self.storage[ack.handle.files[0].path]
        sub = SimSubtask(
            uid=uid,
            operator=operator,
            attempt=self.attempt,
            positions=positions,
            outputs=outputs,
            snapshot=snapshot,
            interval=m + 1,
            aligner=self.config.aligner_class(
                channels, max_buffered=self.config.max_buffered, last_checkpoint_id=m
            ),
            restore_filter=self.config.filter_class(
                self.attempt, restored_checkpoint_id=m if m else None
            ),
        )
        if operator == last:
            self.sink.epochs[uid] = self.attempt
            published = self.sink.published_up_to.get(uid, 0)
            assert all(i <= m for i in sub.unpublished), "snapshot m holds intervals ≤ m only"
            outputs_due = [
                o for i in sorted(sub.unpublished) if i > published for o in sub.unpublished[i]
            ]
            sub.unpublished.clear()
            if m > published:
                self.sink.commit(uid, self.attempt, m, outputs_due)
        return sub

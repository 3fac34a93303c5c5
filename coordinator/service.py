"""The coordinator of one pipeline: assignment, checkpoints, failure detection, recovery.

All decisions happen in one asyncio task without locks (`Coordinator.run`, one `step` per
pass); the decisions themselves live in small sans-IO classes, one per phase of the job:
placing (`coordinator.placement`, steps 1 and 2 below), running (`coordinator.running.Running`,
whose actions `_execute` performs), recovering (`coordinator.recovery.Recovery`), stopping
(`coordinator.stopping.StopSequence`) and, beside running, savepointing
(`coordinator.savepoints.phase.Savepointing`); under them `CheckpointTracker`,
`JobStateMachine`, `LivenessTracker`, `RestartPolicy`, `plan_retention`. The table of phases
is in docs/architecture.md. Readers take `facts()`; every attribute is private. Workers are
reached only through a `CoordinatorLink`: the Kafka control topics
(`operators.runtime.kafka_control`), or an in-memory bus when coordinator and workers share a
process (`coordinator.local.LocalJob`): one coordinator loop either way.

`run` performs, in order:

1. create the pipeline's topics; if every worker of the newest stored plan still runs its
   attempt (a coordinator crash alone), adopt that attempt: nothing restarts
   (`coordinator.adoption`, within ``adopt_seconds``); otherwise take the next attempt
   durably (``attempts/<A>``), so a restarted coordinator never reuses one: whatever was in
   flight is abandoned, and the pipeline recovers from the last completed checkpoint;
2. send `Retire(attempt)` and wait until every live worker answered `Retired` (their older
   subtasks finished the calls in flight and stopped: `coordinator.retirement`), and for
   enough slots (too few are logged once per change); then assign every subtask and send
   `Assign` (attempt, checkpoint to restore, next checkpoint id) to the workers;
3. loop: read worker messages; re-send the assignment to a worker whose heartbeat disagrees;
   trigger checkpoints (`TriggerCheckpoint` to the workers: each source subtask takes barrier n
   at its current read position; nothing is written into a source topic); when every subtask
   acked, commit the manifest, broadcast ``completed(n)``, commit the sources' group offsets
   and apply retention; on a dead or restarted worker or a failed subtask, recover after the restart
   policy's delay: new attempt, reassign to live workers, restore everything. A checkpoint
   whose files fail verification on restore is marked corrupt and the previous one is used.
   When live workers call for another placement (one joined and would idle), rebalance right
   after a checkpoint completes (little to replay): a recovery without the restart delay;
4. on `request_stop` (``sluicegate stop``): no more periodic checkpoints or recoveries; a final
   checkpoint, then ``stop`` to every worker (`coordinator.stopping`); `run` returns once the
   job is ``stopped`` (or ``failed``), and starting a coordinator again resumes the job from
   its last completed checkpoint.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Iterable

from sluicegate.coordinator.adoption import Restart
from sluicegate.coordinator.checkpoint_stats import CheckpointStats
from sluicegate.coordinator.checkpoints.backoff import StorageBackoff
from sluicegate.coordinator.checkpoints.tracker import (
    AbortCause,
    AbortCheckpoint,
    CheckpointTracker,
    CommitManifest,
)
from sluicegate.coordinator.facts import CoordinatorFacts, StopFacts, WorkerFacts, checkpoint_facts
from sluicegate.coordinator.fencing import Fence, placed_elsewhere, take_epoch
from sluicegate.coordinator.heap import HeapFreezer
from sluicegate.coordinator.housekeeping import Housekeeping
from sluicegate.coordinator.incidents import Failure, RecentAbort
from sluicegate.coordinator.job_state import JobEvent, JobState, JobStateMachine
from sluicegate.coordinator.liveness import LivenessTracker
from sluicegate.coordinator.numbering import mark_triggered, next_checkpoint_id
from sluicegate.coordinator.placement import Placement
from sluicegate.coordinator.recovery import Recovery
from sluicegate.coordinator.restart import GiveUp
from sluicegate.coordinator.restore_choice import CannotRestore
from sluicegate.coordinator.running import (
    ApplyRetention,
    CommitOffsets,
    Complete,
    Fail,
    MarkCorrupt,
    Rebalance,
    Running,
    RunningAction,
    SendAssign,
    Trigger,
    TriggerPurpose,
)
from sluicegate.coordinator.savepoints.driver import SavepointDriver
from sluicegate.coordinator.savepoints.requests import SavepointRequest
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.coordinator.source_offsets import SourceOffsets
from sluicegate.coordinator.stopping import (
    Finish,
    SendStop,
    StopSequence,
    TriggerFinal,
    still_running,
)
from sluicegate.coordinator.tracing import CheckpointTracing
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.kafka import KafkaLike
from sluicegate.operators.protocol.messages import (
    Assign,
    CheckpointAborted,
    CheckpointAck,
    CheckpointCompleted,
    CheckpointDecline,
    FromWorker,
    Heartbeat,
    Retire,
    Retired,
    StopSubtasks,
    SubtaskFailed,
    ToWorker,
    TriggerCheckpoint,
)
from sluicegate.operators.runtime.control import CoordinatorLink
from sluicegate.operators.runtime.kafka_control import KafkaCoordinatorLink
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.storage import (
    AlreadyExistsError,
    Storage,
    StorageError,
    StorageUnavailableError,
)
from sluicegate.operators.storage.manifest import CheckpointManifest, ManifestStore
from sluicegate.operators.tracing import tracer

__all__ = ["Coordinator"]

logger = logging.getLogger(__name__)


class Coordinator:
    """Coordinates ``graph``'s workers through Kafka; steps in the module docstring."""

    def __init__(
        self,
        graph: JobGraph,
        *,
        bootstrap: KafkaLike,
        storage: Storage,
        settings: CoordinatorSettings | None = None,
        link: CoordinatorLink | None = None,
    ) -> None:
        """``link``: the control plane to the workers (default: the Kafka control topics)."""
        self._graph = graph
        self._storage = storage
        self._manifests = ManifestStore(storage)
        self._settings = settings or CoordinatorSettings()
        self._job = JobStateMachine()
        self._liveness: LivenessTracker[Heartbeat] = LivenessTracker(
            timeout_seconds=self._settings.heartbeat_timeout_seconds
        )
        self._tracker: CheckpointTracker | None = None
        """The tracker of the current attempt, ready before its assignment is taken up."""
        self._running: Running | None = None
        """The running phase of the current attempt (None until assigned, and while
        recovering): its decisions (`coordinator.running`) are performed by `_execute`."""
        self._attempt = 0
        self._stats = CheckpointStats()
        """What the metrics report about checkpoints (`coordinator.metrics`)."""
        self._tracing = CheckpointTracing(tracer("sluicegate.coordinator"), pipeline=graph.name)
        self._aborts: list[RecentAbort] = []
        self._restore_fallbacks = 0
        self._failure: Failure | None = None
        """The last failure seen (the job's reason when it ends ``failed``)."""
        self._link = link or KafkaCoordinatorLink(bootstrap, graph.name)
        self._bootstrap = bootstrap
        self._subtasks = [str(s) for s in graph.subtasks()]
        self._recovery = Recovery(self._settings.restart_policy())
        self._placing_backoff = StorageBackoff(initial_seconds=0.5)
        """Checkpoint storage failed while an attempt was being set up: the next try waits."""
        self._attempt_wanted = False
        """A new attempt is to be taken (the last try failed on storage)."""
        """The recovering phase: when the next attempt starts (`coordinator.recovery`)."""
        self._offsets: SourceOffsets | None = None
        self._housekeeping = Housekeeping(
            storage,
            keep=self._settings.keep_checkpoints,
            audit_every=self._settings.audit_every,
            blob_gc_interval_s=self._settings.blob_gc_interval_seconds,
        )
        self._storage_backoff = StorageBackoff()
        self._heap = HeapFreezer()
        """What a checkpoint leaves alive is frozen out of full collections (`coordinator.heap`)."""
        self._placement = Placement(graph, self._subtasks, storage, self._manifests, self._settings)
        """Steps 1 and 2 of the module docstring: adoption, phase one, the plan."""
        self._stopping: StopSequence | None = None
        """The graceful stop under way or done (None: none was asked for)."""
        self._ended = asyncio.Event()
        self._fence: Fence | None = None
        """This coordinator's epoch and whether a newer one fenced it (set by `run`)."""
        self._savepoints = SavepointDriver(storage, graph.name)
        """Savepoint requests of this process and their writing (`coordinator.savepoints`)."""

    @property
    def graph(self) -> JobGraph:
        return self._graph

    @property
    def storage(self) -> Storage:
        """Where the job's checkpoints, savepoints and plans are stored."""
        return self._storage

    @property
    def kafka(self) -> KafkaLike:
        """The Kafka cluster the job runs on."""
        return self._bootstrap

    @property
    def ended(self) -> asyncio.Event:
        """Set when `run` returns: the job stopped or failed, or the coordinator ended."""
        return self._ended

    @property
    def fenced(self) -> bool:
        """A newer coordinator of the pipeline started: this one sends nothing more and idles
        until its process is stopped (`coordinator.fencing`)."""
        return self._fence is not None and self._fence.fenced_by is not None

    def facts(self, now: float | None = None) -> CoordinatorFacts:
        """What this coordinator knows now, as one frozen copy for its readers
        (`coordinator.facts`); ``now``: monotonic seconds, for which workers are alive."""
        now = time.monotonic() if now is None else now
        running, stop = self._running, self._stopping
        alive = set(self._liveness.alive(now))
        workers = tuple(
            WorkerFacts(w, w in alive, entry.last_seen, entry.info)
            for w in sorted(alive | set(self._liveness.dead(now)))
            if (entry := self._liveness.get(w)) is not None
        )
        return CoordinatorFacts(
            pipeline=self._graph.name,
            state=self._job.state,
            attempt=self._attempt,
            restarts=max(self._attempt - 1, 0),  # attempts are durable: so is this count
            assign=running.assign if running is not None else None,
            failure=self._failure,
            restore_fallbacks=self._restore_fallbacks,
            fenced_by=self._fence.fenced_by if self._fence is not None else None,
            waiting_for=self._placement.waiting_for or self._recovery.waiting_for(now),
            stop=None if stop is None else StopFacts(stop.phase.value, stop.completed, stop.note),
            workers=workers,
            checkpoints=checkpoint_facts(
                self._stats,
                in_flight=running.in_flight if running is not None else None,
                recent_aborts=tuple(self._aborts),
                interval_seconds=self._settings.interval_seconds,
            ),
            savepoint_outcomes=dict(self._savepoints.outcomes),
            savepoint_requests=tuple(dataclasses.replace(r) for r in self._savepoints.requests),
            last_savepoint=self._savepoints.last_written,
        )

    async def run(self) -> None:
        """Coordinate until cancelled; steps in the module docstring."""
        await ensure_topics(self._bootstrap, self._graph)
        try:
            async with SourceOffsets(self._bootstrap, self._graph) as offsets, self._link:
                self._offsets = offsets
                await self.start()
                while not self._job.is_terminal and not self.fenced:
                    await self.step(await self._link.receive(0.05))
            if self.fenced:
                await asyncio.Event().wait()  # idle until stopped (`coordinator.fencing`)
        finally:
            self._savepoints.cancel()
            self._ended.set()

    async def start(self, now: float | None = None) -> None:
        """Steps 1 and 2 of the module docstring, once the control link is open: take this
        coordinator's epoch, then adopt the running attempt or start a new one. While
        checkpoint storage is unreachable, it starts again after a backoff, with a newer epoch
        and attempt as a coordinator process started again would."""
        while True:
            try:
                await self._start_once(time.monotonic() if now is None else now)
                self._placing_backoff.succeeded()
                return
            except StorageUnavailableError as exc:
                delay = self._placing_backoff.failed(time.monotonic())
                logger.warning("coordinator start: %s; starting again in %s s", exc, f"{delay:g}")
                await asyncio.sleep(delay)

    async def _start_once(self, now: float) -> None:
        epoch = await take_epoch(self._storage)
        self._fence = Fence(epoch, self._settings.fence_check_seconds, now)
        logger.info("pipeline %s: coordinator epoch %s", self._graph.name, epoch)
        if not await self._placement.start(now):
            await self._new_attempt()
        self._stats.seed(await self._manifests.latest())

    async def step(self, messages: Iterable[FromWorker], now: float | None = None) -> None:
        """One pass of step 3's loop: handle the workers' ``messages``, then tick; ``now``:
        monotonic seconds (default: the clock, read for each message and for the tick)."""
        for message in messages:
            await self._on_message(message, time.monotonic() if now is None else now)
        await self._tick(time.monotonic() if now is None else now)

    async def trigger_checkpoint(self, *, full: bool = False) -> int | None:
        """Trigger a checkpoint now if the tracker allows it (``full``: a full one); its id,
        or None. Raises `FencedError` once fenced (as do a stop and a savepoint)."""
        self._refuse_if_fenced()
        if self._running is None:
            return None
        now = time.monotonic()
        trigger = self._running.trigger(now, TriggerPurpose.REQUESTED, full=full)
        if trigger is None:
            return None
        await self._execute([trigger], now)
        return trigger.checkpoint_id

    def request_stop(self, *, final_checkpoint: bool = True) -> None:
        """Stop the job gracefully (step 4 of the module docstring), with a final checkpoint
        unless ``final_checkpoint`` is False. Nothing happens if the job is already stopping
        or has ended."""
        self._refuse_if_fenced()
        if self._job.state is JobState.STOPPING or self._job.is_terminal:
            return
        running = self._running
        self._stopping = StopSequence(
            final_checkpoint=final_checkpoint,
            in_flight=running.in_flight if running is not None else None,
            running_attempt=running is not None,
            timeout_seconds=self._settings.stop_timeout_seconds,
        )
        if running is not None:
            running.stop()
        self._recovery.cancel()
        self._job.apply(JobEvent.STOP_REQUESTED)
        logger.info(
            "pipeline %s: stopping (%s)", self._graph.name,
            "final checkpoint first" if final_checkpoint else "no final checkpoint",
        )  # fmt: skip

    async def request_savepoint(
        self, name: str | None = None, *, stop: bool = False
    ) -> SavepointRequest:
        """Ask for savepoint ``name`` (default: pipeline and time): from a checkpoint triggered
        for it, or with ``stop`` from the final checkpoint of a graceful stop, which this
        starts (`coordinator.savepoints`). Raises `SavepointRefusedError` saying why not."""
        self._refuse_if_fenced()
        busy = self._job.is_terminal or self._job.state is JobState.STOPPING
        request = await self._savepoints.request(
            name, stop=stop, refusal=f"the job is {self._job.state.value}" if busy else None
        )
        if stop:
            self.request_stop(final_checkpoint=True)
        return request

    # -- decisions ------------------------------------------------------------------------

    async def _tick(self, now: float) -> None:
        """One pass of the loop: the phase the job is in decides what happens now."""
        if self._job.is_terminal:
            return  # e.g. a message just made the job give up: nothing to assign any more
        if await self._newly_fenced(now):
            return
        if self._placement.adopting:
            if self._stopping is None:
                await self._placing(self._try_adopt(now), now)
                return
            self._placement.give_up_adoption()  # a stop before the decision: a new attempt's way
            self._attempt_wanted = True
        await self._forget_dead_workers(now)
        if self._stopping is not None and self._attempt_wanted:
            if not self._placing_backoff.waiting(now):  # the stop goes on the new attempt
                await self._placing(self._new_attempt(), now)
        elif self._stopping is not None:
            await self._drive_stop(self._stopping, now)
        elif self._recovery.due(now) or self._attempt_wanted:
            self._attempt_wanted = True
            if not self._placing_backoff.waiting(now):
                await self._placing(self._next_attempt(now), now)
        elif self._running is None:
            if not self._recovery.pending:
                await self._placing(self._try_assign(now), now)
        else:
            waiting = self._savepoints.wants_checkpoint()
            await self._execute(self._running.tick(now, savepoint_waiting=waiting), now)

    async def _newly_fenced(self, now: float) -> bool:
        fence = self._fence
        return fence is not None and fence.due(now) and await fence.check(self._storage, now)

    async def _forget_dead_workers(self, now: float) -> None:
        for worker in self._liveness.dead(now):
            self._liveness.forget(worker)
            if (running := self._running) is not None:
                await self._execute(running.on_worker_lost(worker, "missed its heartbeats"), now)

    async def _on_message(self, message: FromWorker, now: float) -> None:
        if isinstance(message, Heartbeat):
            await self._on_heartbeat(message, now)
        elif isinstance(message, Retired):
            if (retiring := self._placement.retiring) is not None:
                retiring.on_retired(message.worker_id, message.attempt)
        elif (running := self._running) is None:
            return  # recovering: the new attempt gets a new tracker
        elif isinstance(message, CheckpointAck):
            await self._execute(running.on_ack(message), now)
        elif isinstance(message, CheckpointDecline):
            await self._execute(running.on_decline(message, now), now)
        elif isinstance(message, SubtaskFailed):
            await self._execute(running.on_subtask_failed(message), now)

    async def _on_heartbeat(self, beat: Heartbeat, now: float) -> None:
        known = self._liveness.get(beat.worker_id)
        self._liveness.on_heartbeat(beat.worker_id, now, beat)
        if known is None:
            logger.info("worker %s joined with %s slots", beat.worker_id, beat.slots)
        elif (
            known.info.incarnation != beat.incarnation
            and (running := self._running) is not None
            and (lost := running.on_worker_lost(beat.worker_id, "restarted and lost its subtasks"))
        ):
            # Restarted under the same id: its subtasks are gone, the others run on.
            await self._execute(lost, now)
            return
        if beat.attempt > self._attempt and not self._placement.adopting:
            # Placed by another coordinator: this one is fenced, or takes the workers back.
            elsewhere = await placed_elsewhere(
                self._fence, self._storage, beat.worker_id, beat.attempt, now
            )
            if elsewhere is not None:
                await self._fail(elsewhere, now)
            return
        if self._running is not None:
            await self._execute(self._running.on_heartbeat(beat), now)  # missed its Assign?
        elif (retiring := self._placement.retiring) and beat.worker_id not in retiring.retired:
            await self._broadcast(Retire(retiring.attempt))  # joined, or missed it

    async def _execute(self, actions: Iterable[RunningAction], now: float) -> None:
        """Perform what the running phase answered, in its order (`coordinator.running`)."""
        for action in actions:
            match action:
                case Trigger():
                    await self._send_trigger(action)
                case AbortCheckpoint():
                    await self._abort(action)
                case CommitManifest():
                    await self._execute(await self._commit(action, now), now)
                case Complete(manifest=manifest):
                    self._stats.on_completed(manifest, time.monotonic())
                    if self._job.state is JobState.CHECKPOINTING:
                        self._job.apply(JobEvent.CHECKPOINT_ENDED)
                    n = manifest.checkpoint_id
                    await self._broadcast(CheckpointCompleted(n, manifest.attempt))
                    if self._stopping is not None:
                        self._stopping.checkpoint_ended(n, completed=True)
                    self._savepoints.on_completed(manifest)
                case CommitOffsets(manifest=manifest):
                    if self._offsets is not None:
                        await self._offsets.commit(manifest)
                case ApplyRetention(pinned=pinned):
                    await self._housekeeping.after_completed(
                        self._stats.completed, pinned=(*pinned, *self._savepoints.pinned())
                    )
                    self._heap.after_checkpoint()
                case Rebalance():
                    self._rebalance(action, now)
                case MarkCorrupt(checkpoint_id=corrupt, reason=reason):
                    logger.error(
                        "checkpoint %s is corrupt (%s): falling back to the previous checkpoint",
                        corrupt, reason,
                    )  # fmt: skip
                    self._restore_fallbacks += 1  # first: whoever sees the mark sees the count
                    await self._manifests.mark_corrupt(corrupt, reason)
                case Fail(reason=reason, subtask=subtask):
                    await self._fail(reason, now, subtask)
                case SendAssign(assign=assign):
                    await self._broadcast(assign)

    async def _commit(self, commit: CommitManifest, now: float) -> list[RunningAction]:
        """1. build the manifest from the acks; 2. commit it with create-if-absent; 3. tell the
        running phase it completed, or that it failed (the manifest exists already, or storage
        failed: the checkpoint aborts, the job runs on, and periodic checkpoints back off)."""
        running = self._running
        assert running is not None
        manifest = CheckpointManifest.from_acks(
            self._graph.name, commit.checkpoint_id, commit.attempt, commit.acks,
            triggered_at=self._stats.triggered_at(commit.checkpoint_id),
            state_versions={u: s.state_versions.current for u, s in self._graph.operators.items()},
        )  # fmt: skip
        started = time.time()
        try:
            await self._manifests.commit(manifest)
        except AlreadyExistsError:
            reason, storage_failed = "the manifest exists already", False
        except StorageError as exc:
            reason, storage_failed = f"checkpoint storage failed: {exc}", True
        else:
            self._housekeeping.committed(manifest)
            self._tracing.committed(manifest, started, time.time())
            slots = {w: beat.slots for w, beat in self._liveness.alive_infos(now).items()}
            return running.on_manifest_committed(manifest, now, slots)
        return running.on_manifest_failed(
            commit.checkpoint_id, reason, now, storage_failed=storage_failed
        )

    def _rebalance(self, rebalance: Rebalance, now: float) -> None:
        """Reassign when the live workers call for another plan (a worker joined): through
        recovery from the checkpoint that just completed, with no restart delay (nothing
        failed, so the restart policy is left alone)."""
        logger.info(
            "pipeline %s: rebalancing over workers %s (planned %s)",
            self._graph.name, sorted(rebalance.slots), rebalance.plan,
        )  # fmt: skip
        self._job.apply(JobEvent.FAILURE_DETECTED)
        self._running = None
        self._recovery.rebalance(now)

    async def _abort(self, abort: AbortCheckpoint) -> None:
        logger.warning("checkpoint %s aborted: %s", abort.checkpoint_id, abort.reason)
        self._tracing.aborted(
            abort.checkpoint_id, abort.attempt, abort.reason,
            self._stats.triggered_at(abort.checkpoint_id), time.time(),
        )  # fmt: skip
        self._stats.on_aborted(abort.cause)
        self._aborts = [
            *self._aborts[-9:],
            RecentAbort(abort.checkpoint_id, abort.attempt, abort.reason, time.time()),
        ]
        if self._job.state is JobState.CHECKPOINTING:
            self._job.apply(JobEvent.CHECKPOINT_ENDED)
        await self._broadcast(CheckpointAborted(abort.checkpoint_id, abort.attempt, abort.reason))
        if self._stopping is not None:
            self._stopping.checkpoint_ended(
                abort.checkpoint_id, completed=False, reason=abort.reason
            )
        self._savepoints.on_aborted(abort.checkpoint_id, abort.reason)

    async def _fail(self, reason: str, now: float, subtask: str | None = None) -> None:
        if self._recovery.pending or self._job.is_terminal:
            return
        self._failure = Failure(reason, subtask)
        if self._stopping is not None:
            logger.warning("pipeline %s: failure while stopping: %s", self._graph.name, reason)
            self._job.apply(JobEvent.FAILURE_DETECTED)  # stays stopping: nothing to recover
            self._stopping.on_failure(reason)
            return
        logger.warning("recovering pipeline %s: %s", self._graph.name, reason)
        if self._running is not None and self._running.in_flight is not None:
            self._stats.on_aborted(AbortCause.RECOVERY)  # its acks are ignored from now on
        self._savepoints.on_recovery()
        self._job.apply(JobEvent.FAILURE_DETECTED)
        self._running = None
        if isinstance(decision := self._recovery.on_failure(now), GiveUp):
            logger.error("pipeline %s failed: %s", self._graph.name, decision.reason)
            self._job.apply(JobEvent.RESTARTS_EXHAUSTED)

    async def _drive_stop(self, stop: StopSequence, now: float) -> None:
        """Do what the stop sequence asks for now; `coordinator.stopping` has its phases."""
        attempt = self._running
        if attempt is not None:
            await self._execute(attempt.tick(now), now)  # the final checkpoint may time out
        assignment = attempt.assign.assignment if attempt is not None else {}
        running = still_running(self._liveness.alive_infos(now), assignment, self._attempt)
        in_flight = attempt is not None and attempt.in_flight is not None
        match stop.on_tick(now, checkpoint_in_flight=in_flight, running=running):
            case TriggerFinal():
                if attempt is not None and (last := attempt.trigger(now, TriggerPurpose.FINAL)):
                    await self._execute([last], now)
            case SendStop():
                await self._broadcast(StopSubtasks(self._attempt))
            case Finish(unconfirmed=unconfirmed):
                if unconfirmed:
                    logger.warning(
                        "pipeline %s: subtasks %s did not confirm the stop within %.0f s",
                        self._graph.name, ", ".join(unconfirmed),
                        self._settings.stop_timeout_seconds,
                    )  # fmt: skip
                await self._savepoints.on_stopped(self._manifests, stop.completed)
                self._job.apply(JobEvent.STOPPED)
                final = stop.completed
                logger.info(
                    "pipeline %s stopped; %s", self._graph.name,
                    f"final checkpoint {final}" if final is not None
                    else f"no final checkpoint{': ' + stop.note if stop.note else ''}; the next "
                    f"start resumes from checkpoint {self._stats.last_completed_id}",
                )  # fmt: skip

    def _refuse_if_fenced(self) -> None:
        if self._fence is not None:
            self._fence.refuse()

    async def _placing(self, setting_up: Awaitable[None], now: float) -> None:
        """Adopt, take or assign an attempt (``setting_up``). Should checkpoint storage fail
        meanwhile, the job does not end: a new attempt is taken after a backoff (nothing of
        the failed one was assigned, so nothing is lost)."""
        try:
            await setting_up
        except StorageUnavailableError as exc:
            self._attempt_wanted = True
            delay = self._placing_backoff.failed(now)
            logger.warning(
                "pipeline %s: %s while setting up an attempt; a new attempt in %s s",
                self._graph.name, exc, f"{delay:g}",
            )  # fmt: skip
        else:
            self._placing_backoff.succeeded()

    async def _next_attempt(self, now: float) -> None:
        await self._new_attempt()
        await self._try_assign(now)

    async def _try_adopt(self, now: float) -> None:
        decision = self._placement.decide(self._liveness.alive_infos(now), now)
        if decision is None:
            return
        if isinstance(decision, Restart):
            await self._new_attempt()
            return
        self._attempt = decision.attempt
        self._tracker = await self._tracker_for(decision.attempt)
        self._take_up(decision.assignment, decision.restore_from)
        self._job.apply(JobEvent.WORKERS_READY)
        self._recovery.on_running(now)
        logger.info(
            "pipeline %s: adopted the running attempt %s (no restart): %s",
            self._graph.name, decision.attempt, decision.assignment,
        )  # fmt: skip

    async def _tracker_for(self, attempt: int) -> CheckpointTracker:
        return CheckpointTracker(
            subtasks=self._subtasks,
            next_checkpoint_id=await next_checkpoint_id(self._storage),
            attempt=attempt,
            interval_seconds=self._settings.interval_seconds,
            min_pause_seconds=self._settings.min_pause_seconds,
            timeout_seconds=self._settings.timeout_seconds,
        )

    def _take_up(self, assignment: dict[str, tuple[str, ...]], restore_from: int | None) -> Assign:
        """``assignment`` runs the current attempt, restored from ``restore_from``."""
        assert self._tracker is not None
        assign = Assign(
            attempt=self._attempt,
            restore_from=restore_from,
            next_checkpoint_id=self._tracker.next_checkpoint_id,
            assignment=assignment,
        )
        self._running = Running(
            self._tracker, assign, self._storage_backoff,
            subtasks=self._subtasks, periodic=self._settings.periodic_checkpoints,
        )  # fmt: skip
        return assign

    async def _new_attempt(self) -> None:
        """Take the next attempt durably, prepare its tracker, and start its phase one."""
        self._attempt = await self._placement.new_attempt(time.monotonic())
        self._tracker = await self._tracker_for(self._attempt)
        logger.info("pipeline %s: attempt %s", self._graph.name, self._attempt)
        self._attempt_wanted = False
        await self._broadcast(Retire(self._attempt))

    async def _try_assign(self, now: float) -> None:
        alive = {w: beat.slots for w, beat in self._liveness.alive_infos(now).items()}
        slots = self._placement.slots(alive, now)
        if slots is None:
            return

        def fell_back() -> None:
            self._restore_fallbacks += 1

        placed = await self._placement.plan(slots, fell_back)
        if isinstance(placed, CannotRestore):
            self._failure = Failure(placed.reason)
            logger.error("pipeline %s: %s", self._graph.name, placed.reason)
            self._job.apply(JobEvent.FATAL)
            return
        if placed.rebuilt:  # a new checkpoint: its id is used now
            self._tracker = await self._tracker_for(self._attempt)
        restored = placed.manifest.checkpoint_id if placed.manifest else None
        assign = self._take_up(placed.assignment, restored)
        self._job.apply(
            JobEvent.RECOVERED if self._job.state is JobState.RECOVERING else JobEvent.WORKERS_READY
        )
        self._recovery.on_running(now)
        self._placement.placed(alive)
        await self._broadcast(assign)
        logger.info(
            "attempt %s assigned from checkpoint %s: %s",
            self._attempt, assign.restore_from, placed.assignment,
        )  # fmt: skip

    # -- I/O ------------------------------------------------------------------------------

    async def _broadcast(self, message: ToWorker) -> None:
        if not self.fenced:
            await self._link.send(message)

    async def _send_trigger(self, trigger: Trigger) -> None:
        """1. tell the savepoint or the stop the checkpoint serves; 2. record its id as used (ids
        never repeat, even if this process dies right after); 3. tell every source subtask to
        take its barrier where it reads now."""
        n = trigger.checkpoint_id
        if trigger.purpose is TriggerPurpose.SAVEPOINT:
            self._savepoints.triggered(n)
        elif trigger.purpose is TriggerPurpose.FINAL and self._stopping is not None:
            self._stopping.final_triggered(n)
        if self._job.state is JobState.RUNNING:
            self._job.apply(JobEvent.CHECKPOINT_TRIGGERED)
        now = time.monotonic()
        self._stats.on_triggered(n, now, time.time())
        try:
            every = self._settings.full_checkpoint_every
            full = trigger.full or (every > 0 and n % every == 0)
            await mark_triggered(self._storage, n, full=full)
        except StorageError as exc:
            if self._running is not None:
                reason = f"checkpoint storage failed: {exc}"
                await self._execute(self._running.on_trigger_failed(n, reason, now), now)
            return
        await self._broadcast(TriggerCheckpoint(n, trigger.attempt))

"""The coordinator of one pipeline: assignment, checkpoints, failure detection, recovery.

All decisions happen in one asyncio task without locks (`Coordinator.run`); the decisions
themselves live in small sans-IO classes: `CheckpointTracker`, `JobStateMachine`,
`LivenessTracker`, `RestartPolicy`, `plan_retention`; steps 1 and 2 below are
`coordinator.placement`'s. Workers are reached only through a `CoordinatorLink`: the Kafka
control topics (`operators.runtime.kafka_control`), or an in-memory bus when coordinator and
workers share a process (`coordinator.local.LocalJob`): one coordinator loop either way.

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
import logging
import time
from datetime import UTC, datetime

from sluicegate.coordinator.adoption import Restart
from sluicegate.coordinator.assignment import unbalanced
from sluicegate.coordinator.checkpoint_stats import CheckpointStats
from sluicegate.coordinator.checkpoints.backoff import StorageBackoff
from sluicegate.coordinator.checkpoints.tracker import (
    AbortCause,
    AbortCheckpoint,
    CheckpointTracker,
    CommitManifest,
)
from sluicegate.coordinator.facts import CheckpointFacts, CoordinatorFacts, StopFacts, WorkerFacts
from sluicegate.coordinator.fencing import Fence, placed_elsewhere, take_epoch
from sluicegate.coordinator.housekeeping import Housekeeping
from sluicegate.coordinator.incidents import Failure, RecentAbort
from sluicegate.coordinator.job_state import JobEvent, JobState, JobStateMachine
from sluicegate.coordinator.liveness import LivenessTracker
from sluicegate.coordinator.numbering import mark_triggered, next_checkpoint_id
from sluicegate.coordinator.placement import Placement
from sluicegate.coordinator.recovery import Recovery
from sluicegate.coordinator.restart import GiveUp
from sluicegate.coordinator.restore_choice import CannotRestore
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
from sluicegate.operators.storage import AlreadyExistsError, Storage, StorageError
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
        self.graph = graph
        self.storage = storage
        self.manifests = ManifestStore(storage)
        self.settings = settings or CoordinatorSettings()
        self.job = JobStateMachine()
        self.liveness: LivenessTracker[Heartbeat] = LivenessTracker(
            timeout_seconds=self.settings.heartbeat_timeout_seconds
        )
        self.tracker: CheckpointTracker | None = None
        self.assign: Assign | None = None
        self.attempt = 0
        self.stats = CheckpointStats()
        """What the metrics report about checkpoints (`coordinator.metrics`)."""
        self._tracing = CheckpointTracing(tracer("sluicegate.coordinator"), pipeline=graph.name)
        self.aborts: list[RecentAbort] = []
        self.restore_fallbacks = 0
        self.failure: Failure | None = None
        """The last failure seen (the job's reason when it ends ``failed``)."""
        self._link = link or KafkaCoordinatorLink(bootstrap, graph.name)
        self._bootstrap = bootstrap
        self._subtasks = [str(s) for s in graph.subtasks()]
        self._recovery = Recovery(self.settings.restart_policy())
        """The recovering phase: when the next attempt starts (`coordinator.recovery`)."""
        self._offsets: SourceOffsets | None = None
        self._housekeeping = Housekeeping(
            storage,
            keep=self.settings.keep_checkpoints,
            audit_every=self.settings.audit_every,
            blob_gc_interval_s=self.settings.blob_gc_interval_seconds,
        )
        self._storage_backoff = StorageBackoff()
        self.placement = Placement(graph, self._subtasks, storage, self.manifests, self.settings)
        """Steps 1 and 2 of the module docstring: adoption, phase one, the plan."""
        self.stopping: StopSequence | None = None
        """The graceful stop under way or done (None: none was asked for)."""
        self.ended = asyncio.Event()
        """Set when `run` returns: the job stopped or failed, or the coordinator ended."""
        self.fence: Fence | None = None
        """This coordinator's epoch and whether a newer one fenced it (set by `run`)."""
        self.savepoints = SavepointDriver(storage, graph.name)
        """Savepoint requests of this process and their writing (`coordinator.savepoints`)."""

    @property
    def kafka(self) -> KafkaLike:
        """The Kafka cluster the job runs on."""
        return self._bootstrap

    @property
    def fenced(self) -> bool:
        """A newer coordinator of the pipeline started: this one sends nothing more and idles
        until its process is stopped (`coordinator.fencing`)."""
        return self.fence is not None and self.fence.fenced_by is not None

    @property
    def restarts(self) -> int:
        """Global recoveries since the pipeline first started, a coordinator restart included.

        Durable: every attempt after the first is one (attempts are taken in storage and never
        reused), so this survives a coordinator restart.
        """
        return max(self.attempt - 1, 0)

    def facts(self, now: float | None = None) -> CoordinatorFacts:
        """What this coordinator knows now, as one frozen copy for its readers
        (`coordinator.facts`); ``now``: monotonic seconds, for which workers are alive."""
        now = time.monotonic() if now is None else now
        stats, tracker, stop = self.stats, self._running_tracker, self.stopping
        in_flight = tracker.in_flight if tracker is not None else None
        alive = set(self.liveness.alive(now))
        workers = tuple(
            WorkerFacts(w, w in alive, entry.last_seen, entry.info)
            for w in sorted(alive | set(self.liveness.dead(now)))
            if (entry := self.liveness.get(w)) is not None
        )
        return CoordinatorFacts(
            pipeline=self.graph.name,
            state=self.job.state,
            attempt=self.attempt,
            restarts=self.restarts,
            assign=self.assign,
            failure=self.failure,
            restore_fallbacks=self.restore_fallbacks,
            fenced_by=self.fence.fenced_by if self.fence is not None else None,
            waiting_for=self.placement.waiting_for or _restart_wait(self._recovery.at, now),
            stop=None if stop is None else StopFacts(stop.phase.value, stop.completed, stop.note),
            workers=workers,
            checkpoints=CheckpointFacts(
                completed=stats.completed,
                aborted=dict(stats.aborted),
                duration=stats.duration.copy(),
                phases={phase: counts.copy() for phase, counts in stats.phases.items()},
                last_completed_id=stats.last_completed_id,
                last_completed_at=stats.last_completed_at,
                last_full_bytes=stats.last_full_bytes,
                last_incremental_bytes=stats.last_incremental_bytes,
                in_flight=in_flight,
                in_flight_triggered_at=None if in_flight is None else stats.triggered_at(in_flight),
                recent_aborts=tuple(self.aborts),
                interval_seconds=self.settings.interval_seconds,
            ),
            savepoint_outcomes=dict(self.savepoints.outcomes),
            last_savepoint=self.savepoints.last_written,
        )

    async def run(self) -> None:
        """Coordinate until cancelled; steps in the module docstring."""
        await ensure_topics(self._bootstrap, self.graph)
        try:
            async with SourceOffsets(self._bootstrap, self.graph) as offsets, self._link:
                self._offsets = offsets
                epoch = await take_epoch(self.storage)
                self.fence = Fence(epoch, self.settings.fence_check_seconds, time.monotonic())
                logger.info("pipeline %s: coordinator epoch %s", self.graph.name, epoch)
                await self._start_or_adopt()
                self.stats.seed(await self.manifests.latest())
                while not self.job.is_terminal and not self.fenced:
                    for message in await self._link.receive(0.05):
                        await self._on_message(message)
                    await self._tick(time.monotonic())
            if self.fenced:
                await asyncio.Event().wait()  # idle until stopped (`coordinator.fencing`)
        finally:
            self.savepoints.cancel()
            self.ended.set()

    async def trigger_checkpoint(self, *, full: bool = False) -> int | None:
        """Trigger a checkpoint now if the tracker allows it (``full``: a full one); its id,
        or None. Raises `FencedError` once fenced (as do a stop and a savepoint)."""
        self._refuse_if_fenced()
        if self.tracker is None or self.assign is None:
            return None
        trigger = self.tracker.trigger(time.monotonic(), forced=True)
        if trigger is None:
            return None
        await self._send_trigger(trigger.checkpoint_id, trigger.attempt, full=full)
        return trigger.checkpoint_id

    def request_stop(self, *, final_checkpoint: bool = True) -> None:
        """Stop the job gracefully (step 4 of the module docstring), with a final checkpoint
        unless ``final_checkpoint`` is False. Nothing happens if the job is already stopping
        or has ended."""
        self._refuse_if_fenced()
        if self.job.state is JobState.STOPPING or self.job.is_terminal:
            return
        tracker = self._running_tracker
        self.stopping = StopSequence(
            final_checkpoint=final_checkpoint,
            in_flight=tracker.in_flight if tracker is not None else None,
            running_attempt=tracker is not None,
            timeout_seconds=self.settings.stop_timeout_seconds,
        )
        self._recovery.cancel()
        self.job.apply(JobEvent.STOP_REQUESTED)
        logger.info(
            "pipeline %s: stopping (%s)", self.graph.name,
            "final checkpoint first" if final_checkpoint else "no final checkpoint",
        )  # fmt: skip

    async def request_savepoint(
        self, name: str | None = None, *, stop: bool = False
    ) -> SavepointRequest:
        """Ask for savepoint ``name`` (default: pipeline and time): from a checkpoint triggered
        for it, or with ``stop`` from the final checkpoint of a graceful stop, which this
        starts (`coordinator.savepoints`). Raises `SavepointRefusedError` saying why not."""
        self._refuse_if_fenced()
        busy = self.job.is_terminal or self.job.state is JobState.STOPPING
        request = await self.savepoints.request(
            name, stop=stop, refusal=f"the job is {self.job.state.value}" if busy else None
        )
        if stop:
            self.request_stop(final_checkpoint=True)
        return request

    # -- decisions ------------------------------------------------------------------------

    async def _tick(self, now: float) -> None:
        """One pass of the loop: the phase the job is in decides what happens now."""
        if self.job.is_terminal:
            return  # e.g. a message just made the job give up: nothing to assign any more
        if await self._newly_fenced(now):
            return
        if self.placement.adopting:
            if self.stopping is None:
                await self._try_adopt(now)
                return
            self.placement.give_up_adoption()  # a stop before the decision: a new attempt's way
            await self._new_attempt()
        await self._forget_dead_workers(now)
        if self.stopping is not None:
            await self._drive_stop(self.stopping, now)
        elif self._recovery.due(now):
            await self._new_attempt()
            await self._try_assign(now)
        elif self.assign is None:
            if not self._recovery.pending:
                await self._try_assign(now)
        else:
            await self._drive_checkpoints(now)

    async def _newly_fenced(self, now: float) -> bool:
        fence = self.fence
        return fence is not None and fence.due(now) and await fence.check(self.storage, now)

    async def _forget_dead_workers(self, now: float) -> None:
        for worker in self.liveness.dead(now):
            self.liveness.forget(worker)
            if self._assigned(worker):
                await self._fail(f"worker {worker} missed its heartbeats", now)

    async def _drive_checkpoints(self, now: float) -> None:
        """The running phase: trigger what is due (a savepoint's checkpoint first, then the
        periodic one), and abort a checkpoint that timed out."""
        if self.tracker is None:
            return
        waiting = self.savepoints.wants_checkpoint()
        if waiting is not None and (trigger := self.tracker.trigger(now, forced=True)):
            waiting.triggered(trigger.checkpoint_id)
            await self._send_trigger(trigger.checkpoint_id, trigger.attempt)
        if self._periodic_due(now) and (trigger := self.tracker.trigger(now)):
            await self._send_trigger(trigger.checkpoint_id, trigger.attempt)
        if (abort := self.tracker.on_tick(now)) is not None:
            await self._abort(abort)

    async def _on_message(self, message: FromWorker) -> None:
        now = time.monotonic()
        if isinstance(message, Heartbeat):
            await self._on_heartbeat(message, now)
        elif isinstance(message, Retired):
            if (retiring := self.placement.retiring) is not None:
                retiring.on_retired(message.worker_id, message.attempt)
        elif self.tracker is None or self.assign is None:
            return  # recovering: the new attempt gets a new tracker
        elif isinstance(message, CheckpointAck):
            await self._on_ack(self.tracker, message, now)
        elif isinstance(message, CheckpointDecline):
            abort = self.tracker.on_decline(
                message.checkpoint_id, message.attempt, message.subtask, message.reason, now
            )
            if abort is not None:
                await self._abort(abort)
        elif isinstance(message, SubtaskFailed) and message.attempt == self.attempt:
            if message.corrupt_checkpoint is not None:
                logger.error(
                    "checkpoint %s is corrupt (%s): falling back to the previous checkpoint",
                    message.corrupt_checkpoint, message.reason,
                )  # fmt: skip
                self.restore_fallbacks += 1  # first: whoever sees the mark sees the count
                await self.manifests.mark_corrupt(message.corrupt_checkpoint, message.reason)
            await self._fail(
                f"subtask {message.subtask} failed: {message.reason}", now, message.subtask
            )

    async def _on_heartbeat(self, beat: Heartbeat, now: float) -> None:
        known = self.liveness.get(beat.worker_id)
        self.liveness.on_heartbeat(beat.worker_id, now, beat)
        if known is None:
            logger.info("worker %s joined with %s slots", beat.worker_id, beat.slots)
        elif known.info.incarnation != beat.incarnation and self._assigned(beat.worker_id):
            # Restarted under the same id: its subtasks are gone, the others run on.
            await self._fail(f"worker {beat.worker_id} restarted and lost its subtasks", now)
            return
        if beat.attempt > self.attempt and not self.placement.adopting:
            # Placed by another coordinator: this one is fenced, or takes the workers back.
            elsewhere = await placed_elsewhere(
                self.fence, self.storage, beat.worker_id, beat.attempt, now
            )
            if elsewhere is not None:
                await self._fail(elsewhere, now)
            return
        if self.stopping is None and self.assign and beat.attempt != self.assign.attempt:
            await self._broadcast(self.assign)  # it missed the assignment: send it again
        elif (retiring := self.placement.retiring) and beat.worker_id not in retiring.retired:
            await self._broadcast(Retire(retiring.attempt))  # joined, or missed it

    async def _on_ack(self, tracker: CheckpointTracker, ack: CheckpointAck, now: float) -> None:
        commit = tracker.on_ack(ack)
        if commit is None:
            return
        manifest = await self._commit(tracker, commit, now)
        if manifest is None:
            return
        done = tracker.on_manifest_committed(commit.checkpoint_id, now)
        if done is None:
            return
        self._storage_backoff.succeeded()
        self.stats.on_completed(manifest, time.monotonic())
        if self.job.state is JobState.CHECKPOINTING:
            self.job.apply(JobEvent.CHECKPOINT_ENDED)
        await self._broadcast(CheckpointCompleted(done.checkpoint_id, done.attempt))
        if self.stopping is not None:
            self.stopping.checkpoint_ended(done.checkpoint_id, completed=True)
        self.savepoints.on_completed(manifest)
        if self._offsets is not None:
            await self._offsets.commit(manifest)
        pinned = (self.assign.restore_from,) if self.assign and self.assign.restore_from else ()
        await self._housekeeping.after_completed(
            self.stats.completed, pinned=(*pinned, *self.savepoints.pinned())
        )
        await self._rebalance(now)

    async def _commit(
        self, tracker: CheckpointTracker, commit: CommitManifest, now: float
    ) -> CheckpointManifest | None:
        """1. build the manifest from the acks; 2. commit it with create-if-absent; 3. the
        committed manifest, or None after aborting the checkpoint (the manifest exists already,
        or storage failed: the job runs on, and periodic checkpoints back off)."""
        manifest = CheckpointManifest.from_acks(
            self.graph.name, commit.checkpoint_id, commit.attempt, commit.acks,
            triggered_at=self.stats.triggered_at(commit.checkpoint_id),
            state_versions={u: s.state_versions.current for u, s in self.graph.operators.items()},
        )  # fmt: skip
        started = time.time()
        try:
            await self.manifests.commit(manifest)
        except AlreadyExistsError:
            reason = "the manifest exists already"
        except StorageError as exc:
            reason = f"checkpoint storage failed: {exc}"
            self._storage_backoff.failed(now)
        else:
            self._tracing.committed(manifest, started, time.time())
            return manifest
        if (abort := tracker.on_manifest_failed(commit.checkpoint_id, reason, now)) is not None:
            await self._abort(abort)
        return None

    async def _rebalance(self, now: float) -> None:
        """Reassign when the live workers call for another plan (a worker joined): through
        recovery from the checkpoint that just completed, with no restart delay (nothing
        failed, so the restart policy is left alone)."""
        if self.assign is None or self.stopping is not None or self.job.is_terminal:
            return
        slots = {w: beat.slots for w, beat in self.liveness.alive_infos(now).items()}
        plan = unbalanced(self._subtasks, slots, self.assign.assignment)
        if plan is None:
            return
        logger.info(
            "pipeline %s: rebalancing over workers %s (planned %s)",
            self.graph.name, sorted(slots), plan,
        )  # fmt: skip
        self.job.apply(JobEvent.FAILURE_DETECTED)
        self.assign = None
        self._recovery.rebalance(now)

    async def _abort(self, abort: AbortCheckpoint) -> None:
        logger.warning("checkpoint %s aborted: %s", abort.checkpoint_id, abort.reason)
        self._tracing.aborted(
            abort.checkpoint_id, abort.attempt, abort.reason,
            self.stats.triggered_at(abort.checkpoint_id), time.time(),
        )  # fmt: skip
        self.stats.on_aborted(abort.cause)
        self.aborts = [
            *self.aborts[-9:],
            RecentAbort(abort.checkpoint_id, abort.attempt, abort.reason, time.time()),
        ]
        if self.job.state is JobState.CHECKPOINTING:
            self.job.apply(JobEvent.CHECKPOINT_ENDED)
        await self._broadcast(CheckpointAborted(abort.checkpoint_id, abort.attempt, abort.reason))
        if self.stopping is not None:
            self.stopping.checkpoint_ended(
                abort.checkpoint_id, completed=False, reason=abort.reason
            )
        self.savepoints.on_aborted(abort.checkpoint_id, abort.reason)

    async def _fail(self, reason: str, now: float, subtask: str | None = None) -> None:
        if self._recovery.pending or self.job.is_terminal:
            return
        self.failure = Failure(reason, subtask)
        if self.stopping is not None:
            logger.warning("pipeline %s: failure while stopping: %s", self.graph.name, reason)
            self.job.apply(JobEvent.FAILURE_DETECTED)  # stays stopping: nothing to recover
            self.stopping.on_failure(reason)
            return
        logger.warning("recovering pipeline %s: %s", self.graph.name, reason)
        if self.tracker is not None and self.tracker.in_flight is not None:
            self.stats.on_aborted(AbortCause.RECOVERY)  # its acks are ignored from now on
        self.savepoints.on_recovery()
        self.job.apply(JobEvent.FAILURE_DETECTED)
        self.assign = None
        if isinstance(decision := self._recovery.on_failure(now), GiveUp):
            logger.error("pipeline %s failed: %s", self.graph.name, decision.reason)
            self.job.apply(JobEvent.RESTARTS_EXHAUSTED)

    async def _drive_stop(self, stop: StopSequence, now: float) -> None:
        """Do what the stop sequence asks for now; `coordinator.stopping` has its phases."""
        tracker = self._running_tracker
        if tracker is not None and (abort := tracker.on_tick(now)) is not None:
            await self._abort(abort)  # the final checkpoint timed out
        assignment = self.assign.assignment if self.assign is not None else {}
        running = still_running(self.liveness.alive_infos(now), assignment, self.attempt)
        in_flight = tracker is not None and tracker.in_flight is not None
        match stop.on_tick(now, checkpoint_in_flight=in_flight, running=running):
            case TriggerFinal():
                trigger = tracker.trigger(now, forced=True) if tracker is not None else None
                if trigger is not None:
                    stop.final_triggered(trigger.checkpoint_id)
                    await self._send_trigger(trigger.checkpoint_id, trigger.attempt)
            case SendStop():
                await self._broadcast(StopSubtasks(self.attempt))
            case Finish(unconfirmed=unconfirmed):
                if unconfirmed:
                    logger.warning(
                        "pipeline %s: subtasks %s did not confirm the stop within %.0f s",
                        self.graph.name, ", ".join(unconfirmed),
                        self.settings.stop_timeout_seconds,
                    )  # fmt: skip
                await self.savepoints.on_stopped(self.manifests, stop.completed)
                self.job.apply(JobEvent.STOPPED)
                final = stop.completed
                logger.info(
                    "pipeline %s stopped; %s", self.graph.name,
                    f"final checkpoint {final}" if final is not None
                    else f"no final checkpoint{': ' + stop.note if stop.note else ''}; the next "
                    f"start resumes from checkpoint {self.stats.last_completed_id}",
                )  # fmt: skip

    def _refuse_if_fenced(self) -> None:
        if self.fence is not None:
            self.fence.refuse()

    def _periodic_due(self, now: float) -> bool:
        return self.settings.periodic_checkpoints and not self._storage_backoff.waiting(now)

    @property
    def _running_tracker(self) -> CheckpointTracker | None:
        """The tracker of the attempt whose subtasks are assigned (None while recovering)."""
        return self.tracker if self.assign is not None else None

    def _assigned(self, worker: str) -> bool:
        return bool(self.assign and self.assign.assignment.get(worker))

    async def _start_or_adopt(self) -> None:
        """Step 1 of the module docstring: adopt when the newest plan's workers may still run
        it, else a new attempt."""
        if not await self.placement.start(time.monotonic()):
            await self._new_attempt()

    async def _try_adopt(self, now: float) -> None:
        decision = self.placement.decide(self.liveness.alive_infos(now), now)
        if decision is None:
            return
        if isinstance(decision, Restart):
            await self._new_attempt()
            return
        self.attempt = decision.attempt
        self.tracker = await self._tracker_for(decision.attempt)
        self._take_up(decision.assignment, decision.restore_from)
        self.job.apply(JobEvent.WORKERS_READY)
        self._recovery.on_running(now)
        logger.info(
            "pipeline %s: adopted the running attempt %s (no restart): %s",
            self.graph.name, decision.attempt, decision.assignment,
        )  # fmt: skip

    async def _tracker_for(self, attempt: int) -> CheckpointTracker:
        return CheckpointTracker(
            subtasks=self._subtasks,
            next_checkpoint_id=await next_checkpoint_id(self.storage),
            attempt=attempt,
            interval_seconds=self.settings.interval_seconds,
            min_pause_seconds=self.settings.min_pause_seconds,
            timeout_seconds=self.settings.timeout_seconds,
        )

    def _take_up(self, assignment: dict[str, tuple[str, ...]], restore_from: int | None) -> Assign:
        """``assignment`` runs the current attempt, restored from ``restore_from``."""
        assert self.tracker is not None
        self.assign = Assign(
            attempt=self.attempt,
            restore_from=restore_from,
            next_checkpoint_id=self.tracker.next_checkpoint_id,
            assignment=assignment,
        )
        return self.assign

    async def _new_attempt(self) -> None:
        """Take the next attempt durably, prepare its tracker, and start its phase one."""
        self.attempt = await self.placement.new_attempt(time.monotonic())
        self.tracker = await self._tracker_for(self.attempt)
        logger.info("pipeline %s: attempt %s", self.graph.name, self.attempt)
        await self._broadcast(Retire(self.attempt))

    async def _try_assign(self, now: float) -> None:
        alive = {w: beat.slots for w, beat in self.liveness.alive_infos(now).items()}
        slots = self.placement.slots(alive, now)
        if slots is None:
            return

        def fell_back() -> None:
            self.restore_fallbacks += 1

        placed = await self.placement.plan(slots, fell_back)
        if isinstance(placed, CannotRestore):
            self.failure = Failure(placed.reason)
            logger.error("pipeline %s: %s", self.graph.name, placed.reason)
            self.job.apply(JobEvent.FATAL)
            return
        if placed.rebuilt:  # a new checkpoint: its id is used now
            self.tracker = await self._tracker_for(self.attempt)
        restored = placed.manifest.checkpoint_id if placed.manifest else None
        assign = self._take_up(placed.assignment, restored)
        self.job.apply(
            JobEvent.RECOVERED if self.job.state is JobState.RECOVERING else JobEvent.WORKERS_READY
        )
        self._recovery.on_running(now)
        self.placement.placed(alive)
        await self._broadcast(assign)
        logger.info(
            "attempt %s assigned from checkpoint %s: %s",
            self.attempt, assign.restore_from, placed.assignment,
        )  # fmt: skip

    # -- I/O ------------------------------------------------------------------------------

    async def _broadcast(self, message: ToWorker) -> None:
        if not self.fenced:
            await self._link.send(message)

    async def _send_trigger(self, checkpoint_id: int, attempt: int, *, full: bool = False) -> None:
        """1. record ``checkpoint_id`` as used (ids never repeat, even if this process dies
        right after); 2. tell every source subtask to take its barrier where it reads now."""
        if self.job.state is JobState.RUNNING:
            self.job.apply(JobEvent.CHECKPOINT_TRIGGERED)
        now = time.monotonic()
        self.stats.on_triggered(checkpoint_id, now, time.time())
        try:
            every = self.settings.full_checkpoint_every
            full = full or (every > 0 and checkpoint_id % every == 0)
            await mark_triggered(self.storage, checkpoint_id, full=full)
        except StorageError as exc:
            self._storage_backoff.failed(now)
            abort = None if self.tracker is None else self.tracker.on_trigger_failed(
                checkpoint_id, f"checkpoint storage failed: {exc}", now
            )  # fmt: skip
            if abort is not None:
                await self._abort(abort)
            return
        await self._broadcast(TriggerCheckpoint(checkpoint_id, attempt))


def _restart_wait(at: float | None, now: float) -> str | None:
    """What a recovery waits for while its restart delay runs (None: it does not wait)."""
    if at is None or at <= now:
        return None
    until = datetime.fromtimestamp(time.time() + at - now, UTC).strftime("%H:%M:%S UTC")
    return f"the restart delay: the next attempt starts in {at - now:.1f} s, at {until}"

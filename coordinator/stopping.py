"""Stopping a job gracefully, sans-IO: a final checkpoint, then every subtask stops.

`sluicegate stop` (``POST /stop``) moves the job to ``stopping``; the coordinator then feeds
:class:`StopSequence` what it observes and does what it answers. The phases::

    phase            observed                                  -> phase          action
    ---------------  ----------------------------------------  ---------------  ------------
    want_checkpoint  tick, no checkpoint in flight             -> (same)         TriggerFinal
    want_checkpoint  final_triggered(n)                        -> checkpointing
    want_checkpoint  a failure, or no running attempt          -> send_stop
    checkpointing    checkpoint_ended(n, completed or not)     -> send_stop
    checkpointing    a failure                                 -> send_stop
    send_stop        tick                                      -> draining       SendStop
    draining         tick, no subtask still running            -> done           Finish
    draining         tick, past the deadline                   -> done           Finish
    draining         tick, subtasks still running, resend due  -> (same)         SendStop
    done             (terminal)

A checkpoint already in flight when the stop is asked for becomes the final one. The final
checkpoint's ``completed(n)`` is broadcast before the stop, on the same single-partition control
topic, so every subtask publishes its sink outputs of ``n`` before it stops. Without a final
checkpoint (``--no-checkpoint``, it aborted, or a worker failed while stopping) the job still
stops, and the next start resumes from the last completed checkpoint, replaying what came after
it (exactly-once holds either way; a final checkpoint only spares the replay).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from sluicegate.operators.protocol.messages import Heartbeat

__all__ = ["Finish", "SendStop", "StopPhase", "StopSequence", "TriggerFinal", "still_running"]


def still_running(
    beats: Mapping[str, Heartbeat], assignment: Mapping[str, tuple[str, ...]], attempt: int
) -> frozenset[str]:
    """Subtasks not known to have stopped, from the last heartbeats of the live workers.

    A heartbeat lists the subtasks its worker runs; one from before the worker took up
    ``attempt`` says nothing of the subtasks ``assignment`` gave it, which may be starting.
    """
    return frozenset(
        subtask
        for worker, beat in beats.items()
        for subtask in (
            *beat.subtasks,
            *(assignment.get(worker, ()) if beat.attempt < attempt else ()),
        )
    )


class StopPhase(StrEnum):
    WANT_CHECKPOINT = "want_checkpoint"
    CHECKPOINTING = "checkpointing"
    SEND_STOP = "send_stop"
    DRAINING = "draining"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class TriggerFinal:
    """Trigger a checkpoint now and report its id with `StopSequence.final_triggered`."""


@dataclass(frozen=True, slots=True)
class SendStop:
    """Tell every worker to stop the subtasks of the current attempt."""


@dataclass(frozen=True, slots=True)
class Finish:
    """The job is stopped; ``unconfirmed`` subtasks were still reported running at the deadline."""

    unconfirmed: tuple[str, ...]


class StopSequence:
    """The phases of one graceful stop; see the module docstring.

    Times are seconds on the caller's clock. ``timeout_seconds`` bounds the wait for subtasks
    once the stop is sent (the final checkpoint before it has the checkpoint timeout): a
    subtask still reported running then is left to stop when a worker hears of a newer
    attempt (its outputs after the last completed checkpoint are never published).
    """

    def __init__(
        self,
        *,
        final_checkpoint: bool,
        in_flight: int | None,
        running_attempt: bool,
        timeout_seconds: float = 60.0,
        resend_seconds: float = 2.0,
    ) -> None:
        """``in_flight``: the checkpoint in flight now (it becomes the final one);
        ``running_attempt``: whether subtasks of the current attempt were assigned (a job
        waiting to recover has none to take a checkpoint of)."""
        self.final_checkpoint: int | None = None
        """The final checkpoint once it is triggered (adopted, when one was in flight)."""
        self.completed: int | None = None
        """The final checkpoint, once it completed."""
        self.note = ""
        """Why the stop has no final checkpoint (empty when it has one or none was wanted)."""
        self._timeout = timeout_seconds
        self._resend = resend_seconds
        self._sent_at: float | None = None
        self._deadline = 0.0
        if not final_checkpoint:
            self.phase = StopPhase.SEND_STOP
        elif not running_attempt:
            self.phase = StopPhase.SEND_STOP
            self.note = "no attempt was running (the job was recovering)"
        elif in_flight is not None:
            self.phase = StopPhase.CHECKPOINTING
            self.final_checkpoint = in_flight
        else:
            self.phase = StopPhase.WANT_CHECKPOINT

    @property
    def done(self) -> bool:
        return self.phase is StopPhase.DONE

    def on_tick(
        self, now: float, *, checkpoint_in_flight: bool, running: frozenset[str]
    ) -> TriggerFinal | SendStop | Finish | None:
        """What to do now; ``running``: subtasks not known to have stopped (`still_running`)."""
        match self.phase:
            case StopPhase.WANT_CHECKPOINT:
                return None if checkpoint_in_flight else TriggerFinal()
            case StopPhase.SEND_STOP:
                self.phase = StopPhase.DRAINING
                self._sent_at = now
                self._deadline = now + self._timeout
                return SendStop()
            case StopPhase.DRAINING:
                if not running or now >= self._deadline:
                    self.phase = StopPhase.DONE
                    return Finish(tuple(sorted(running)))
                assert self._sent_at is not None
                if now - self._sent_at >= self._resend:
                    self._sent_at = now
                    return SendStop()
                return None
            case _:
                return None

    def final_triggered(self, checkpoint_id: int) -> None:
        """The checkpoint `TriggerFinal` asked for is in flight as ``checkpoint_id``."""
        if self.phase is StopPhase.WANT_CHECKPOINT:
            self.phase = StopPhase.CHECKPOINTING
            self.final_checkpoint = checkpoint_id

    def checkpoint_ended(self, checkpoint_id: int, *, completed: bool, reason: str = "") -> None:
        """Checkpoint ``checkpoint_id`` completed or aborted (``reason``)."""
        if self.phase is not StopPhase.CHECKPOINTING or checkpoint_id != self.final_checkpoint:
            return
        self.phase = StopPhase.SEND_STOP
        if completed:
            self.completed = checkpoint_id
        else:
            self.note = f"the final checkpoint {checkpoint_id} aborted: {reason}"

    def on_failure(self, reason: str) -> None:
        """A worker or subtask failed: give up the final checkpoint, stop what is left."""
        if self.phase in (StopPhase.WANT_CHECKPOINT, StopPhase.CHECKPOINTING):
            self.phase = StopPhase.SEND_STOP
            self.note = f"a failure while stopping: {reason}"

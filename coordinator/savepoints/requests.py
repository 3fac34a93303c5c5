"""One savepoint request, sans-IO: which checkpoint it is written from and how far it got.

``sluicegate savepoint create [--name N]`` (``POST /savepoints``) asks for a savepoint of the
running job; ``--stop`` asks for one as the job stops. The phases::

    phase        observed                                        -> phase
    -----------  ----------------------------------------------  -----------
    waiting      triggered(n) (a checkpoint for this savepoint)  -> checkpointing
    checkpoint-  checkpoint_abandoned() (a recovery)              -> waiting
    waiting      stop: the job stopped (final checkpoint n, or   -> writing
                 the last completed one)
    checkpoint-  checkpoint_completed(n)                          -> writing
    ing          checkpoint_aborted(n, reason)                    -> failed
    writing      progress(...)                                    -> writing
    writing      written(manifest) / failed(reason)               -> completed / failed

A plain request triggers its own checkpoint (so the savepoint holds the state as of the
request, not of an older checkpoint); a stop's savepoint is written from the stop's final
checkpoint, after every subtask stopped and the sinks published. The savepoint is written
from storage only, while the job runs on; the checkpoint it is written from is kept from
retention until it is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from sluicegate.operators.savepoints.progress import SavepointProgress

__all__ = ["SavepointPhase", "SavepointRequest"]


class SavepointPhase(StrEnum):
    WAITING = "waiting"
    CHECKPOINTING = "checkpointing"
    WRITING = "writing"
    COMPLETED = "completed"
    FAILED = "failed"


@dataclass(slots=True)
class SavepointRequest:
    """One savepoint request and how far it got; the phases in the module docstring."""

    name: str
    stop: bool
    requested_at: float
    """Unix time."""
    phase: SavepointPhase = SavepointPhase.WAITING
    checkpoint_id: int | None = None
    """The checkpoint it is (to be) written from."""
    progress: SavepointProgress = field(default_factory=lambda: SavepointProgress(0, 0, 0, 0))
    error: str = ""
    finished_at: float | None = None

    @property
    def done(self) -> bool:
        return self.phase in (SavepointPhase.COMPLETED, SavepointPhase.FAILED)

    @property
    def pinned(self) -> int | None:
        """The checkpoint retention must keep for this request now (None: none)."""
        return self.checkpoint_id if self.phase is SavepointPhase.WRITING else None

    def triggered(self, checkpoint_id: int) -> None:
        if self.phase is SavepointPhase.WAITING and not self.stop:
            self.phase = SavepointPhase.CHECKPOINTING
            self.checkpoint_id = checkpoint_id

    def checkpoint_completed(self, checkpoint_id: int) -> bool:
        """Whether writing starts now (``checkpoint_id`` is this request's checkpoint)."""
        if self.phase is SavepointPhase.CHECKPOINTING and checkpoint_id == self.checkpoint_id:
            self.phase = SavepointPhase.WRITING
            return True
        return False

    def checkpoint_abandoned(self) -> None:
        """A recovery abandoned the checkpoint in flight: trigger another one."""
        if self.phase is SavepointPhase.CHECKPOINTING:
            self.phase = SavepointPhase.WAITING
            self.checkpoint_id = None

    def checkpoint_aborted(self, checkpoint_id: int, reason: str, now: float) -> None:
        if self.phase is SavepointPhase.CHECKPOINTING and checkpoint_id == self.checkpoint_id:
            self.failed(f"its checkpoint {checkpoint_id} aborted: {reason}", now)

    def stopped(self, checkpoint_id: int | None, now: float) -> bool:
        """The job stopped; ``checkpoint_id``: the newest completed checkpoint (the final one,
        when it completed). Whether writing starts now."""
        if not self.stop or self.done:
            return False
        if checkpoint_id is None:
            self.failed("the job has no completed checkpoint to write it from", now)
            return False
        self.phase = SavepointPhase.WRITING
        self.checkpoint_id = checkpoint_id
        return True

    def on_progress(self, progress: SavepointProgress) -> None:
        self.progress = progress

    def written(self, now: float) -> None:
        self.phase = SavepointPhase.COMPLETED
        self.finished_at = now

    def failed(self, reason: str, now: float) -> None:
        if not self.done:
            self.phase = SavepointPhase.FAILED
            self.error = reason
            self.finished_at = now

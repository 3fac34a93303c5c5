"""One checkpoint in flight at the coordinator: who must ack, who has, and whether it is over.

A :class:`PendingCheckpoint` collects one :class:`CheckpointAck` per subtask. It is *complete*
when every subtask has acked, *declined* as soon as one subtask declines, and *timed out* once
the clock passes its deadline. It decides nothing else: the
:class:`~coordinator.checkpoints.tracker.CheckpointTracker` acts on what it says.
"""

from __future__ import annotations

from collections.abc import Collection

from sluicegate.operators.protocol.exceptions import ProtocolViolationError
from sluicegate.operators.protocol.messages import CheckpointAck

__all__ = ["PendingCheckpoint"]


class PendingCheckpoint:
    """Checkpoint ``checkpoint_id`` of ``attempt``, waiting for the acks of ``subtasks``.

    ``deadline`` is ``triggered_at + timeout_seconds`` on the injected clock.
    """

    def __init__(
        self,
        checkpoint_id: int,
        *,
        attempt: int,
        subtasks: Collection[str],
        triggered_at: float,
        timeout_seconds: float,
    ) -> None:
        if not subtasks:
            raise ProtocolViolationError("a checkpoint needs at least one subtask to ack it")
        self.checkpoint_id = checkpoint_id
        self.attempt = attempt
        self.triggered_at = triggered_at
        self.deadline = triggered_at + timeout_seconds
        self._expected = frozenset(subtasks)
        self._acks: dict[str, CheckpointAck] = {}
        self._decline: tuple[str, str] | None = None

    @property
    def expected(self) -> frozenset[str]:
        """The subtasks that must ack."""
        return self._expected

    @property
    def missing(self) -> frozenset[str]:
        """The subtasks that have not acked yet (a scan of every subtask: for messages, not
        for the per-ack path)."""
        return self._expected - self._acks.keys()

    @property
    def acks(self) -> tuple[CheckpointAck, ...]:
        """The acks received so far, ordered by subtask."""
        return tuple(self._acks[subtask] for subtask in sorted(self._acks))

    @property
    def is_complete(self) -> bool:
        """Every subtask has acked and none declined.

        Asked on every ack and every tick, so it counts instead of comparing sets: only
        expected subtasks are recorded (`add_ack`), once each, so as many acks as expected
        subtasks means all of them (a set difference here made a checkpoint of ``n`` subtasks
        cost ``n**2``)."""
        return self._decline is None and len(self._acks) == len(self._expected)

    @property
    def declined(self) -> tuple[str, str] | None:
        """``(subtask, reason)`` of the first decline, if any."""
        return self._decline

    def is_timed_out(self, now: float) -> bool:
        """The deadline has passed and the checkpoint is still not complete."""
        return not self.is_complete and now >= self.deadline

    def add_ack(self, ack: CheckpointAck) -> bool:
        """Record ``ack``; ``True`` if it was new.

        A repeated ack (the control topic delivers at least once) is ignored.

        Raises:
            ProtocolViolationError: the ack is for another checkpoint or attempt, comes from
                a subtask that is not expected, or contradicts an earlier ack of the subtask.
        """
        if ack.checkpoint_id != self.checkpoint_id or ack.attempt != self.attempt:
            raise ProtocolViolationError(
                f"ack of checkpoint {ack.checkpoint_id} (attempt {ack.attempt}) fed to "
                f"checkpoint {self.checkpoint_id} (attempt {self.attempt})"
            )
        self._check_expected(ack.subtask)
        earlier = self._acks.get(ack.subtask)
        if earlier is not None:
            if earlier != ack:
                raise ProtocolViolationError(
                    f"subtask {ack.subtask} acked checkpoint {self.checkpoint_id} twice, "
                    "with different contents"
                )
            return False
        self._acks[ack.subtask] = ack
        return True

    def add_decline(self, subtask: str, reason: str) -> bool:
        """Record that ``subtask`` declined; ``True`` if this is the first decline."""
        self._check_expected(subtask)
        if self._decline is not None:
            return False
        self._decline = (subtask, reason)
        return True

    def _check_expected(self, subtask: str) -> None:
        if subtask not in self._expected:
            raise ProtocolViolationError(
                f"subtask {subtask} is not part of checkpoint {self.checkpoint_id}"
            )

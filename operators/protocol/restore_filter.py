"""Which records a subtask of attempt ``A`` processes, sans-IO.

After a global recovery at attempt ``A`` from checkpoint ``m``, each subtask seeks every input
partition to ``R_p(m)`` and from there processes a record only if it is stamped with attempt
``A``; source records carry no stamp and are all processed. A record of an older attempt is
either in the snapshot already (interval ≤ m) or an orphan that its writer is about to write
again (interval > m); markers of an older attempt are ignored the same way. A record of a
*newer* attempt proves that a recovery happened without this subtask: it is a zombie and must
stop (:class:`Fenced`).

The filter runs before the :class:`~operators.protocol.alignment.BarrierAligner`: only what
it accepts reaches the aligner. It is used from the first attempt on, not only after a restore.
"""

from __future__ import annotations

from dataclasses import dataclass

from sluicegate.operators.protocol.exceptions import ProtocolViolationError
from sluicegate.operators.protocol.records import RecordMeta

__all__ = ["Accept", "Fenced", "RestoreFilter", "Skip"]


@dataclass(frozen=True, slots=True)
class Accept:
    """Pass the record on (to the aligner, then to processing)."""


@dataclass(frozen=True, slots=True)
class Skip:
    """Drop the record: it was written by an older attempt."""

    attempt: int


@dataclass(frozen=True, slots=True)
class Fenced:
    """This subtask is a zombie: a record of ``newer_attempt`` exists. Stop, process nothing."""

    attempt: int
    newer_attempt: int


class RestoreFilter:
    """Decides, per record, whether a subtask of ``attempt`` processes it.

    ``restored_checkpoint_id`` is the checkpoint the subtask was restored from (``None`` for
    none). It only sharpens a sanity check: a record of this attempt has an interval newer
    than that checkpoint, since every writer of this attempt restarted from it.
    """

    def __init__(self, attempt: int, *, restored_checkpoint_id: int | None = None) -> None:
        self._attempt = attempt
        self._restored = restored_checkpoint_id
        self.fenced_by: int | None = None
        """The newer attempt that fenced this subtask, once one has (set by `decide` only;
        an attribute, not a property: `Inputs.classify` reads it for every record)."""

    @property
    def attempt(self) -> int:
        """The attempt of this subtask."""
        return self._attempt

    def decide(self, meta: RecordMeta | None) -> Accept | Skip | Fenced:
        """Accept, skip or fence on one record, given its decoded headers.

        ``meta`` is ``None`` for a source record, which is always accepted. Once fenced, the
        answer is :class:`Fenced` for every record: a zombie does not come back.

        Raises:
            ProtocolViolationError: a record of this attempt has an interval not newer than
                the restored checkpoint.
        """
        if self.fenced_by is not None:
            return Fenced(self._attempt, self.fenced_by)
        if meta is None:
            return Accept()
        if meta.attempt > self._attempt:
            self.fenced_by = meta.attempt
            return Fenced(self._attempt, meta.attempt)
        if meta.attempt < self._attempt:
            return Skip(meta.attempt)
        if self._restored is not None and meta.interval <= self._restored:
            raise ProtocolViolationError(
                f"writer {meta.writer!r} of attempt {meta.attempt} stamped interval "
                f"{meta.interval}, which checkpoint {self._restored} already holds"
            )
        return Accept()

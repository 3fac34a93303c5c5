"""What went wrong lately, as the coordinator reports it (``sluicegate status``, the API): the
last failure and the recent checkpoint aborts."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Failure", "RecentAbort"]


@dataclass(frozen=True, slots=True)
class Failure:
    """The last failure the coordinator saw: ``subtask`` names the failed subtask, if one."""

    reason: str
    subtask: str | None = None


@dataclass(frozen=True, slots=True)
class RecentAbort:
    """Checkpoint ``checkpoint_id`` of ``attempt`` was aborted at ``at`` (epoch seconds)."""

    checkpoint_id: int
    attempt: int
    reason: str
    at: float

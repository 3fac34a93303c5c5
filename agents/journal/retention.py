"""`Retention`: when a finished run's journal entries may be tombstoned (sans-IO).

A run's entries must outlive every checkpoint a restore could go back to while the run was not
yet finished. Its entries go once checkpoint ``n + JOURNAL_LAG`` has completed, where ``n`` is
the first checkpoint holding the run's final state; the lag covers a restore falling back to
an earlier checkpoint than the newest. A run whose rollback starts is no longer finished: its
pending tombstoning is called off, and its next final state schedules it again.
"""

from __future__ import annotations

__all__ = ["JOURNAL_LAG", "Retention"]

JOURNAL_LAG = 2
"""Completed checkpoints after the first one holding a run's final state before its journal
entries are tombstoned."""

_Run = tuple[str, int]
"""A run id and the tasks partition holding it."""


class Retention:
    """Finished runs, by the first checkpoint that holds them finished."""

    def __init__(self, lag: int = JOURNAL_LAG) -> None:
        self._lag = lag
        self._finished: list[_Run] = []  # since the last snapshot
        self._scheduled: list[tuple[int, list[_Run]]] = []  # (checkpoint, runs), in order

    def finished(self, run_id: str, partition: int) -> None:
        """The run reached a final state (or was restored in one) since the last snapshot."""
        self._finished.append((run_id, partition))

    def snapshot(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` holds every run finished so far."""
        if self._finished:
            self._scheduled.append((checkpoint_id, self._finished))
            self._finished = []

    def completed(self, checkpoint_id: int) -> list[_Run]:
        """The runs whose entries may be tombstoned now that ``checkpoint_id`` completed."""
        due: list[_Run] = []
        while self._scheduled and self._scheduled[0][0] + self._lag <= checkpoint_id:
            due.extend(self._scheduled.pop(0)[1])
        return due

    def call_off(self, run_id: str) -> None:
        """The run is no longer finished (its rollback started): keep its entries."""
        self._finished = [run for run in self._finished if run[0] != run_id]
        self._scheduled = [
            (checkpoint, [run for run in runs if run[0] != run_id])
            for checkpoint, runs in self._scheduled
        ]

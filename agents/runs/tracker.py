"""`RunTracker`: one subtask's runs by status and its waits for people, as gauges.

The agent operator tells it every run it restores or writes (`track`); it keeps each run's
status, counts runs by status (`counts`, for ``sluicegate status``) and sets the gauges of
runs by status, approvals waiting, compensations waiting and the oldest approval's age. The
gauges' children for the subtask's labels are bound once: looking them up by label values at
every safe point was a measurable share of a step.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from sluicegate.agents.metrics import AgentMetrics
from sluicegate.agents.rollback import machine as rollback
from sluicegate.agents.runs.state import RunState, RunStatus

__all__ = ["RunTracker"]


class RunTracker:
    """Runs by status and their waits, for one subtask (``labels``)."""

    def __init__(
        self, metrics: AgentMetrics, labels: tuple[str, str, str], clock: Callable[[], float]
    ) -> None:
        self._clock = clock
        self._statuses: dict[str, RunStatus] = {}
        self._counts: Counter[RunStatus] = Counter()
        self._waiting_since: dict[str, float] = {}
        self._compensation_waits: set[str] = set()
        self._runs = {s: metrics.runs.labels(*labels, s.value) for s in RunStatus}
        self._approvals_waiting = metrics.approvals_waiting.labels(*labels)
        self._compensations_waiting = metrics.compensations_waiting.labels(*labels)
        self._oldest_approval_wait = metrics.oldest_approval_wait.labels(*labels)

    def __len__(self) -> int:
        return len(self._statuses)

    def counts(self) -> dict[RunStatus, int]:
        """Runs by status (statuses without runs left out)."""
        return {status: n for status, n in self._counts.items() if n}

    def publish_counts(self) -> None:
        """Set the gauge of every status, zeros included (on open)."""
        for status, gauge in self._runs.items():
            gauge.set(self._counts[status])

    def track(self, run: RunState) -> None:
        """Count ``run`` under its status; the gauges of a status that changed are updated."""
        before = self._statuses.get(run.run_id)
        self._statuses[run.run_id] = run.status
        if run.status is RunStatus.WAITING_APPROVAL and run.pending_approval is not None:
            self._waiting_since[run.run_id] = run.pending_approval.proposed_at
        else:
            self._waiting_since.pop(run.run_id, None)
        if rollback.in_rollback(run) and run.status is RunStatus.WAITING_APPROVAL:
            self._compensation_waits.add(run.run_id)
        else:
            self._compensation_waits.discard(run.run_id)
        self._compensations_waiting.set(len(self._compensation_waits))
        if before is not run.status:
            self._count(run.status, +1)
            if before is not None:
                self._count(before, -1)
        self._approvals_waiting.set(len(self._waiting_since))
        oldest = min(self._waiting_since.values(), default=None)
        age = 0.0 if oldest is None else max(0.0, self._clock() - oldest)
        self._oldest_approval_wait.set(age)

    def _count(self, status: RunStatus, delta: int) -> None:
        self._counts[status] += delta
        self._runs[status].set(self._counts[status])

"""`RunTracker`: one subtask's runs by status and its waits for people, as gauges.

The agent operator tells it every run it restores or writes (`track`); it keeps each run's
status, counts runs by status (`counts`, for ``sluicegate status``) and sets the gauges of
runs by status, approvals waiting, compensations waiting and the oldest approval's age. The
gauges' children for the subtask's labels are bound once: looking them up by label values at
every safe point was a measurable share of a step.

The oldest wait is kept in a heap (entries of runs no longer waiting are dropped when they
reach its top): it was the least of every waiting run's start, computed at every safe point of
any run, so that a subtask with 100,000 runs parked for approval scanned them all at each
step of every other run, and its restore, which tracks each run once, took their square.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable

from sluicegate.agents.metrics import AgentMetrics
from sluicegate.agents.rollback import machine as rollback
from sluicegate.agents.runs.header import RunHeader
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
        self._oldest_waits: list[tuple[float, str]] = []
        """Heap of (wait start, run id); an entry that `_waiting_since` no longer holds is
        stale, dropped when it reaches the top (`_oldest_wait`)."""
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
        """Set every gauge: each status's, zeros included, and the waits' (on open)."""
        for status, gauge in self._runs.items():
            gauge.set(self._counts[status])
        self._publish_waits()

    def track(self, run: RunState) -> None:
        """Count ``run`` under its status; the gauges of a status that changed are updated."""
        waiting = run.status is RunStatus.WAITING_APPROVAL and run.pending_approval is not None
        since = run.pending_approval.proposed_at if waiting and run.pending_approval else None
        compensation = rollback.in_rollback(run) and run.status is RunStatus.WAITING_APPROVAL
        self._note(run.run_id, run.status, since, compensation=compensation)

    def track_header(self, header: RunHeader) -> None:
        """`track` for a run restored without being decoded (`agents.runs.header`): parked on
        a call's approval or finished, so in no rollback's wait. The gauges are left for
        `publish_counts` (a restore tracks every run, then publishes once)."""
        self._note(
            header.run_id, header.status, header.waiting_since, compensation=False, publish=False
        )

    def _note(
        self,
        run_id: str,
        status: RunStatus,
        since: float | None,
        *,
        compensation: bool,
        publish: bool = True,
    ) -> None:
        before = self._statuses.get(run_id)
        self._statuses[run_id] = status
        if since is not None:
            if self._waiting_since.get(run_id) != since:
                self._waiting_since[run_id] = since
                heapq.heappush(self._oldest_waits, (since, run_id))
        else:
            self._waiting_since.pop(run_id, None)
        if compensation:
            self._compensation_waits.add(run_id)
        else:
            self._compensation_waits.discard(run_id)
        if before is not status:
            self._counts[status] += 1
            if before is not None:
                self._counts[before] -= 1
        if publish:
            if before is not status:
                self._runs[status].set(self._counts[status])
                if before is not None:
                    self._runs[before].set(self._counts[before])
            self._publish_waits()

    def _publish_waits(self) -> None:
        self._compensations_waiting.set(len(self._compensation_waits))
        self._approvals_waiting.set(len(self._waiting_since))
        oldest = self._oldest_wait()
        age = 0.0 if oldest is None else max(0.0, self._clock() - oldest)
        self._oldest_approval_wait.set(age)

    def _oldest_wait(self) -> float | None:
        """The start of the oldest wait for a person, or None; stale heap entries dropped."""
        heap, waiting = self._oldest_waits, self._waiting_since
        if len(heap) > 2 * len(waiting) + 64:  # mostly stale: rebuild from what is waiting
            heap[:] = [(since, run) for run, since in waiting.items()]
            heapq.heapify(heap)
        while heap and waiting.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

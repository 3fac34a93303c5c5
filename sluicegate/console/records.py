"""Records in and out and consumer lag, per operator and per subtask, for the Job page.

The numbers are the engine's own group of the heartbeats' counts (`RECORDS_GROUP`: what
``sluicegate_records_in_total``, ``_out_total`` and ``sluicegate_consumer_lag_records`` show):
per operator as ``GET /status`` sums them (``counts``, what ``sluicegate status`` prints), per
subtask from the last heartbeat of the live worker that runs it in the current attempt. A
worker of a version before this group reports none: its subtasks show "—", not zero. Pure
functions: the page is tested without a coordinator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sluicegate.coordinator.facts import CoordinatorFacts
from sluicegate.operators.protocol.messages import RECORDS_GROUP

__all__ = ["RecordCounts", "per_operator", "per_subtask"]


@dataclass(frozen=True, slots=True)
class RecordCounts:
    """Records read, records emitted and consumer lag; None: not reported."""

    records_in: int | None = None
    records_out: int | None = None
    lag: int | None = None

    @classmethod
    def of(cls, groups: Mapping[str, Mapping[str, int]]) -> RecordCounts:
        """The `RECORDS_GROUP` of ``groups`` (one subtask's or one operator's counts)."""
        found = groups.get(RECORDS_GROUP, {})
        return cls(found.get("in"), found.get("out"), found.get("lag"))

    def cells(self) -> tuple[object, ...]:
        """The three numbers as table cells, "—" for one not reported."""
        return tuple("—" if n is None else n for n in (self.records_in, self.records_out, self.lag))


def per_operator(counts: Mapping[str, Mapping[str, Mapping[str, int]]]) -> dict[str, RecordCounts]:
    """Per operator uid, from ``JobStatus.counts`` (summed over its subtasks)."""
    return {uid: RecordCounts.of(groups) for uid, groups in counts.items()}


def per_subtask(facts: CoordinatorFacts) -> dict[str, RecordCounts]:
    """Per subtask (``uid#index``), from the last heartbeat of the live worker running it in
    the current attempt."""
    return {
        subtask: RecordCounts.of(groups)
        for worker in facts.alive()
        if worker.heartbeat.attempt == facts.attempt
        for subtask, groups in worker.heartbeat.counts.items()
    }

"""An agent's runs kept in memory, caught up from where the last read stopped: what a page of
100,000 runs reads instead of the whole events topic.

`RunIndex.refresh`:

1. reads every partition of the events topic (``read_committed``, `RunHistory.read`) from the
   offset the previous refresh stopped at (the beginning, the first time) to its end;
2. folds each event into the run's `RunSummary` with `fold`, the same code as
   `RunHistory.runs` (``GET /agents/{agent}/runs``, ``sluicegate runs``), and notes where in
   its partition each run's first event is, so a run's timeline is read from there;
3. keeps the runs ordered, most recently updated first, re-sorting only after a refresh that
   read something.

So a request reads only the events written since the one before, as `RunDirectory` does per
partition. Consistency is the events topic's: exactly the events of completed checkpoints.
Memory is one `RunSummary` per run (its goal cut to 200 characters; the waiting call's event
only while it waits). Events removed by the topic's retention stay in the index; a process
that starts after retention removed a run's events never sees that run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sluicegate.agents.history.events import Event, RunHistory, RunSummary, fold, newest_first

__all__ = ["RunIndex"]


class RunIndex:
    """The runs of one agent's events topic, read through ``history``; see the module
    docstring."""

    def __init__(self, history: RunHistory) -> None:
        self.history = history
        self._runs: dict[str, RunSummary] = {}
        self._first: dict[str, int] = {}  # run id -> offset of its first event seen
        self._next: dict[int, int | None] = {}  # partition -> where the next refresh reads
        self._ordered: list[RunSummary] = []
        self._lock = asyncio.Lock()
        self.records_read = 0
        """Agent events read by every refresh so far (what a test of "only what is new"
        watches)."""

    async def refresh(self) -> int:
        """Read what was committed since the last refresh (steps 1-3); how many events.

        Raises:
            EventsUnavailableError: the events topic cannot be read now (the index keeps what
                it had).
        """
        async with self._lock:
            partitions = await self.history.partitions()
            start = {p: self._next.get(p) for p in range(partitions)}
            read = 0
            folded: dict[int, int] = {}  # partition -> the offset after the last event folded

            def keep(partition: int, offset: int, event: Event) -> None:
                nonlocal read
                read += 1
                fold(self._runs, event)
                self._first.setdefault(event["run_id"], offset)
                folded[partition] = offset + 1

            try:
                self._next.update(await self.history.read(start, keep))
            finally:
                # A read that failed half-way: what was folded is not folded again (a model
                # event's cost would count twice).
                for partition, offset in folded.items():
                    if (self._next.get(partition) or 0) < offset:
                        self._next[partition] = offset
                if read:
                    self._ordered = newest_first(self._runs.values())
                self.records_read += read
            return read

    async def runs(self) -> Sequence[RunSummary]:
        """Every run, the most recently updated first, after a `refresh`."""
        await self.refresh()
        return self._ordered

    def first_offset(self, run_id: str) -> int | None:
        """Where in its partition the run's first event is, if a refresh saw it."""
        return self._first.get(run_id)

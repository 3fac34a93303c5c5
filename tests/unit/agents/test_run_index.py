"""RunIndex: the runs of an events topic folded as `RunHistory.runs` folds them, caught up
from where the last refresh stopped; over an in-memory topic (the broker's read is tested in
tests/integration/console/test_runs_at_scale.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from sluicegate.agents.exceptions import EventsUnavailableError
from sluicegate.agents.history.events import Event, RunHistory, fold, newest_first
from sluicegate.agents.history.index import RunIndex


class MemoryTopic(RunHistory):
    """An events topic in memory: ``logs[partition]`` is its events, offset = index;
    ``fail_after`` events of a read, the read raises (a broker lost half-way)."""

    def __init__(self, partitions: int) -> None:
        super().__init__("127.0.0.1:1", "desk", "events")  # never contacted
        self.logs: list[list[Event]] = [[] for _ in range(partitions)]
        self.fail_after: int | None = None

    def write(self, event: Event) -> None:
        self.logs[self.partition_of(event["run_id"], len(self.logs))].append(event)

    async def partitions(self) -> int:
        return len(self.logs)

    async def read(
        self, start: Mapping[int, int | None], keep: Callable[[int, int, Event], None]
    ) -> dict[int, int]:
        passed = 0
        for partition, offset in start.items():
            for at in range(offset or 0, len(self.logs[partition])):
                if self.fail_after is not None and passed == self.fail_after:
                    raise EventsUnavailableError(self.topic, "broker lost")
                keep(partition, at, self.logs[partition][at])
                passed += 1
        return {p: len(self.logs[p]) for p in start}


def event(run_id: str, seq: int, at: float, **fields: Any) -> Event:
    kind = fields.pop("type", "started" if seq == 0 else "model")
    return {"run_id": run_id, "seq": seq, "at": at, "type": kind, "step": seq, **fields}


def full_read(topic: MemoryTopic) -> list[tuple[str, str, int, float]]:
    """What a fresh read of the whole topic folds, as comparable rows."""
    runs: dict[str, Any] = {}
    for log in topic.logs:
        for e in log:
            fold(runs, e)
    return [(r.run_id, r.status, r.seq, r.cost_usd) for r in newest_first(runs.values())]


async def test_a_refresh_reads_only_what_is_new_and_folds_as_a_full_read() -> None:
    topic = MemoryTopic(4)
    for n in range(100):
        topic.write(event(f"r-{n}", 0, 1000.0 + n, status="running", metadata={"n": n}))
    index = RunIndex(topic)

    runs = await index.runs()
    assert len(runs) == 100
    assert runs[0].run_id == "r-99"  # the most recently updated first
    assert index.records_read == 100

    topic.write(event("r-3", 1, 5000.0, status="waiting_approval", cost_usd=0.25))
    topic.write(event("r-new", 0, 4000.0, status="running"))
    assert await index.refresh() == 2  # only what was written since
    runs = await index.runs()
    assert [r.run_id for r in runs[:2]] == ["r-3", "r-new"]
    assert runs[0].status == "waiting_approval"
    assert runs[0].metadata == {"n": 3}  # what the first event said, kept
    assert [(r.run_id, r.status, r.seq, r.cost_usd) for r in runs] == full_read(topic)
    assert await index.refresh() == 0
    assert index.records_read == 102


async def test_the_first_offset_of_each_run_is_where_its_timeline_is_read_from() -> None:
    topic = MemoryTopic(1)
    topic.write(event("a", 0, 1.0, status="running"))
    topic.write(event("b", 0, 2.0, status="running"))
    topic.write(event("a", 1, 3.0, status="done"))
    index = RunIndex(topic)
    await index.refresh()
    assert (index.first_offset("a"), index.first_offset("b")) == (0, 1)
    assert index.first_offset("nobody") is None
    events = await topic.events("b", from_offset=index.first_offset("b"))
    assert [e["seq"] for e in events] == [0]


async def test_a_read_that_fails_half_way_folds_nothing_twice() -> None:
    topic = MemoryTopic(1)
    for seq in range(4):
        topic.write(event("r", seq, float(seq), status="running", cost_usd=1.0))
    index = RunIndex(topic)
    topic.fail_after = 2
    with pytest.raises(EventsUnavailableError):
        await index.refresh()
    topic.fail_after = None
    assert await index.refresh() == 2  # the two not folded yet
    (run,) = await index.runs()
    assert (run.seq, run.cost_usd) == (3, 3.0)  # three model events, each counted once
    assert [(run.run_id, run.status, run.seq, run.cost_usd)] == full_read(topic)

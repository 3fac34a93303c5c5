"""Regression (issue 12): a global recovery cancelled the calls a healthy worker was running,
so an agent's tool call in flight was left ``issued`` without ``done`` and called again by the
next attempt. Now a worker replaced by a newer attempt lets its subtasks finish the calls they
are running (within ``retire_seconds``) before it cancels them, and answers a `Retire` only
then (phase one of a new attempt).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from sluicegate.operators.contract import Context, Record
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.protocol.messages import Assign, Retire, Retired
from sluicegate.operators.runtime.control import CoordinatorLink, InMemoryBus
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.runtime.worker import Worker
from sluicegate.operators.runtime.worker_settings import WorkerSettings
from sluicegate.operators.storage import open_storage
from sluicegate.testing import produce_lines
from tests.helpers import wait_for

PLAN: dict[str, tuple[str, ...]] = {"w": ("op#0",)}


@dataclass
class Rig:
    """A worker hosting one operator whose call takes 0.5 s, driven by hand over a bus."""

    worker: Worker
    coordinator: CoordinatorLink
    calls: list[tuple[str, float]] = field(default_factory=list)
    """("started" | "finished", when) per call."""

    async def call_in_flight(self, bootstrap: str, source: str) -> None:
        """Run attempt 1 and wait until its call of one record has started."""
        await self.coordinator.send(Assign(1, None, 1, PLAN))
        await produce_lines(bootstrap, source, ["one"])
        await wait_for(lambda: self.calls, timeout_s=60, what="the call started")


@contextlib.asynccontextmanager
async def slow_call_worker(bootstrap: str, tmp_path: Path) -> AsyncIterator[tuple[Rig, str]]:
    """The rig and its source topic; the worker runs until the block ends."""
    tag = uuid.uuid4().hex[:8]
    calls: list[tuple[str, float]] = []

    async def slow_effect(record: Record, ctx: Context) -> None:
        calls.append(("started", time.monotonic()))
        await asyncio.sleep(0.5)  # a tool call on the wire
        calls.append(("finished", time.monotonic()))

    p = Pipeline(f"retire-{tag}")
    p.source(f"in-{tag}", partitions=1)
    p.operator("op", slow_effect, inputs=f"in-{tag}", outputs=[])
    graph = p.build()
    await ensure_topics(bootstrap, graph)
    bus = InMemoryBus()
    settings = WorkerSettings(worker_id="w", slots=1, state_dir=tmp_path, retire_seconds=5)
    storage = open_storage(tmp_path / "storage")
    worker = Worker(graph, settings, bootstrap=bootstrap, storage=storage, link=bus.worker_end())
    rig = Rig(worker, bus.coordinator_end(), calls)
    running = asyncio.create_task(worker.run())
    try:
        await wait_for(lambda: bus.workers, timeout_s=60, what="the worker on the bus")
        yield rig, f"in-{tag}"
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_a_call_in_flight_finishes_when_a_newer_attempt_replaces_its_subtask(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    async with slow_call_worker(kafka_bootstrap, tmp_path) as (rig, source):
        await rig.call_in_flight(kafka_bootstrap, source)
        await rig.coordinator.send(Assign(2, None, 1, PLAN))  # a global recovery elsewhere
        await wait_for(lambda: rig.worker.attempt == 2, timeout_s=60, what="attempt 2 started")
        assert [event for event, _ in rig.calls[:2]] == ["started", "finished"]
        # attempt 2 re-reads the record (no checkpoint): fully started before the teardown
        await wait_for(lambda: len(rig.calls) >= 3, timeout_s=60, what="attempt 2 calling again")


async def test_retire_answers_once_the_call_in_flight_finished_and_fences_older_assigns(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Phase one of a new attempt: `Retire(3)` stops attempt 1's subtask after its call
    finished, and only then is `Retired(3)` sent; a stale `Assign(2)` read afterwards (an
    attempt given up while being assigned) starts nothing."""
    answers: list[tuple[Retired, float]] = []
    async with slow_call_worker(kafka_bootstrap, tmp_path) as (rig, source):

        async def read_answers() -> bool:
            for message in await rig.coordinator.receive(0.05):
                if isinstance(message, Retired):
                    answers.append((message, time.monotonic()))
            return bool(answers)

        await rig.call_in_flight(kafka_bootstrap, source)
        await rig.coordinator.send(Retire(3))
        await wait_for(read_answers, timeout_s=60, what="Retired(3)")
        (answer, answered_at), *_ = answers
        assert answer == Retired("w", 3)
        assert [event for event, _ in rig.calls] == ["started", "finished"]
        assert rig.calls[1][1] <= answered_at, "answered before the call in flight finished"
        assert rig.worker.subtasks == {}

        await rig.coordinator.send(Assign(2, None, 1, PLAN))  # stale: older than the Retire
        await rig.coordinator.send(Retire(3))  # asked again: answered again, nothing to stop
        answers.clear()
        await wait_for(read_answers, timeout_s=60, what="Retired(3) again")
        assert rig.worker.attempt == 1
        assert rig.worker.subtasks == {}, "a stale Assign started a subtask after Retire"

        await rig.coordinator.send(Assign(3, None, 1, PLAN))
        await wait_for(lambda: rig.worker.attempt == 3, timeout_s=60, what="attempt 3 started")
        await wait_for(lambda: len(rig.calls) >= 3, timeout_s=60, what="attempt 3 calling again")

"""Regression (issue 12, item 1): a global recovery cancelled the calls a healthy worker was
running, so an agent's tool call in flight was left ``issued`` without ``done`` and called
again by the next attempt. Now a worker replaced by a newer attempt lets its subtasks finish
the calls they are running (within ``retire_seconds``) before it cancels them.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from operators.contract import Context, Record
from operators.pipeline import Pipeline
from operators.protocol.messages import Assign, Retire, Retired
from operators.runtime.control import InMemoryBus
from operators.runtime.topics import ensure_topics
from operators.runtime.worker import Worker
from operators.storage import open_storage
from sluicegate.demos.wordcount import produce_lines
from tests.helpers import wait_for


async def test_a_call_in_flight_finishes_when_a_newer_attempt_replaces_its_subtask(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
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
    await ensure_topics(kafka_bootstrap, graph)
    bus = InMemoryBus()
    coordinator = bus.coordinator_end()
    worker = Worker(
        graph, worker_id="w", slots=1, bootstrap=kafka_bootstrap,
        storage=open_storage(tmp_path / "storage"), work_dir=tmp_path / "work",
        link=bus.worker_end(), retire_seconds=5,
    )  # fmt: skip
    running = asyncio.create_task(worker.run())
    try:
        await wait_for(lambda: bus.workers, timeout_s=60, what="the worker on the bus")
        plan: dict[str, tuple[str, ...]] = {"w": ("op#0",)}
        await coordinator.send(Assign(1, None, 1, plan))
        await produce_lines(kafka_bootstrap, f"in-{tag}", ["one"])
        await wait_for(lambda: calls, timeout_s=60, what="the call started")
        await coordinator.send(Assign(2, None, 1, plan))  # a global recovery elsewhere
        await wait_for(lambda: worker.attempt == 2, timeout_s=60, what="attempt 2 started")
        assert [event for event, _ in calls[:2]] == ["started", "finished"]
        # attempt 2 re-reads the record (no checkpoint): fully started before the teardown
        await wait_for(lambda: len(calls) >= 3, timeout_s=60, what="attempt 2 calling again")
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_retire_answers_once_the_call_in_flight_finished_and_fences_older_assigns(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Phase one of a new attempt: `Retire(3)` stops attempt 1's subtask after its call
    finished, and only then is `Retired(3)` sent; a stale `Assign(2)` read afterwards (an
    attempt given up while being assigned) starts nothing."""
    tag = uuid.uuid4().hex[:8]
    calls: list[tuple[str, float]] = []

    async def slow_effect(record: Record, ctx: Context) -> None:
        calls.append(("started", time.monotonic()))
        await asyncio.sleep(0.5)
        calls.append(("finished", time.monotonic()))

    p = Pipeline(f"retire2-{tag}")
    p.source(f"in-{tag}", partitions=1)
    p.operator("op", slow_effect, inputs=f"in-{tag}", outputs=[])
    graph = p.build()
    await ensure_topics(kafka_bootstrap, graph)
    bus = InMemoryBus()
    coordinator = bus.coordinator_end()
    worker = Worker(
        graph, worker_id="w", slots=1, bootstrap=kafka_bootstrap,
        storage=open_storage(tmp_path / "storage"), work_dir=tmp_path / "work",
        link=bus.worker_end(), retire_seconds=5,
    )  # fmt: skip
    answers: list[tuple[Retired, float]] = []

    async def read_answers() -> bool:
        for message in await coordinator.receive(0.05):
            if isinstance(message, Retired):
                answers.append((message, time.monotonic()))
        return bool(answers)

    running = asyncio.create_task(worker.run())
    try:
        await wait_for(lambda: bus.workers, timeout_s=60, what="the worker on the bus")
        plan: dict[str, tuple[str, ...]] = {"w": ("op#0",)}
        await coordinator.send(Assign(1, None, 1, plan))
        await produce_lines(kafka_bootstrap, f"in-{tag}", ["one"])
        await wait_for(lambda: calls, timeout_s=60, what="the call started")
        await coordinator.send(Retire(3))
        await wait_for(read_answers, timeout_s=60, what="Retired(3)")
        (answer, answered_at), *_ = answers
        assert answer == Retired("w", 3)
        assert [event for event, _ in calls] == ["started", "finished"]
        assert calls[1][1] <= answered_at, "answered before the call in flight finished"
        assert worker.subtasks == {}

        await coordinator.send(Assign(2, None, 1, plan))  # stale: older than the Retire
        await coordinator.send(Retire(3))  # asked again: answered again, nothing to stop
        answers.clear()
        await wait_for(read_answers, timeout_s=60, what="Retired(3) again")
        assert worker.attempt == 1
        assert worker.subtasks == {}, "a stale Assign started a subtask after Retire"

        await coordinator.send(Assign(3, None, 1, plan))
        await wait_for(lambda: worker.attempt == 3, timeout_s=60, what="attempt 3 started")
        await wait_for(lambda: len(calls) >= 3, timeout_s=60, what="attempt 3 calling again")
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)

"""One coordinator per pipeline: a coordinator that finds a newer coordinator epoch in storage
is fenced (it sends nothing more and idles); one that finds its workers on an attempt another
coordinator placed takes them back with a newer attempt, unless it is the one fenced. Without
a broker: the control link is a fake that keeps what the coordinator sends."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest
from prometheus_client import CollectorRegistry

from sluicegate.cli.commands import render_status
from sluicegate.coordinator.exceptions import FencedError
from sluicegate.coordinator.fencing import Fence, newest_epoch, take_epoch
from sluicegate.coordinator.httpapi.app import create_app
from sluicegate.coordinator.httpapi.server import serve
from sluicegate.coordinator.job_state import JobState
from sluicegate.coordinator.metrics import CoordinatorCollector
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.coordinator.status import CoordinatorStatus
from sluicegate.operators.protocol.messages import Heartbeat
from sluicegate.operators.storage import Storage, StorageUnavailableError, open_storage
from sluicegate.testing import word_count
from tests.storage_wrappers import DelegatingStorage
from tests.unit.coordinator.test_rebalance import AT_ONCE, complete_a_checkpoint, join
from tests.unit.coordinator.test_restore_fallback import Sent, all_retired


async def test_epochs_are_taken_once_each_and_junk_keys_are_ignored() -> None:
    storage = open_storage("memory://")
    assert await newest_epoch(storage) == 0
    await storage.put("coordinators/not-a-number", b"")
    await storage.put("coordinators/\u0661\u0662", b"")  # digits, but not ASCII ones
    taken = await asyncio.gather(*(take_epoch(storage) for _ in range(5)))
    assert sorted(taken) == [1, 2, 3, 4, 5]
    assert await newest_epoch(storage) == 5


def test_a_fence_reads_on_its_interval_and_stays_fenced() -> None:
    fence = Fence(epoch=3, check_seconds=1.0, last_check=10.0)
    assert not fence.due(10.5)
    assert fence.due(11.0)
    assert not fence.on_newest(3, 11.0)  # its own epoch is the newest
    assert not fence.due(11.5)
    assert fence.on_newest(4, 12.0)
    assert fence.fenced_by == 4
    assert not fence.due(100.0)  # fenced for good: nothing more to read
    assert fence.on_newest(3, 100.0)


def fenced_by(c: Coordinator) -> int | None:
    """The epoch that fenced ``c`` (a call, so that the type checker does not narrow it)."""
    assert c.fence is not None
    return c.fence.fenced_by


async def placed(storage: Storage, graph_name: str) -> tuple[Coordinator, Sent]:
    """A coordinator with an epoch, whose attempt runs on worker w1."""
    c = Coordinator(
        word_count(graph_name), bootstrap="127.0.0.1:1", storage=storage, settings=AT_ONCE
    )
    sent = Sent()
    c._link = sent
    c.fence = Fence(await take_epoch(storage), check_seconds=1.0, last_check=time.monotonic())
    join(c, "w1", time.monotonic())
    await c._new_attempt()
    await all_retired(c)
    await c._tick(time.monotonic())
    assert c.assign is not None
    return c, sent


async def test_an_older_coordinator_is_fenced_at_its_next_check_and_sends_nothing() -> None:
    storage = open_storage("memory://")
    old, sent = await placed(storage, uuid.uuid4().hex[:8])
    await complete_a_checkpoint(old)
    assert await take_epoch(storage) == 2  # a second coordinator of the pipeline starts

    await old._tick(time.monotonic())  # before its next check: it goes on for now
    assert fenced_by(old) is None
    await old._tick(time.monotonic() + 1.0)
    assert fenced_by(old) == 2
    assert old.fenced

    before = len(sent.messages)
    assert old.tracker is not None
    with pytest.raises(FencedError):
        await old.trigger_checkpoint()  # asked through its API: nothing reaches the workers
    beat = Heartbeat("w1", "w1-1", slots=4, attempt=0, subtasks=())
    await old._on_message(beat)  # a worker that missed the assignment: not sent again
    await old._tick(time.monotonic() + 5.0)
    assert len(sent.messages) == before


async def test_a_fenced_coordinator_leaves_the_jobs_state_alone() -> None:
    """Fenced is not failed: another coordinator runs the job (its process idles until
    stopped, in the end-to-end test)."""
    storage = open_storage("memory://")
    c, _ = await placed(storage, uuid.uuid4().hex[:8])
    assert CoordinatorStatus(c).status().fenced_by is None
    await take_epoch(storage)
    await c._tick(time.monotonic() + 1.0)
    assert c.fenced
    assert c.job.state is JobState.RUNNING
    assert c.failure is None
    status = CoordinatorStatus(c).status()
    assert status.fenced_by == 2
    assert "FENCED           by coordinator epoch 2: this status is stale\n" in render_status(
        status, [], []
    )


async def test_workers_on_an_attempt_placed_by_another_coordinator_are_taken_back() -> None:
    """The newest coordinator finds w1 on an attempt the older one placed before it was fenced
    (it had adopted the attempt the older one ran): it recovers with a newer attempt still."""
    storage = open_storage("memory://")
    older, _ = await placed(storage, name := uuid.uuid4().hex[:8])
    newer, _ = await placed(storage, name)
    assert newer.attempt == older.attempt + 1
    await older._new_attempt()  # before its next check, the older one takes an attempt
    beat = Heartbeat("w1", "w1-1", slots=4, attempt=older.attempt, subtasks=("tokenizer#0",))
    await newer._on_message(beat)
    assert not newer.fenced
    assert newer.job.state is JobState.RECOVERING
    assert newer.failure is not None
    assert f"another coordinator placed attempt {older.attempt} on w1" in newer.failure.reason

    await older._on_message(Heartbeat("w1", "w1-1", slots=4, attempt=9, subtasks=()))
    assert older.fenced  # at once, not at its next check: it leaves the workers alone
    assert older.job.state is not JobState.RECOVERING


async def test_a_coordinator_alone_is_never_fenced() -> None:
    storage = open_storage("memory://")
    c, _ = await placed(storage, uuid.uuid4().hex[:8])
    await complete_a_checkpoint(c)
    for seconds in (1.0, 2.0, 3.0):
        await c._tick(time.monotonic() + seconds)
    assert not c.fenced
    assert c.job.state is not JobState.RECOVERING


def test_the_check_interval_is_an_option() -> None:
    assert CoordinatorSettings().fence_check_seconds == 1.0


async def test_a_fenced_coordinator_refuses_stop_checkpoint_and_savepoint_requests() -> None:
    """Asked for them over HTTP too (a real server): 409 ``fenced``, saying where to ask."""
    storage = open_storage("memory://")
    c, _ = await placed(storage, uuid.uuid4().hex[:8])
    await take_epoch(storage)
    await c._tick(time.monotonic() + 1.0)
    for request in (
        c.trigger_checkpoint(),
        c.request_savepoint("before-upgrade"),
        c.request_savepoint(stop=True),
    ):
        with pytest.raises(FencedError, match="fenced by coordinator epoch 2"):
            await request
    with pytest.raises(FencedError):
        c.request_stop()
    assert c.stopping is None
    assert c.job.state is JobState.RUNNING

    server = await serve(create_app(CoordinatorStatus(c), CollectorRegistry()), "127.0.0.1", 0)
    try:
        async with httpx.AsyncClient(base_url=server.url) as http:
            for path in ("/stop", "/checkpoints"):
                answer = await http.post(path)
                assert answer.status_code == 409, answer.text
                assert answer.json()["error"] == "fenced"
                assert "Ask the newer coordinator" in answer.json()["what_to_do"]
            status = await http.get("/status")
            assert status.json()["fenced_by"] == 2
    finally:
        await server.stop()


async def test_a_fenced_coordinator_exports_only_that_it_is_fenced() -> None:
    """Its other series would be stale (its checkpoint lag only grows, and the alerts take
    the max over every coordinator scraped)."""
    storage = open_storage("memory://")
    c, _ = await placed(storage, name := uuid.uuid4().hex[:8])
    await complete_a_checkpoint(c)
    registry = CollectorRegistry()
    registry.register(CoordinatorCollector(c))
    labels = {"pipeline": f"wordcount-{name}"}

    def names() -> set[str]:
        return {sample.name for family in registry.collect() for sample in family.samples}

    assert registry.get_sample_value("sluicegate_coordinator_fenced", labels) == 0
    assert "sluicegate_checkpoint_lag_seconds" in names()
    await take_epoch(storage)
    await c._tick(time.monotonic() + 1.0)
    assert registry.get_sample_value("sluicegate_coordinator_fenced", labels) == 1
    assert names() == {"sluicegate_coordinator_fenced"}


async def test_a_worker_reporting_an_attempt_nobody_took_restarts_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A worker must not be able to restart the job at will: attempts are taken in storage
    before any worker hears of them, so one that is not there was never placed."""
    c, _ = await placed(open_storage("memory://"), uuid.uuid4().hex[:8])
    for _ in range(3):
        await c._on_message(Heartbeat("w1", "w1-1", slots=4, attempt=10**9, subtasks=()))
    assert c.job.state is JobState.RUNNING
    assert c.failure is None
    assert "worker w1 reports attempt 1000000000, which no coordinator took" in caplog.text


class ListingFails(DelegatingStorage):
    async def list(self, prefix: str = "") -> list[str]:
        raise StorageUnavailableError("list", prefix, "the bucket is unreachable")


async def test_a_failed_read_of_the_epochs_is_retried_at_the_next_check() -> None:
    """Not on every tick of the loop (a storage outage must not become a flood of reads)."""
    storage = open_storage("memory://")
    fence = Fence(await take_epoch(storage), check_seconds=1.0, last_check=0.0)
    down = ListingFails(storage)
    assert not await fence.check(down, 5.0)
    assert not fence.due(5.5)
    assert fence.due(6.0)
    await take_epoch(storage)
    assert await fence.check(storage, 6.0)

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
from sluicegate.coordinator.numbering import take_attempt
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.coordinator.status import CoordinatorStatus
from sluicegate.operators.protocol.messages import Heartbeat
from sluicegate.operators.storage import Storage, StorageUnavailableError, open_storage
from sluicegate.testing import word_count
from tests.storage_wrappers import DelegatingStorage
from tests.unit.coordinator.driving import AT_ONCE, Driving, Sent


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


def fenced_by(d: Driving) -> int | None:
    """The epoch that fenced ``d``'s coordinator (a call, so the type checker does not narrow)."""
    return d.facts().fenced_by


async def placed(storage: Storage, graph_name: str) -> tuple[Driving, Sent]:
    """A coordinator with an epoch, whose attempt runs on worker w1."""
    d = Driving(word_count(graph_name), storage=storage, settings=AT_ONCE)
    await d.start()
    await d.join("w1")
    await d.retire_all()
    assert d.facts().assign is not None
    return d, d.sent


async def test_an_older_coordinator_is_fenced_at_its_next_check_and_sends_nothing() -> None:
    storage = open_storage("memory://")
    old, sent = await placed(storage, uuid.uuid4().hex[:8])
    await old.complete_a_checkpoint()
    assert await take_epoch(storage) == 2  # a second coordinator of the pipeline starts

    await old.step(now=time.monotonic())  # before its next check: it goes on for now
    assert fenced_by(old) is None
    await old.step(now=time.monotonic() + 1.0)
    assert fenced_by(old) == 2
    assert old.facts().fenced

    before = len(sent.messages)
    assert old.facts().assign is not None
    with pytest.raises(FencedError):
        await (
            old.coordinator.trigger_checkpoint()
        )  # asked through its API: nothing reaches the workers
    beat = Heartbeat("w1", "w1-1", slots=4, attempt=0, subtasks=())
    await old.step(beat)  # a worker that missed the assignment: not sent again
    await old.step(now=time.monotonic() + 5.0)
    assert len(sent.messages) == before


async def test_a_fenced_coordinator_leaves_the_jobs_state_alone() -> None:
    """Fenced is not failed: another coordinator runs the job (its process idles until
    stopped, in the end-to-end test)."""
    storage = open_storage("memory://")
    c, _ = await placed(storage, uuid.uuid4().hex[:8])
    assert CoordinatorStatus(c.coordinator).status().fenced_by is None
    await take_epoch(storage)
    await c.step(now=time.monotonic() + 1.0)
    assert c.facts().fenced
    assert c.facts().state is JobState.RUNNING
    assert c.facts().failure is None
    status = CoordinatorStatus(c.coordinator).status()
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
    assert newer.facts().attempt == older.facts().attempt + 1
    taken = await take_attempt(storage)  # before its next check, the older one takes an attempt
    beat = Heartbeat("w1", "w1-1", slots=4, attempt=taken, subtasks=("tokenizer#0",))
    await newer.step(beat)
    assert not newer.facts().fenced
    assert newer.facts().state is JobState.RECOVERING
    failure = newer.facts().failure
    assert failure is not None
    assert f"another coordinator placed attempt {taken} on w1" in failure.reason

    await older.step(Heartbeat("w1", "w1-1", slots=4, attempt=9, subtasks=()))
    assert older.facts().fenced  # at once, not at its next check: it leaves the workers alone
    assert older.facts().state is not JobState.RECOVERING


async def test_a_coordinator_alone_is_never_fenced() -> None:
    storage = open_storage("memory://")
    c, _ = await placed(storage, uuid.uuid4().hex[:8])
    await c.complete_a_checkpoint()
    for seconds in (1.0, 2.0, 3.0):
        await c.step(now=time.monotonic() + seconds)
    assert not c.facts().fenced
    assert c.facts().state is not JobState.RECOVERING


def test_the_check_interval_is_an_option() -> None:
    assert CoordinatorSettings().fence_check_seconds == 1.0


async def test_a_fenced_coordinator_refuses_stop_checkpoint_and_savepoint_requests() -> None:
    """Asked for them over HTTP too (a real server): 409 ``fenced``, saying where to ask."""
    storage = open_storage("memory://")
    c, _ = await placed(storage, uuid.uuid4().hex[:8])
    await take_epoch(storage)
    await c.step(now=time.monotonic() + 1.0)
    for request in (
        c.coordinator.trigger_checkpoint(),
        c.coordinator.request_savepoint("before-upgrade"),
        c.coordinator.request_savepoint(stop=True),
    ):
        with pytest.raises(FencedError, match="fenced by coordinator epoch 2"):
            await request
    with pytest.raises(FencedError):
        c.coordinator.request_stop()
    assert c.facts().stop is None
    assert c.facts().state is JobState.RUNNING

    server = await serve(
        create_app(CoordinatorStatus(c.coordinator), CollectorRegistry()), "127.0.0.1", 0
    )
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
    await c.complete_a_checkpoint()
    registry = CollectorRegistry()
    registry.register(CoordinatorCollector(c.coordinator))
    labels = {"pipeline": f"wordcount-{name}"}

    def names() -> set[str]:
        return {sample.name for family in registry.collect() for sample in family.samples}

    assert registry.get_sample_value("sluicegate_coordinator_fenced", labels) == 0
    assert "sluicegate_checkpoint_lag_seconds" in names()
    await take_epoch(storage)
    await c.step(now=time.monotonic() + 1.0)
    assert registry.get_sample_value("sluicegate_coordinator_fenced", labels) == 1
    assert names() == {"sluicegate_coordinator_fenced"}


async def test_a_worker_reporting_an_attempt_nobody_took_restarts_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A worker must not be able to restart the job at will: attempts are taken in storage
    before any worker hears of them, so one that is not there was never placed."""
    c, _ = await placed(open_storage("memory://"), uuid.uuid4().hex[:8])
    for _ in range(3):
        await c.step(Heartbeat("w1", "w1-1", slots=4, attempt=10**9, subtasks=()))
    assert c.facts().state is JobState.RUNNING
    assert c.facts().failure is None
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

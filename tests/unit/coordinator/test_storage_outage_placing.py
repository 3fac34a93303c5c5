"""Checkpoint storage unreachable while the coordinator starts, places or recovers the job: it
waits and tries again with a new attempt; it used to end (the soak's coordinator exited 1 when
a storage outage met its start)."""

from __future__ import annotations

import asyncio
import builtins

import pytest

from sluicegate.coordinator.job_state import JobState
from sluicegate.operators.storage import Storage, StorageUnavailableError, StoredFile, open_storage
from tests.storage_wrappers import DelegatingStorage
from tests.unit.coordinator.driving import Driving


class Outage(DelegatingStorage):
    """Every read and write fails while ``down``; ``fail_next`` fails that many calls more."""

    def __init__(self, inner: Storage) -> None:
        super().__init__(inner)
        self.down = False
        self.fail_next = 0
        self.failed = 0

    def _check(self, operation: str, path: str) -> None:
        if self.down or self.fail_next > 0:
            self.fail_next = max(self.fail_next - 1, 0)
            self.failed += 1
            raise StorageUnavailableError(operation, path, "connection refused")

    async def put(self, path: str, data: bytes) -> StoredFile:
        self._check("put", path)
        return await super().put(path, data)

    async def put_if_absent(self, path: str, data: bytes) -> StoredFile:
        self._check("put_if_absent", path)
        return await super().put_if_absent(path, data)

    async def get(self, path: str) -> bytes:
        self._check("get", path)
        return await super().get(path)

    async def exists(self, path: str) -> bool:
        self._check("exists", path)
        return await super().exists(path)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        self._check("list", prefix)
        return await super().list(prefix)


async def test_a_start_during_an_outage_waits_for_storage(caplog: pytest.LogCaptureFixture) -> None:
    storage = Outage(open_storage("memory://"))
    storage.fail_next = 2
    d = Driving(storage=storage)
    await d.start()
    assert storage.failed == 2
    assert caplog.text.count("coordinator start: storage unavailable during list") == 2
    await d.join("w1")
    await d.retire_all()
    assert d.facts().state is JobState.RUNNING
    assert d.facts().attempt == 1


async def test_placing_during_an_outage_takes_a_new_attempt_once_storage_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    storage = Outage(open_storage("memory://"))
    d = Driving(storage=storage)
    await d.start(now=0.0)
    storage.down = True
    await d.join("w1", now=0.1)
    await d.retire_all(now=0.2)  # placing reads the checkpoints: storage fails
    assert d.facts(0.2).state is not JobState.FAILED
    assert d.facts(0.2).assign is None
    assert "while setting up an attempt; a new attempt in 0.5 s" in caplog.text
    failed = storage.failed
    await d.step(now=0.3)  # within the backoff: no try
    assert storage.failed == failed
    storage.down = False
    await d.step(now=0.8)  # the new attempt: Retire again
    assert d.facts(0.8).attempt == 2
    await d.retire_all(now=0.9)
    facts = d.facts(0.9)
    assert facts.state is JobState.RUNNING
    assert facts.assign is not None
    assert facts.assign.attempt == 2


async def test_a_recovery_during_an_outage_restores_the_checkpoint_once_storage_answers() -> None:
    storage = Outage(open_storage("memory://"))
    d = Driving(storage=storage)
    await d.start()
    await d.join("w1")
    await d.retire_all()
    completed = await d.complete_a_checkpoint()
    storage.down = True
    assert await d.recover() is None  # the job waits; it used to end here
    assert d.facts().state is not JobState.FAILED
    storage.down = False
    for _ in range(40):
        await d.step()
        await d.retire_all()
        if d.facts().assign is not None:
            break
        await asyncio.sleep(0.05)
    assign = d.facts().assign
    assert assign is not None
    assert assign.restore_from == completed
    assert d.facts().state is JobState.RUNNING

"""Waiting for checkpoint storage at the coordinator's start: retried with backoff while it is
unavailable, one line per attempt; a refusal is not retried."""

from __future__ import annotations

import builtins
import logging
from pathlib import Path

import pytest

from sluicegate.cli.reach import wait_for_storage
from sluicegate.operators.storage import (
    StorageBackendError,
    StorageUnavailableError,
    open_storage,
)
from tests.storage_wrappers import DelegatingStorage


class DownFor(DelegatingStorage):
    """Unavailable for the first ``failures`` listings, then itself; raises ``error`` then if
    set."""

    def __init__(self, root: Path, failures: int, error: Exception | None = None) -> None:
        super().__init__(open_storage(str(root)))
        self.failures, self.error, self.listed = failures, error, 0

    async def list(self, prefix: str = "") -> builtins.list[str]:
        self.listed += 1
        if self.listed <= self.failures:
            raise StorageUnavailableError("list", prefix, "connection refused")
        if self.error is not None:
            raise self.error
        return await super().list(prefix)


async def test_storage_down_at_start_is_waited_for_with_backoff(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    storage, slept = DownFor(tmp_path, failures=4), []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    with caplog.at_level(logging.INFO, logger="sluicegate.cli.reach"):
        failures = await wait_for_storage(storage, "s3://ckpt", max_delay_s=4, sleep=sleep)
    assert failures == 4
    assert slept == [1, 2, 4, 4]
    assert caplog.messages[0] == (
        "cannot reach checkpoint storage at s3://ckpt: connection refused; retrying in 1 s"
    )
    assert caplog.messages[-1] == "reached checkpoint storage at s3://ckpt"


async def test_reachable_storage_returns_at_once(tmp_path: Path) -> None:
    assert await wait_for_storage(DownFor(tmp_path, failures=0), "here") == 0


async def test_a_refusal_is_not_retried(tmp_path: Path) -> None:
    refused = StorageBackendError("list", "attempts", "access denied")
    storage = DownFor(tmp_path, failures=1, error=refused)

    async def sleep(seconds: float) -> None:
        return None

    with pytest.raises(StorageBackendError):
        await wait_for_storage(storage, "here", sleep=sleep)
    assert storage.listed == 2

"""Small builders shared by tests, and waiting on a condition with a deadline."""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import NoReturn, TypeVar, overload

import pytest
from aiokafka import ConsumerRecord

from sluicegate.operators.protocol.messages import SnapshotFile, StateHandle
from sluicegate.operators.storage.manifest import ManifestStore
from sluicegate.testing import counts_by_word

T = TypeVar("T")


def fake_state_handle(key: str, checkpoint_id: int = 1) -> StateHandle:
    """A state handle naming one (unreal) file at storage path ``key``: for sans-IO tests."""
    file = SnapshotFile(name="state", path=key, size=0, sha256="0" * 64)
    return StateHandle(checkpoint_id=checkpoint_id, files=(file,), full_bytes=0, uploaded_bytes=0)


def assert_counted_exactly_once(
    records: Sequence[ConsumerRecord[bytes, bytes]], expected: Mapping[str, int]
) -> None:
    """The word count's sink ``records`` hold ``1..n`` for every word counted ``n`` times,
    each once, and nothing else."""
    total = sum(expected.values())
    assert len(records) == total, f"{len(records)} counts published, {total} expected"
    seen = counts_by_word(records)
    for word, n in expected.items():
        assert seen[word] == list(range(1, n + 1)), f"{word}: {seen[word][:20]}, expected 1..{n}"


async def kcat_produce(bootstrap: str, topic: str, lines: bytes, *args: str) -> None:
    """Produce ``lines`` (one record per line) with the real kcat (librdkafka), passing
    ``args`` (e.g. ``-K``, ``-H``); skips without kcat, unless ``SLUICEGATE_REQUIRE_KCAT`` is
    set (CI installs it), then fails."""
    kcat = shutil.which("kcat")
    if kcat is None:
        if os.environ.get("SLUICEGATE_REQUIRE_KCAT"):
            pytest.fail("kcat is not installed (.ci/run installs it)")
        pytest.skip("kcat is not installed: apt-get install kcat")
    process = await asyncio.create_subprocess_exec(
        kcat, "-P", "-b", bootstrap, "-t", topic, *args,
        stdin=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, stderr = await asyncio.wait_for(process.communicate(lines), 120)
    assert process.returncode == 0, stderr.decode()


async def sst_new_in_latest(manifests: ManifestStore) -> SnapshotFile:
    """An SST of the newest checkpoint that the closest older retained checkpoint that differs
    does not hold: damaging it breaks the newest checkpoint only (incremental checkpoints share
    files; under load an interval can pass without input, and so without a new SST)."""
    newest = await manifests.latest()
    assert newest is not None, "no completed checkpoint"
    for older_id in reversed((await manifests.completed())[:-1]):
        older = await manifests.load(older_id)
        kept = {f.path for s in older.subtasks.values() for f in s.handle.files}
        for snapshot in newest.subtasks.values():
            for f in snapshot.handle.files:
                if f.name.endswith(".sst") and f.path not in kept:
                    return f
    raise AssertionError("the newest checkpoint has no SST that a retained older one lacks")


@overload
async def wait_for(
    condition: Callable[[], Awaitable[T | None]],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = ...,
    details: Callable[[], str] | None = ...,
) -> T: ...


@overload
async def wait_for(
    condition: Callable[[], T | None],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = ...,
    details: Callable[[], str] | None = ...,
) -> T: ...


async def wait_for(
    condition: Callable[[], Awaitable[T | None] | T | None],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = 0.05,
    details: Callable[[], str] | None = None,
) -> T:
    """Poll ``condition`` (a function or a coroutine function) every ``interval_s`` until it
    returns a truthy value, and return that value.

    After ``timeout_s`` the test fails naming ``what``, the last value seen and, if given,
    ``details()`` (a log tail, say). An exception from ``condition`` ends the wait at once, so
    a condition can also check that what it waits on is still alive.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            _time_out(what, timeout_s, value, details)
        await asyncio.sleep(interval_s)


def wait_for_sync(
    condition: Callable[[], T | None],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = 0.05,
    details: Callable[[], str] | None = None,
) -> T:
    """`wait_for` for code outside an event loop: sleeps the thread between polls."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            _time_out(what, timeout_s, value, details)
        time.sleep(interval_s)


def _time_out(
    what: str, timeout_s: float, last: object, details: Callable[[], str] | None
) -> NoReturn:
    message = f"not within {timeout_s:g} s: {what} (last seen: {last!r})"
    pytest.fail(f"{message}\n{details()}" if details else message)


async def assert_final_counts_at_least_once(
    bootstrap: str, topic: str, expected: Mapping[str, int], *, deadline: float
) -> None:
    """The word count's sink holds every count ``1..n`` of every word at least once (a restore
    that fell back behind the last published checkpoint republishes what it replayed), read
    until every word's final count arrived or ``deadline`` (monotonic) passed."""
    from sluicegate.testing import read_committed

    seen: dict[str, set[int]] = {word: set() for word in expected}
    wanted = sum(expected.values())
    while any(max(seen[w], default=0) < n for w, n in expected.items()):
        assert time.monotonic() < deadline, "the sink never reached the final counts"
        records = await read_committed(bootstrap, topic, wanted, timeout_s=10)
        wanted = len(records) + 1
        for r in records:
            seen.setdefault((r.key or b"").decode(), set()).add(int(r.value))
    for word, n in expected.items():
        assert seen[word] == set(range(1, n + 1)), word

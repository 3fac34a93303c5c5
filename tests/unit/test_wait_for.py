"""`tests.helpers.wait_for`: polls until a truthy value, returns it, or fails saying what."""

from __future__ import annotations

import time

import pytest

from tests.helpers import wait_for, wait_for_sync


def countdown(polls: int) -> list[int]:
    """A list whose ``pop()`` gives ``polls - 1`` zeros and then the number of polls."""
    return [polls] + [0] * (polls - 1)


async def test_returns_the_first_truthy_value_of_a_function() -> None:
    values = countdown(3)
    assert await wait_for(values.pop, timeout_s=5, interval_s=0.001, what="x") == 3
    assert values == []


async def test_awaits_a_coroutine_function() -> None:
    values = countdown(3)

    async def condition() -> int:
        return values.pop()

    assert await wait_for(condition, timeout_s=5, interval_s=0.001, what="x") == 3


async def test_a_true_condition_returns_without_sleeping() -> None:
    start = time.monotonic()
    assert await wait_for(lambda: "now", timeout_s=5, interval_s=10, what="x") == "now"
    assert time.monotonic() - start < 1


async def test_fails_after_the_timeout_naming_what_the_last_value_and_details() -> None:
    start = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as failed:
        await wait_for(
            lambda: [],
            timeout_s=0.1,
            interval_s=0.01,
            what="the sink to fill",
            details=lambda: "log tail",
        )
    assert time.monotonic() - start >= 0.1
    assert str(failed.value) == "not within 0.1 s: the sink to fill (last seen: [])\nlog tail"


async def test_an_error_of_the_condition_ends_the_wait_at_once() -> None:
    def dead() -> None:
        raise RuntimeError("the worker died")

    with pytest.raises(RuntimeError, match="the worker died"):
        await wait_for(dead, timeout_s=60, what="x")


def test_the_sync_variant_returns_the_first_truthy_value() -> None:
    values = countdown(3)
    assert wait_for_sync(values.pop, timeout_s=5, interval_s=0.001, what="x") == 3


def test_the_sync_variant_fails_after_the_timeout() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"not within 0.05 s: y \(last seen: None\)$"):
        wait_for_sync(lambda: None, timeout_s=0.05, interval_s=0.01, what="y")

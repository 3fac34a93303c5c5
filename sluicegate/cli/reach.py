"""Waiting for Kafka and checkpoint storage at start, as long-running services do: retry with
backoff, one clear line per attempt, never a traceback.

A wrong ``--bootstrap`` (or a broker not up yet) used to end ``sluicegate worker`` and
``sluicegate coordinator`` with a 30-line traceback; now each attempt logs::

    cannot reach Kafka at 127.0.0.1:1: [Errno 111] Connection refused; retrying in 2 s

Each attempt is `operators.kafka.probe.probe`: one connection with the cluster's security
settings, then a metadata round trip. Credentials or a certificate the cluster refuses are
not retried: the command ends with one line saying what to check (docs/security.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from sluicegate.operators.kafka import KafkaLike
from sluicegate.operators.kafka.exceptions import KafkaUnreachableError
from sluicegate.operators.kafka.probe import probe
from sluicegate.operators.storage import Storage, StorageUnavailableError
from sluicegate.operators.storage.layout import ATTEMPTS

__all__ = ["wait_for_kafka", "wait_for_storage"]

logger = logging.getLogger(__name__)


async def wait_for_kafka(
    kafka: KafkaLike,
    *,
    first_delay_s: float = 1.0,
    max_delay_s: float = 30.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> int:
    """Return once ``kafka`` answers a metadata request; the number of failed attempts.

    Between attempts it waits ``first_delay_s``, doubling up to ``max_delay_s``. Credentials
    or TLS the cluster refuses are not retried: `KafkaAuthenticationError`, one line.
    """

    async def attempt() -> str | None:
        try:
            await probe(kafka)
        except KafkaUnreachableError as exc:
            return f"cannot reach Kafka at {exc.target}: {exc.reason}"
        return None

    return await _backoff(attempt, f"Kafka at {kafka}", first_delay_s, max_delay_s, sleep)


async def wait_for_storage(
    storage: Storage,
    where: str,
    *,
    first_delay_s: float = 1.0,
    max_delay_s: float = 30.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> int:
    """Return once ``storage`` (at ``where``, for the log) lists the coordinator's attempts;
    the number of failed attempts. Backoff as `wait_for_kafka`; only an outage
    (`StorageUnavailableError`) is retried: a refusal (credentials, a bucket that does not
    exist) raises at once."""

    async def attempt() -> str | None:
        try:
            await storage.list(ATTEMPTS)
        except StorageUnavailableError as exc:
            return f"cannot reach checkpoint storage at {where}: {exc.detail}"
        return None

    what = f"checkpoint storage at {where}"
    return await _backoff(attempt, what, first_delay_s, max_delay_s, sleep)


async def _backoff(
    attempt: Callable[[], Awaitable[str | None]],
    what: str,
    delay: float,
    max_delay_s: float,
    sleep: Callable[[float], Awaitable[None]],
) -> int:
    """Call ``attempt`` until it returns None (reached ``what``), logging the reason it
    returns otherwise and waiting ``delay``, doubled each time up to ``max_delay_s``; the
    number of failed attempts."""
    failures = 0
    while (reason := await attempt()) is not None:
        failures += 1
        logger.warning("%s; retrying in %s s", reason, f"{delay:g}")
        await sleep(delay)
        delay = min(delay * 2, max_delay_s)
    if failures:
        logger.info("reached %s", what)
    return failures

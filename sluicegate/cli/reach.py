"""Waiting for Kafka at start, as long-running services do: retry with backoff, one clear line
per attempt, never a traceback.

A wrong ``--bootstrap`` (or a broker not up yet) used to end ``sluicegate worker`` and
``sluicegate coordinator`` with a 30-line traceback; now each attempt logs::

    cannot reach Kafka at 127.0.0.1:1: [Errno 111] Connection refused; retrying in 2 s

The TCP listener is tried first (the Kafka client logs every refused connection as an error),
then a metadata round trip must succeed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiokafka.client import AIOKafkaClient

__all__ = ["wait_for_kafka"]

logger = logging.getLogger(__name__)

_CONNECT_TIMEOUT_S = 5.0


async def wait_for_kafka(
    bootstrap: str,
    *,
    first_delay_s: float = 1.0,
    max_delay_s: float = 30.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> int:
    """Return once ``bootstrap`` answers a metadata request; the number of failed attempts.

    Between attempts it waits ``first_delay_s``, doubling up to ``max_delay_s``.
    """
    delay, failures = first_delay_s, 0
    while True:
        problem = await _problem(bootstrap)
        if problem is None:
            if failures:
                logger.info("reached Kafka at %s", bootstrap)
            return failures
        failures += 1
        logger.warning(
            "cannot reach Kafka at %s: %s; retrying in %s s", bootstrap, problem, f"{delay:g}"
        )
        await sleep(delay)
        delay = min(delay * 2, max_delay_s)


async def _problem(bootstrap: str) -> str | None:
    """Why ``bootstrap`` cannot be used now, or None once it answers."""
    reasons = []
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(host.strip("[]"), int(port)), _CONNECT_TIMEOUT_S
            )
        except (OSError, ValueError, TimeoutError) as exc:
            reasons.append(str(exc) or type(exc).__name__)
            continue
        writer.close()
        await writer.wait_closed()
        break
    else:
        return "; ".join(dict.fromkeys(reasons))
    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        await client.bootstrap()
    except Exception as exc:  # noqa: BLE001 - any failure here means "not yet", said in one line
        return str(exc) or type(exc).__name__
    finally:
        await client.close()
    return None

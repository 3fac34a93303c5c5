"""How model clients retry: one policy and one loop, shared by every provider's client.

Retries are ours, not the SDKs' (each SDK client is built with ``max_retries=0``): the SDKs
ignore ``Retry-After: 0`` and always wait at least ~0.4 s, their backoff base cannot be
configured, and their retries are invisible to our logs. Ours retry what a client reports as
`ModelUnavailableError` (408, 429, 5xx, timeouts, connection failures) up to ``max_retries``
times; each wait is the server's ``Retry-After`` (seconds, 0 included) when it sent one, else
``backoff_s * 2**attempt`` capped at ``max_backoff_s``, minus up to 25 % jitter. A
``Retry-After`` above one minute ends the retries at once: the step is better retried later
by the caller. Every attempt carries the same ``Idempotency-Key`` (the client's request).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from sluicegate.agents.models.exceptions import ModelRequestError, ModelUnavailableError
from sluicegate.operators.exceptions import ConfigError

__all__ = ["MAX_RETRY_AFTER_S", "RetryPolicy", "connection_failure", "status_failure"]

logger = logging.getLogger(__name__)

MAX_RETRY_AFTER_S = 60.0
"""The longest ``Retry-After`` a client waits out; a longer one ends the retries."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long a client retries a model call (module docstring)."""

    max_retries: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ConfigError("max_retries", f"must be >= 0, got {self.max_retries}")
        if self.backoff_s < 0 or self.max_backoff_s < self.backoff_s:
            problem = (
                f"need 0 <= backoff_s <= max_backoff_s, got {self.backoff_s}, {self.max_backoff_s}"
            )
            raise ConfigError("backoff_s", problem)

    def delay(self, attempt: int, retry_after_s: float | None) -> float | None:
        """Seconds to wait before retry ``attempt + 1``; None to stop retrying."""
        if retry_after_s is not None:
            return retry_after_s if retry_after_s <= MAX_RETRY_AFTER_S else None
        backoff = min(self.backoff_s * 2.0**attempt, self.max_backoff_s)
        return backoff * (1 - 0.25 * random.random())

    async def run(self, send: Callable[[], Awaitable[T]], *, model: str) -> T:
        """``send()``'s answer, sent again after each `ModelUnavailableError` it raises while
        the policy allows; the last failure goes up."""
        attempt = 0
        while True:
            try:
                return await send()
            except ModelUnavailableError as failure:
                delay = (
                    None
                    if attempt >= self.max_retries
                    else self.delay(attempt, failure.retry_after_s)
                )
                if delay is None:
                    raise
                attempt += 1
                logger.warning(
                    "model call failed (%s), retry %d of %d in %.2fs",
                    failure, attempt, self.max_retries, delay,
                    extra={"model": model, "status": failure.status, "attempt": attempt},
                )  # fmt: skip
                await asyncio.sleep(delay)


def status_failure(
    status: int, message: str, headers: Mapping[str, str]
) -> ModelUnavailableError | ModelRequestError:
    """What an HTTP error answer means: 408, 429 and 5xx may pass (with the server's
    ``Retry-After``), any other status will not."""
    if status not in (408, 429) and status < 500:
        return ModelRequestError(status, message)
    return ModelUnavailableError(status, message, _retry_after_s(headers.get("retry-after")))


def connection_failure(error: Exception, *, timed_out: bool) -> ModelUnavailableError:
    """What a request that got no answer means (an SDK's connection error ``error``, whose
    cause says why): always worth another try."""
    if timed_out:
        return ModelUnavailableError(None, "request timed out")
    message = getattr(error, "message", str(error))
    reason = f": {error.__cause__}" if error.__cause__ is not None else ""
    return ModelUnavailableError(None, f"{message}{reason}")


def _retry_after_s(header: str | None) -> float | None:
    """``Retry-After`` in seconds; None if absent or not a number (HTTP dates are ignored)."""
    if header is None:
        return None
    try:
        seconds = float(header)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None

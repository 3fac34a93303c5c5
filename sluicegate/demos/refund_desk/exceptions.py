"""Errors of the demo world's client, on the two branches of the root tree.

The tree::

    SluicegateError
    ├── RetryableError
    │   └── WorldUnavailableError   no answer, a timeout or a 5xx: the outcome is unknown
    └── FatalError
        └── WorldRejectedError      a 4xx: the world refused (or the key already holds a refusal)

After a `WorldUnavailableError` an effect may or may not have happened: retry with the same
idempotency key, or ask ``find_effect(key)``.
"""

from __future__ import annotations

from sluicegate import FatalError, RetryableError

__all__ = ["WorldRejectedError", "WorldUnavailableError"]


class WorldUnavailableError(RetryableError):
    """The world did not answer, or answered 5xx; the same call may succeed later."""

    def __init__(self, operation: str, reason: str, status_code: int | None = None) -> None:
        suffix = f" (HTTP {status_code})" if status_code is not None else ""
        super().__init__(f"world {operation} failed{suffix}: {reason}")
        self.operation = operation
        self.reason = reason
        self.status_code = status_code
        """The HTTP status of a 5xx answer; ``None`` when there was no answer at all."""


class WorldRejectedError(FatalError):
    """The world answered 4xx: the call as made will never succeed."""

    def __init__(self, operation: str, status_code: int, error: str, message: str) -> None:
        super().__init__(f"world {operation} rejected (HTTP {status_code} {error}): {message}")
        self.operation = operation
        self.status_code = status_code
        self.error = error
        """Machine-readable code from the world, e.g. ``amount_too_high``."""
        self.message = message

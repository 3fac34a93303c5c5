"""Errors of model clients.

The tree (every model error also derives from :class:`ModelError`, so a caller can catch them
all, and from one of the two root branches, so a caller can always tell whether to retry)::

    SluicegateError
    ├── RetryableError
    │   └── ModelUnavailableError   429, 5xx, timeout or connection failure, after retries
    └── FatalError
        ├── ModelRequestError       the server refused the request (any other 4xx)
        └── ModelResponseError      a 2xx answer that is not a chat completion we can read
"""

from __future__ import annotations

from sluicegate.operators.exceptions import FatalError, RetryableError, SluicegateError

__all__ = ["ModelError", "ModelRequestError", "ModelResponseError", "ModelUnavailableError"]


class ModelError(SluicegateError):
    """Root of every model-client error; each concrete error is also retryable or fatal."""


class ModelUnavailableError(ModelError, RetryableError):
    """The model server answered 429 or 5xx, timed out, or could not be reached.

    The client has already retried with backoff; the step may succeed later. ``status`` is the
    last HTTP status, or None when no answer came (timeout, connection failure).
    ``retry_after_s`` is the server's last ``Retry-After``, when it sent one.
    """

    def __init__(
        self, status: int | None, message: str, retry_after_s: float | None = None
    ) -> None:
        shown = "no answer" if status is None else f"HTTP {status}"
        super().__init__(f"model unavailable ({shown}): {message}")
        self.status = status
        self.message = message
        self.retry_after_s = retry_after_s


class ModelRequestError(ModelError, FatalError):
    """The model server refused the request with a 4xx (bad request, auth, unknown model...).

    Sending the same request again will not help.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"model request refused (HTTP {status}): {message}")
        self.status = status
        self.message = message


class ModelResponseError(ModelError, FatalError):
    """The server answered 2xx with something that is not a usable chat completion
    (no choices, a tool call of an unknown kind, ...)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"unusable model response: {message}")
        self.message = message

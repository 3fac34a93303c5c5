"""Model clients: any chat-completions server through the ``openai`` SDK, and a scripted
stand-in for demos and tests.

Errors (from :mod:`agents.models.exceptions`)::

    SluicegateError
    ├── RetryableError
    │   └── ModelUnavailableError   429, 5xx, timeout or connection failure, after retries
    └── FatalError
        ├── ModelRequestError       the server refused the request (any other 4xx)
        └── ModelResponseError      a 2xx answer that is not a chat completion we can read

Every one of them also derives from ``ModelError``.
"""

from agents.models.exceptions import (
    ModelError,
    ModelRequestError,
    ModelResponseError,
    ModelUnavailableError,
)
from agents.models.openai_client import OpenAIModel
from agents.models.pricing import Price
from agents.models.scripted import Policy, ScriptedModel, estimate_tokens

__all__ = [
    "ModelError",
    "ModelRequestError",
    "ModelResponseError",
    "ModelUnavailableError",
    "OpenAIModel",
    "Policy",
    "Price",
    "ScriptedModel",
    "estimate_tokens",
]

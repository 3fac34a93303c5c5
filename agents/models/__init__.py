"""Model clients: any chat-completions server through the ``openai`` SDK, and a scripted
stand-in for demos and tests.

Their errors, and which of them to retry: :mod:`agents.models.exceptions`.
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

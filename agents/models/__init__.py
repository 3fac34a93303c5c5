"""Model clients: any chat-completions server through the ``openai`` SDK, and a scripted
stand-in for demos and tests.

Their errors, and which of them to retry: :mod:`agents.models.exceptions`. `OpenAIModel` is
loaded on first use, so that the run machine (which needs only `agents.models.contract`) does not
load an HTTP client.
"""

from typing import TYPE_CHECKING, Any

from sluicegate.agents.models.exceptions import (
    ModelError,
    ModelRequestError,
    ModelResponseError,
    ModelUnavailableError,
)
from sluicegate.agents.models.pricing import Price
from sluicegate.agents.models.scripted import Policy, ScriptedModel, estimate_tokens

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

if TYPE_CHECKING:
    from sluicegate.agents.models.openai_client import OpenAIModel


def __getattr__(name: str) -> Any:
    if name == "OpenAIModel":
        from sluicegate.agents.models.openai_client import OpenAIModel

        return OpenAIModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

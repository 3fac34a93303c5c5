"""Which model client an agent gets from the environment: `ModelSettings` and `model_from_env`.

``SLUICEGATE_MODEL_PROVIDER`` chooses the protocol: ``openai`` (chat completions: OpenAI,
vLLM, Ollama, LM Studio, llama.cpp), ``anthropic`` (the Messages API) or ``scripted`` (the
agent's own stand-in, no API key). Unset, it follows the keys present: ``SLUICEGATE_MODEL_URL``
or ``OPENAI_API_KEY`` -> openai, else ``ANTHROPIC_API_KEY`` -> anthropic, else scripted.
``SLUICEGATE_MODEL`` names the model (default: `DEFAULT_MODELS`), ``SLUICEGATE_MODEL_URL`` the
server. An agent that sets its model in code (``Agent(model=AnthropicModel(...))``) reads none
of this.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Literal

from pydantic import ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from sluicegate.agents.models.contract import ModelClient
from sluicegate.operators.exceptions import ConfigError

__all__ = ["DEFAULT_MODELS", "ModelSettings", "model_from_env"]

Provider = Literal["openai", "anthropic", "scripted"]

DEFAULT_MODELS: Mapping[str, str] = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}
"""The model each provider gets when ``SLUICEGATE_MODEL`` is unset."""


class ModelSettings(BaseSettings):
    """The model an agent built by `model_from_env` calls (the demo's agents are)."""

    model_config = SettingsConfigDict(
        env_prefix="SLUICEGATE_",
        frozen=True,
        extra="ignore",
        env_ignore_empty=True,
        use_attribute_docstrings=True,
    )

    model_provider: Provider | None = None
    """``openai``, ``anthropic`` or ``scripted``; unset: from the keys present (see
    `agents.models.selection`)."""
    model: str | None = None
    """The model's name (default: ``gpt-4o-mini`` for openai, ``claude-sonnet-4-5`` for
    anthropic)."""
    model_url: str | None = None
    """The server's base URL (a chat-completions server's ``.../v1``, or a Messages API
    server's root); unset: the provider's own API."""

    def provider(self) -> Provider:
        """The provider chosen (module docstring)."""
        if self.model_provider is not None:
            return self.model_provider
        if self.model_url or os.environ.get("OPENAI_API_KEY"):
            return "openai"
        if os.environ.get("ANTHROPIC_API_KEY"):
            return "anthropic"
        return "scripted"


def model_from_env(scripted: Callable[[], ModelClient]) -> ModelClient:
    """The client `ModelSettings` choose; ``scripted()`` when they choose the stand-in.
    Raises `ConfigError` naming the variable when one is invalid."""
    try:
        settings = ModelSettings()
    except ValidationError as error:
        first = error.errors()[0]
        variable = f"SLUICEGATE_{str(first['loc'][0]).upper()}"
        raise ConfigError(variable, f"{first['msg']} (got {first['input']!r})") from None
    provider = settings.provider()
    if provider == "scripted":
        return scripted()
    name = settings.model or DEFAULT_MODELS[provider]
    if provider == "anthropic":
        from sluicegate.agents.models.anthropic_client import AnthropicModel

        return AnthropicModel(model=name, base_url=settings.model_url)
    from sluicegate.agents.models.openai_client import OpenAIModel

    return OpenAIModel(model=name, base_url=settings.model_url)

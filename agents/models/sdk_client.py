"""`SdkModel`: what the model clients built on a provider's SDK share (`OpenAIModel`,
`AnthropicModel`): their checked settings, the model's name and price, a ``repr`` that masks
the key, and closing the SDK's HTTP connections."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar

from sluicegate.agents.models.pricing import PRICES, Price, price_of
from sluicegate.agents.models.retries import RetryPolicy
from sluicegate.operators.exceptions import ConfigError

__all__ = ["PLACEHOLDER_KEY", "SdkModel"]

PLACEHOLDER_KEY = "not-needed"
"""Sent when no key is given or set: a local server speaking the protocol wants some key."""


class _SdkClient(Protocol):
    @property
    def base_url(self) -> object: ...

    async def close(self) -> None: ...


C = TypeVar("C", bound=_SdkClient)


class SdkModel(Generic[C]):
    """The common part of an SDK-backed client; a subclass sets ``_client`` (its SDK's client
    ``C``, built with the SDK's retries off: ``self._retries`` retries)."""

    _client: C

    def __init__(
        self,
        *,
        model: str,
        timeout_s: float,
        max_retries: int,
        price: Price | None,
        prices: Mapping[str, Price] = PRICES,
        backoff_s: float,
        max_backoff_s: float,
    ) -> None:
        if not model:
            raise ConfigError("model", "must name a model")
        if timeout_s <= 0:
            raise ConfigError("timeout_s", f"must be > 0, got {timeout_s}")
        self._retries = RetryPolicy(max_retries, backoff_s, max_backoff_s)
        self._model = model
        self._price = price if price is not None else price_of(model, prices)

    @property
    def model(self) -> str:
        """The model name sent with every request."""
        return self._model

    @property
    def base_url(self) -> str:
        """The server's base URL."""
        return str(self._client.base_url)

    @property
    def price(self) -> Price:
        """What this model's tokens cost."""
        return self._price

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(model={self._model!r}, base_url={self.base_url!r}, api_key='***')"

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

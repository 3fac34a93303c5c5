"""What a model's tokens cost: a `Price`, and a table of them by model name that budgets use.

`PRICES` holds list prices (US dollars per million tokens, input and output) of common hosted
models, as published when this release was made; providers change them, so check yours. A
client looks its model up with `price_of`: a name matches a key equal to it, or starting with
the key and a ``-`` (a dated snapshot: ``claude-sonnet-4-5-20250929`` is ``claude-sonnet-4-5``),
the longest key winning; a model in no key is free (a local model). Extend or replace the table
per client (``OpenAIModel(..., prices={**PRICES, "my-model": Price(...)})``), or give the price
itself (``price=``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PRICES", "Price", "price_of"]

_PER_MTOK = 1_000_000


class Price(BaseModel):
    """Price of a model in US dollars per million tokens; the default is free (local models)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_per_mtok_usd: float = Field(default=0.0, ge=0.0)
    output_per_mtok_usd: float = Field(default=0.0, ge=0.0)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Dollars that ``prompt_tokens`` in and ``completion_tokens`` out cost."""
        return (
            prompt_tokens * self.input_per_mtok_usd + completion_tokens * self.output_per_mtok_usd
        ) / _PER_MTOK


def _p(input_usd: float, output_usd: float) -> Price:
    return Price(input_per_mtok_usd=input_usd, output_per_mtok_usd=output_usd)


PRICES: Mapping[str, Price] = MappingProxyType(
    {
        # Anthropic (Messages API)
        "claude-opus-4-5": _p(5.0, 25.0),
        "claude-opus-4-1": _p(15.0, 75.0),
        "claude-opus-4": _p(15.0, 75.0),
        "claude-sonnet-4-5": _p(3.0, 15.0),
        "claude-sonnet-4": _p(3.0, 15.0),
        "claude-haiku-4-5": _p(1.0, 5.0),
        "claude-3-5-haiku": _p(0.8, 4.0),
        # OpenAI (chat completions)
        "gpt-5": _p(1.25, 10.0),
        "gpt-5-mini": _p(0.25, 2.0),
        "gpt-5-nano": _p(0.05, 0.4),
        "gpt-4.1": _p(2.0, 8.0),
        "gpt-4.1-mini": _p(0.4, 1.6),
        "gpt-4.1-nano": _p(0.1, 0.4),
        "gpt-4o": _p(2.5, 10.0),
        "gpt-4o-mini": _p(0.15, 0.6),
    }
)
"""List prices by model name (module docstring)."""


def price_of(model: str, prices: Mapping[str, Price] = PRICES) -> Price:
    """The price of ``model`` in ``prices`` (module docstring's rule); free when absent."""
    keys = [key for key in prices if model == key or model.startswith(f"{key}-")]
    return prices[max(keys, key=len)] if keys else Price()

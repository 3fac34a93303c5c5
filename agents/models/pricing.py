"""What a model's tokens cost."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Price"]

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

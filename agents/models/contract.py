"""What an agent exchanges with a model: chat messages, tool calls, usage, and the client contract.

Every type here is a pydantic model because it is persisted: a model response is recorded in
the effect journal (so a replay takes the same decisions) and messages live in `RunState`.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ChatMessage",
    "ModelClient",
    "ModelResponse",
    "StopReason",
    "ToolCall",
    "ToolSchema",
    "Usage",
]


class ToolCall(BaseModel):
    """One tool call the model asks for; ``arguments`` is the JSON text the model wrote."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str


class ChatMessage(BaseModel):
    """One message of a conversation, in the chat-completions shape."""

    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    """For ``role="tool"``: the id of the call this message answers."""


class Usage(BaseModel):
    """Tokens and money one model call cost."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "other"]
"""Why the model stopped, in words of no provider: ``end_turn`` (it answered), ``tool_use`` (it
calls tools), ``max_tokens`` (cut at the output limit or the context window), ``stop_sequence``,
``refusal`` (it refused, or a content filter stopped it), ``other``."""


class ModelResponse(BaseModel):
    """What a model call returned: the assistant message, what it cost and why it stopped.

    It is what the journal records of a model call, whichever provider answered, so that a run
    recorded with one provider replays with any other."""

    model_config = ConfigDict(frozen=True)

    message: ChatMessage
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    stop_reason: StopReason | None = None
    """None: the client did not say (a scripted model, or a journal entry older than it)."""


class ToolSchema(BaseModel):
    """A tool as the model sees it: name, description and JSON schema of its arguments."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any]


class ModelClient(Protocol):
    """Calls a chat model once. Retries of transient failures happen inside; what escapes is
    `operators.exceptions.RetryableError` (try the step again later) or `FatalError`."""

    async def complete(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSchema],
        *,
        idempotency_key: str,
    ) -> ModelResponse:
        """Return the model's next message for ``messages``, which may call ``tools``."""
        ...
